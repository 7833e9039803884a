"""A converted model under torch.compile on the CPU backend: fullgraph with zero graph breaks,
compiled equal to eager bit for bit where kerneld's ops see the same inputs, a transformer
block's elementwise work fused around kerneld's ops as it is for bf16, and new token counts
without a recompile each.

The bound on a whole block (bench/torch/llama.py's, bf16): compiled kerneld matches eager
kerneld, in SQNR of the block's output and of its input's gradient, within 10 dB of how closely
compiled bf16 matches eager bf16 in the same run. Inductor reorders and fuses the elementwise
work around the GEMMs in either model, so neither is bitwise; kerneld's quantizers then see
inputs that differ in their last bf16 bits, and a flipped FP8 rounding moves a value by up to
1/16 of it. Measured here: bf16 50.9 / 59.3 dB, kerneld 58.8 / 54.7 dB (output / gradient)."""
import re

import pytest

from conftest import require_torch

torch = require_torch(2, 6)
import torch._dynamo  # noqa: E402
from torch import nn  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

import llama  # noqa: E402
from kerneld.torch import convert_all, convert_to_float8_blockwise  # noqa: E402


def sqnr(ref, actual) -> float:
    ref, actual = ref.detach().double(), actual.detach().double()
    noise = (ref - actual).norm()
    return float("inf") if noise == 0 else float(20 * torch.log10(ref.norm() / noise))


def graph_breaks() -> int:
    return sum(torch._dynamo.utils.counters["graph_break"].values())


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


def linear_stack(dtype):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512, bias=False), nn.Linear(512, 384),
                          nn.Linear(384, 256, bias=False)).to(dtype)
    return convert_to_float8_blockwise(model, module_filter_fn=convert_all)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_stack_of_converted_linears_compiles_and_equals_eager_bit_for_bit(runtime, dtype):
    """Nothing sits between the Linears, so every kerneld op sees the same inputs compiled and
    eager: outputs and gradients are equal bit for bit."""
    model = linear_stack(dtype)
    x = torch.randn(320, 256).to(dtype)
    dy = torch.randn(320, 256).to(dtype)

    def run(m):
        xi = x.clone().requires_grad_()
        y = m(xi)
        y.backward(dy)
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        return y.detach(), xi.grad, grads

    y_e, dx_e, g_e = run(model)
    compiled = torch.compile(model, fullgraph=True)
    y_c, dx_c, g_c = run(compiled)
    assert graph_breaks() == 0
    assert torch.equal(y_c, y_e) and torch.equal(dx_c, dx_e)
    for name in g_e:
        if name.endswith("weight"):
            assert torch.equal(g_c[name], g_e[name]), name
        else:
            # The bias gradient is dY summed over the tokens by PyTorch, not kerneld: inductor's
            # reduction order differs from eager's.
            torch.testing.assert_close(g_c[name], g_e[name], rtol=1e-5, atol=1e-5)


def block_and_inputs(kerneld_fp8: bool):
    cfg = llama.config("debug", n_layers=1)
    torch.manual_seed(1)
    model = llama.Llama(cfg).to(torch.bfloat16)
    if kerneld_fp8:
        convert_to_float8_blockwise(model, module_filter_fn=lambda m, fqn: fqn != "output")
    block = model.layers[0]
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 128, cfg.dim, generator=g).to(torch.bfloat16)
    dy = torch.randn(2, 128, cfg.dim, generator=g).to(torch.bfloat16)
    return block, model.rope_cos, model.rope_sin, x, dy


def run_block(block, cos, sin, x, dy):
    xi = x.clone().requires_grad_()
    y = block(xi, cos, sin)
    y.backward(dy)
    block.zero_grad(set_to_none=True)
    return y.detach(), xi.grad


def fused_kernels(code) -> int:
    """The fused elementwise/reduction kernels inductor generated (CPU: cpp_fused_*)."""
    return sum(len(re.findall(r"^cpp_fused_\w+ = ", c, flags=re.M)) for c in code)


def compiled_against_eager(kerneld_fp8: bool):
    block, cos, sin, x, dy = block_and_inputs(kerneld_fp8)
    y_e, dx_e = run_block(block, cos, sin, x, dy)
    compiled = torch.compile(block, fullgraph=True)
    (y_c, dx_c), code = run_and_get_code(run_block, compiled, cos, sin, x, dy)
    return sqnr(y_e, y_c), sqnr(dx_e, dx_c), fused_kernels(code)


def test_a_converted_block_compiles_fused_and_as_close_to_eager_as_bf16(runtime):
    bf16_y, bf16_dx, bf16_kernels = compiled_against_eager(False)
    torch._dynamo.reset()
    fp8_y, fp8_dx, fp8_kernels = compiled_against_eager(True)
    assert graph_breaks() == 0
    # RMSNorm, RoPE, SwiGLU and the residual adds fuse into as few kernels as for bf16 (the
    # Linears leave the graph as opaque custom ops, as bf16's extern GEMMs do).
    assert 0 < fp8_kernels <= bf16_kernels, (fp8_kernels, bf16_kernels)
    print(f"compiled vs eager, block output / input gradient SQNR: bf16 {bf16_y:.1f} / "
          f"{bf16_dx:.1f} dB, kerneld {fp8_y:.1f} / {fp8_dx:.1f} dB; fused kernels bf16 "
          f"{bf16_kernels}, kerneld {fp8_kernels}")
    assert fp8_y >= bf16_y - 10.0, (fp8_y, bf16_y)
    assert fp8_dx >= bf16_dx - 10.0, (fp8_dx, bf16_dx)


def test_new_token_counts_do_not_recompile_each_time(runtime):
    model = linear_stack(torch.bfloat16)
    compiled = torch.compile(model, fullgraph=True)
    for tokens in (256, 384, 512, 640, 768):
        x = torch.randn(tokens, 256).to(torch.bfloat16).requires_grad_()
        compiled(x).sum().backward()
    # The first size compiles statically, the second marks the dimension dynamic; the rest
    # reuse that graph.
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert frames <= 2, frames
    assert graph_breaks() == 0
