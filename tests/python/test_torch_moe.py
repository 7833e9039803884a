"""kerneld.torch.Float8MoEExperts on the CPU backend against an fp32 reference: grouped forward
over token groups given by device-side end offsets (empty and unaligned groups), K-grouped
wgrad over groups padded by the daemon, and dgrad. SQNR threshold 27 dB for Y, dX and dW, as
for the Linear (measured 28.7-28.9 dB here)."""
import pytest

from conftest import require_torch  # noqa: E402

torch = require_torch(2, 6)
from kerneld.torch import Float8MoEExperts  # noqa: E402

SQNR_DB = 27.0


def sqnr(ref, actual) -> float:
    ref, actual = ref.double(), actual.double()
    return float(20 * torch.log10(ref.norm() / (ref - actual).norm()))


def reference(x, weight, ends):
    outs, start = [], 0
    for e, end in enumerate(ends.tolist()):
        outs.append(x[start:end] @ weight[e].t())
        start = end
    return torch.cat(outs)


@pytest.mark.parametrize("dtype,ends_dtype", [(torch.float32, torch.int32),
                                              (torch.bfloat16, torch.int64)])
def test_experts_against_fp32(runtime, dtype, ends_dtype):
    torch.manual_seed(0)
    experts = Float8MoEExperts(4, 256, 128, dtype=dtype)
    ends = torch.tensor([100, 100, 450, 700], dtype=ends_dtype)  # an empty group, odd sizes
    x = torch.randn(700, 256).to(dtype).requires_grad_()
    y = experts(x, ends)
    dy = torch.randn_like(y)
    y.backward(dy)
    assert y.shape == (700, 128) and y.dtype == dtype
    xr = x.detach().float().requires_grad_()
    wr = experts.weight.detach().float().requires_grad_()
    yr = reference(xr, wr, ends)
    yr.backward(dy.float())
    assert sqnr(yr, y) >= SQNR_DB, sqnr(yr, y)
    assert sqnr(xr.grad, x.grad) >= SQNR_DB, sqnr(xr.grad, x.grad)
    assert experts.weight.grad.shape == experts.weight.shape
    for e in (0, 2, 3):
        assert sqnr(wr.grad[e], experts.weight.grad[e]) >= SQNR_DB
    assert torch.all(experts.weight.grad[1] == 0)  # the empty expert's gradient


def test_bad_group_ends_are_refused(runtime):
    experts = Float8MoEExperts(2, 128, 128)
    x = torch.randn(256, 128)
    with pytest.raises(ValueError, match="group_ends must be \\(2,\\)"):
        experts(x, torch.tensor([256], dtype=torch.int32))
    import kerneld
    with pytest.raises(kerneld.InvalidArgument, match="group_ends"):
        experts(x, torch.tensor([200, 100], dtype=torch.int32))  # decreasing
