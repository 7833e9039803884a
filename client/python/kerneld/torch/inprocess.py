"""The in-process blockwise FP8 path kerneld is measured against (GPU tests and bench/torch/):
the same recipe as Float8BlockwiseLinear (1x128 activations, 128x128 weights, dual
quantization of X and dY, NT forward, NN dgrad, TN wgrad), with torch.compile'd quantizers and
torch._scaled_mm (cuBLASLt's blockwise FP8) in the trainer's own process. Needs PyTorch with
float8 dtypes and blockwise _scaled_mm (2.9+) on an sm_90 GPU; the token count must be a
multiple of 128.

_scaled_mm(a, b, scale_a, scale_b) takes a (M,K) row-major and b (K,N) column-major; a 1x128
scale tensor is (rows, K/128) with the rows adjacent (column-major), a 128x128 one
(N/128, K/128) row-major as seen through b.t() (torch's ScaledBlas.cpp checks both)."""
from __future__ import annotations

import functools

import torch
from torch import nn

FP8_MAX = 448.0
EPS = 1e-12


def quantize_1x128(x: torch.Tensor):
    """(codes e4m3fn (R,C), stored scales f32 (R, C/128)) of x (R,C): the kerneld recipe,
    scale = 448 / max(amax, eps) as one fp32 division, codes saturated then rounded."""
    r, c = x.shape
    xf = x.float().reshape(r, c // 128, 128)
    amax = xf.abs().amax(dim=-1, keepdim=True).clamp(min=EPS)
    scale = torch.full_like(amax, FP8_MAX) / amax
    codes = (xf * scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(r, c)
    # NOTE: row-major codes whatever the input's strides: _scaled_mm takes only row-major a and
    # column-major b, and inductor otherwise keeps a transposed input's layout.
    return codes.contiguous(), (torch.ones_like(scale) / scale).reshape(r, c // 128)


def quantize_128x128(w: torch.Tensor):
    """(codes (N,K), stored scales (N/128, K/128)) of w with 128x128 blocks (N, K multiples of
    128)."""
    n, k = w.shape
    wf = w.float().reshape(n // 128, 128, k // 128, 128)
    amax = wf.abs().amax(dim=(1, 3), keepdim=True).clamp(min=EPS)
    scale = torch.full_like(amax, FP8_MAX) / amax
    codes = (wf * scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(n, k)
    return codes, (torch.ones_like(scale) / scale).reshape(n // 128, k // 128)


def quantize_dual(x: torch.Tensor):
    """1x128 codes of x and of xᵀ (one compiled kernel reads x for both)."""
    codes, scales = quantize_1x128(x)
    codes_t, scales_t = quantize_1x128(x.t())
    return codes, scales, codes_t, scales_t


@functools.lru_cache(maxsize=None)
def compiled(name: str):
    """The torch.compile'd quantizer `name`, compiled once per process with symbolic shapes
    ($KD_INPROCESS_DYNAMIC=0: once per shape, static kernels)."""
    import os
    fn = {"dual": quantize_dual, "1x128": quantize_1x128, "128x128": quantize_128x128}[name]
    dynamic = os.environ.get("KD_INPROCESS_DYNAMIC", "1") != "0"
    if not dynamic:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    return torch.compile(fn, dynamic=dynamic)


def _col(scales: torch.Tensor) -> torch.Tensor:
    """A (rows, blocks) scale tensor laid out column-major, as _scaled_mm wants 1x128 scales."""
    return scales.t().contiguous().t()


def scaled_mm_1x128_128x128(a8, sa, w8, sw, out_dtype=torch.bfloat16):
    """a (M,K) 1x128 · w (N,K)ᵀ 128x128 -> (M,N)."""
    return torch._scaled_mm(a8, w8.t(), scale_a=_col(sa), scale_b=sw.t(), out_dtype=out_dtype)


class _InProcessFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        n, k = weight.shape
        lead = x.shape[:-1]
        x2 = x.reshape(-1, k)
        if x2.shape[0] % 128:
            raise ValueError(f"tokens={x2.shape[0]} must be a multiple of 128 here")
        x8, sx, xt8, sxt = compiled("dual")(x2)
        w8, sw = compiled("128x128")(weight)
        y = scaled_mm_1x128_128x128(x8, sx, w8, sw)
        ctx.save_for_backward(xt8, sxt, w8, sw)
        ctx.meta = (lead, x.dtype, weight.dtype)
        return y.view(*lead, n).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xt8, sxt, w8, sw = ctx.saved_tensors
        lead, x_dtype, w_dtype = ctx.meta
        n, k = w8.shape
        dy2 = dy.reshape(-1, n)
        dy8, sdy, dyt8, sdyt = compiled("dual")(dy2)
        dx = dw = None
        if ctx.needs_input_grad[0]:
            # dX (M,K) = dY (M,N) · W (N,K): b = W as (N,K) column-major, i.e. Wᵀ row-major.
            wt8 = w8.t().contiguous()
            dx = torch._scaled_mm(dy8, wt8.t(), scale_a=_col(sdy),
                                  scale_b=sw.t().contiguous().t(), out_dtype=torch.bfloat16)
            dx = dx.view(*lead, k).to(x_dtype)
        if ctx.needs_input_grad[1]:
            # dW (N,K) = dYᵀ (N,M) · X (M,K): both 1x128 along the tokens.
            dw = torch._scaled_mm(dyt8.contiguous(), xt8.contiguous().t(), scale_a=_col(sdyt),
                                  scale_b=sxt.t().contiguous(), out_dtype=torch.bfloat16)
            dw = dw.to(w_dtype)
        return dx, dw


class InProcessFloat8BlockwiseLinear(nn.Linear):
    """nn.Linear through the in-process blockwise FP8 path (the peer kerneld is timed against).
    Bias added by PyTorch, as in Float8BlockwiseLinear."""

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "InProcessFloat8BlockwiseLinear":
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = linear.in_features, linear.out_features
        new.weight, new.bias = linear.weight, linear.bias
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _InProcessFn.apply(x, self.weight)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y
