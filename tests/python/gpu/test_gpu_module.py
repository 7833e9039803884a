"""Float8BlockwiseLinear and Float8MoEExperts on CUDA tensors: against fp32 and bf16
nn.Linear by SQNR, against the in-process blockwise FP8 path (the same recipe through
torch._scaled_mm and torch.compile'd quantizers), both dgrad forms (NN on W, NT on Wᵀ's codes), fp32 master weights, odd token counts, and a
stack of Linears compiled (fullgraph) equal to eager bit for bit. Thresholds: 27 dB against fp32 (as
on the CPU backend); 40 dB between kerneld and the in-process path (same codes, both accumulate
in fp32; they differ by accumulation order and the bf16 rounding of outputs)."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gpu_util import requires_cuda, sqnr  # noqa: E402
from kerneld.torch import Float8BlockwiseLinear, Float8MoEExperts  # noqa: E402
from kerneld.torch.inprocess import InProcessFloat8BlockwiseLinear  # noqa: E402

pytestmark = requires_cuda


def fwd_bwd(layer, x, dy):
    xi = x.detach().clone().requires_grad_()
    layer.weight.grad = None
    y = layer(xi)
    y.backward(dy)
    return y.detach(), xi.grad, layer.weight.grad.clone()


@pytest.mark.parametrize("dgrad", ["nn", "nt"])
@pytest.mark.parametrize("m,k,n", [(4096, 4096, 4096), (2048, 4096, 14336), (1000, 1024, 512)])
def test_against_fp32_bf16_and_the_in_process_path(gpu_runtime, m, k, n, dgrad):
    torch.manual_seed(0)
    base = nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    ref = nn.Linear(k, n, bias=False, device="cuda", dtype=torch.float32)
    with torch.no_grad():
        ref.weight.copy_(base.weight.float())
    y32, dx32, dw32 = fwd_bwd(ref, x.float(), dy.float())
    yb, dxb, dwb = fwd_bwd(base, x, dy)
    kd_layer = Float8BlockwiseLinear.from_linear(base, dgrad=dgrad)
    yk, dxk, dwk = fwd_bwd(kd_layer, x, dy)
    for name, r, b, q in (("Y", y32, yb, yk), ("dX", dx32, dxb, dxk), ("dW", dw32, dwb, dwk)):
        assert sqnr(r, q) >= 27, f"{name}: kerneld {sqnr(r, q):.2f} dB (bf16 {sqnr(r, b):.2f})"
    if m % 128 == 0:
        ip_layer = InProcessFloat8BlockwiseLinear.from_linear(base)
        yi, dxi, dwi = fwd_bwd(ip_layer, x, dy)
        for name, i, q in (("Y", yi, yk), ("dX", dxi, dxk), ("dW", dwi, dwk)):
            assert sqnr(i, q) >= 40, f"{name}: kerneld vs in-process {sqnr(i, q):.2f} dB"


def test_fp32_master_weights_get_fp32_gradients(gpu_runtime):
    torch.manual_seed(1)
    layer = Float8BlockwiseLinear(1024, 1024, bias=False, device="cuda", dtype=torch.float32)
    ref = nn.Linear(1024, 1024, bias=False, device="cuda", dtype=torch.float32)
    with torch.no_grad():
        ref.weight.copy_(layer.weight)
    x = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16)
    y, dx, dw = fwd_bwd(layer, x, dy)
    _, _, dw32 = fwd_bwd(ref, x.float(), dy.float())
    assert y.dtype == torch.bfloat16 and dw.dtype == torch.float32
    assert sqnr(dw32, dw) >= 27


def test_a_compiled_stack_of_linears_equals_eager_bit_for_bit(gpu_runtime):
    import torch._dynamo
    torch._dynamo.reset()
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(1024, 4096, bias=False), nn.Linear(4096, 1024, bias=False))
    model = model.to(device="cuda", dtype=torch.bfloat16)
    from kerneld.torch import convert_all, convert_to_float8_blockwise
    convert_to_float8_blockwise(model, module_filter_fn=convert_all)
    x = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)

    def run(m):
        xi = x.clone().requires_grad_()
        y = m(xi)
        y.backward(dy)
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        return y.detach(), xi.grad, grads

    y_e, dx_e, g_e = run(model)
    y_c, dx_c, g_c = run(torch.compile(model, fullgraph=True))
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
    assert torch.equal(y_c, y_e) and torch.equal(dx_c, dx_e)
    assert all(torch.equal(a, b) for a, b in zip(g_c, g_e))


def test_moe_experts_against_fp32(gpu_runtime):
    torch.manual_seed(2)
    e, k, n = 8, 1024, 2048
    experts = Float8MoEExperts(e, k, n, device="cuda", dtype=torch.bfloat16)
    sizes = [512, 0, 1000, 77, 2048, 300, 129, 1024]
    ends = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
    t = sum(sizes)
    x = torch.randn(t, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = experts(x, ends)
    dy = torch.randn_like(y)
    y.backward(dy)
    xr = x.detach().float().requires_grad_()
    wr = experts.weight.detach().float().requires_grad_()
    outs, start = [], 0
    for i, end in enumerate(ends.tolist()):
        outs.append(xr[start:end] @ wr[i].t())
        start = end
    yr = torch.cat(outs)
    yr.backward(dy.float())
    assert sqnr(yr, y) >= 27 and sqnr(xr.grad, x.grad) >= 27
    for i in range(e):
        if sizes[i]:
            assert sqnr(wr.grad[i], experts.weight.grad[i]) >= 27, i
    assert torch.all(experts.weight.grad[1] == 0)
