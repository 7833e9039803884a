"""Ordering without host synchronisation: a trainer kernel writes the layer's input right before
the call and another reads its output right after, behind a long kernel that makes any race
visible; the results equal those of a fully synchronised run, and issuing the calls does not
wait for the long kernel."""
import time

import pytest

torch = pytest.importorskip("torch")

from gpu_util import requires_cuda, sqnr  # noqa: E402
from kerneld.torch import Float8BlockwiseLinear  # noqa: E402

pytestmark = requires_cuda
SLEEP_CYCLES = 100_000_000  # ~50-60 ms of torch.cuda._sleep on an H100


def test_forward_and_backward_are_ordered_on_the_current_stream(gpu_runtime):
    torch.manual_seed(11)
    layer = Float8BlockwiseLinear(1024, 2048, bias=False, device="cuda", dtype=torch.bfloat16)
    sources = [torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    grads = [torch.randn(4096, 2048, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    x = torch.empty(4096, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=False)

    def step(i, racing):
        if racing:
            torch.cuda._sleep(SLEEP_CYCLES)  # a long kernel: a missed wait would read old data
        x.copy_(sources[i])  # written on the stream right before the op
        xi = x.detach().requires_grad_()
        t0 = time.perf_counter()
        y = layer(xi)
        y.backward(grads[i])
        issue = time.perf_counter() - t0
        out = (y * 1).detach()  # read on the stream right after the op
        dx = xi.grad * 1
        if not racing:
            torch.cuda.synchronize()
        return out, dx, issue

    expected = [step(i, racing=False)[:2] for i in range(4)]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    got = [step(i, racing=True) for i in range(4)]
    issued = time.perf_counter() - t0
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    for i, ((y_ref, dx_ref), (y, dx, _)) in enumerate(zip(expected, got)):
        assert sqnr(y_ref, y) > 40, f"step {i}: output read before it was written"
        assert sqnr(dx_ref, dx) > 40, f"step {i}: dX read before it was written"
    # Four 50 ms kernels were queued; the host issued everything before they ran.
    assert issued < 0.5 * elapsed, (issued, elapsed)
    assert max(g[2] for g in got) < 0.03, [g[2] for g in got]
