"""kerneld's ops as PyTorch custom ops (torch.library.custom_op), namespace "kerneld".

torch.compile sees each as one opaque node whose fake (meta) implementation gives its exact
output shapes, dtypes and strides: no graph break, and the elementwise work around it fuses as it
does for bf16. Each real implementation builds its daemon request by name (kerneld.Quantize(...),
kerneld.Gemm(...)) and runs it as one batch through this process's Runtime: ordered on the
current CUDA stream, or synchronously on the CPU backend.

    quantize(x, granularity, out_dtype, transpose_output) -> (codes, scales)
    quantize_dual(x, granularity, out_dtype) -> (codes, scales, codes_t, scales_t)
    gemm(a, a_scales, b, b_scales, variant, out_dtype) -> d            nt, nn, tn
    grouped_gemm(a, a_scales, b, b_scales, group_ends, variant, out_dtype) -> d
                                                                       m_grouped_nt, k_grouped_tn
    pad(x, group_ends, alignment) -> (padded, padded_group_ends)
    unpad(x, group_ends, rows, alignment) -> rows of x
    row_amax(x) -> the largest |x| of each row, float32
    linear(x, weight, dgrad, save) -> (y, xt_codes, xt_scales)         differentiable
    linear_backward(dy, xt_codes, xt_scales, weight, dgrad, need_dx, need_dw) -> (dx, dw)
    linear_fp8_weight(x, w_codes, w_scales, save), linear_fp8_weight_backward(...)
                                                     the same on an already quantized weight
    grouped_linear(x, weight, group_ends, save) -> (y, xpt_codes, xpt_scales, wgrad_ends)
                                                                       differentiable
    grouped_linear_backward(dy, xpt_codes, xpt_scales, wgrad_ends, weight, group_ends, need_dx,
                            need_dw) -> (dx, dw)

FP8 codes are torch.float8_e4m3fn (or the format asked for), scales float32 (MX: float8_e8m0fnu);
the codes the differentiable ops save for their backward are returned as uint8 bit patterns
(e4m3fn codes), which autograd treats as non-differentiable.
The linear ops are blockwise FP8 training's recipe: the forward quantizes X (M,K) with 1x128
blocks along K and Xᵀ with 1x128 blocks along M from one read (the fused dual pass; Xᵀ's codes are
saved for wgrad), W (N,K) with 128x128 blocks, and runs Y = X·Wᵀ (NT); the backward quantizes dY
the same way and W again (saving W's codes would keep an FP8 copy of every weight alive until
its backward, which FSDP's resharding exists to avoid), and runs dX = dY·W (NN, or NT on Wᵀ's
codes with dgrad="nt") and dW = dYᵀ·X (TN over the tokens). A token count that is not a multiple of
128 is padded with zero rows inside the same batch (zero rows add nothing to dW).

1x128 activation scales are row-major unless $KERNELD_A_SCALE_LAYOUT=k_block_major (read at
import): the layout the NT GEMM's TMA scale loads read as they are."""
from __future__ import annotations

import os
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import ops as kops
from .. import shapes
from ..dtypes import ScaleLayout
from ._runtime import default_runtime

E4M3 = torch.float8_e4m3fn
A_SCALE_LAYOUT = ScaleLayout.parse(os.environ.get("KERNELD_A_SCALE_LAYOUT", "row_major"))
_K_MAJOR = A_SCALE_LAYOUT == ScaleLayout.K_BLOCK_MAJOR
_DGRADS = ("nn", "nt")
_OUT_DTYPES = (torch.bfloat16, torch.float32)


def padded_tokens(m):
    """The token count of the saved Xᵀ codes: m, or with one group of m rows padded to 128
    (the pad op's output, whose bound is m + 127 rows)."""
    return m if m % 128 == 0 else (m + 127 + 127) // 128 * 128


def _act_scales(rows, cols, empty, device):
    """An empty 1x128 scale tensor of a (rows, cols) matrix, named as its (rows, cols/128) view:
    row-major, or in the K-block-major layout the transposed view of a (cols/128, rows) tensor.
    A quantize op writes it as _written(view)."""
    if _K_MAJOR:
        return empty((cols // 128, rows), torch.float32, device).t()
    return empty((rows, cols // 128), torch.float32, device)


def _written(scales):
    """The tensor a quantize op writes for 1x128 scales named as the (rows, K/128) view: the
    K-block-major (K/128, rows) tensor itself, or the row-major one."""
    return scales.t() if _K_MAJOR else scales


def _rt_empty(shape, dtype, device):
    return default_runtime().empty(shape, dtype, device)


def _fake_empty(like):
    return lambda shape, dtype, device: like.new_empty(shape, dtype=dtype)


def _check_out_dtype(dtype, what):
    if dtype not in _OUT_DTYPES:
        raise ValueError(f"{what} must be bfloat16 or float32, got {dtype}")


# ----- quantize --------------------------------------------------------------------------------

@torch.library.custom_op("kerneld::quantize", mutates_args=())
def quantize(x: Tensor, granularity: str, out_dtype: torch.dtype = E4M3,
             transpose_output: bool = False,
             group_ends: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """FP8 codes and scales of x (R,C) (or of xᵀ with transpose_output), by kerneld.proto's
    QuantGranularity (its label: "1x128", "128x128", "per_row", "mx1x32", "jagged_rowwise"...)."""
    rt = default_runtime()
    src = rt.place(x)
    codes, scales = _quantize_outputs(src, granularity, out_dtype, transpose_output, group_ends,
                                      _rt_empty)
    ends = rt.place(group_ends) if group_ends is not None else None
    rt.submit([kops.Quantize(input=src, output=codes, scales=scales, granularity=granularity,
                             transpose_output=transpose_output, group_ends=ends)], x.device)
    return codes, scales


def _quantize_outputs(x, granularity, out_dtype, transpose_output, group_ends, empty):
    rows, cols = (x.shape[1], x.shape[0]) if transpose_output else (x.shape[0], x.shape[1])
    groups = group_ends.shape[0] if group_ends is not None else 0
    from ..dtypes import torch_dtype
    codes = empty((rows, cols), out_dtype, x.device)
    scales = empty(shapes.quantize_scales(granularity, rows, cols, groups=groups),
                   torch_dtype(shapes.scales_dtype(granularity)), x.device)
    return codes, scales


@quantize.register_fake
def _(x, granularity, out_dtype=E4M3, transpose_output=False, group_ends=None):
    return _quantize_outputs(x, granularity, out_dtype, transpose_output, group_ends,
                             _fake_empty(x))


@torch.library.custom_op("kerneld::quantize_dual", mutates_args=())
def quantize_dual(x: Tensor, granularity: str,
                  out_dtype: torch.dtype = E4M3) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The fused dual pass of x (R,C), R and C multiples of 128: X's codes and scales and Xᵀ's
    from one read ("1x128": Xᵀ's blocks run along R; "128x128": Xᵀ's codes are X's transposed)."""
    rt = default_runtime()
    src = rt.place(x)
    out = _dual_outputs(src, granularity, out_dtype, _rt_empty)
    rt.submit([kops.Quantize(input=src, output=out[0], scales=out[1], granularity=granularity,
                             output_t=out[2], scales_t=out[3])], x.device)
    return out


def _dual_outputs(x, granularity, out_dtype, empty):
    rows, cols = x.shape
    return (empty((rows, cols), out_dtype, x.device),
            empty(shapes.quantize_scales(granularity, rows, cols), torch.float32, x.device),
            empty((cols, rows), out_dtype, x.device),
            empty(shapes.dual_scales_t(granularity, rows, cols), torch.float32, x.device))


@quantize_dual.register_fake
def _(x, granularity, out_dtype=E4M3):
    return _dual_outputs(x, granularity, out_dtype, _fake_empty(x))


# ----- gemm ------------------------------------------------------------------------------------

@torch.library.custom_op("kerneld::gemm", mutates_args=())
def gemm(a: Tensor, a_scales: Tensor, b: Tensor, b_scales: Tensor, variant: str,
         out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    """Blockwise-scaled FP8 GEMM, kerneld.proto's GemmVariant "nt" (a·bᵀ), "nn" (a·b) or "tn"
    (both 1x128 along the reduction), fp32 accumulation, d in out_dtype (bf16 or f32)."""
    _check_out_dtype(out_dtype, "out_dtype")
    rt = default_runtime()
    a, b = rt.place(a), rt.place(b)
    d = rt.empty(shapes.gemm_output(variant, a.shape, b.shape), out_dtype, a.device)
    rt.submit([kops.Gemm(variant=variant, a=a, a_scales=rt.place(a_scales), b=b,
                         b_scales=rt.place(b_scales), d=d)], a.device)
    return d


@gemm.register_fake
def _(a, a_scales, b, b_scales, variant, out_dtype=torch.bfloat16):
    return a.new_empty(shapes.gemm_output(variant, a.shape, b.shape), dtype=out_dtype)


@torch.library.custom_op("kerneld::grouped_gemm", mutates_args=())
def grouped_gemm(a: Tensor, a_scales: Tensor, b: Tensor, b_scales: Tensor, group_ends: Tensor,
                 variant: str, out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    """The MoE GEMMs over token groups (group_ends: the end row of each group, on a's device):
    "m_grouped_nt" (rows of group e times b[e]ᵀ) and "k_grouped_tn" (one d[e] per group,
    reducing over its tokens; every end a multiple of 128)."""
    _check_out_dtype(out_dtype, "out_dtype")
    rt = default_runtime()
    a, b = rt.place(a), rt.place(b)
    ends = rt.place(group_ends)
    shape = shapes.gemm_output(variant, a.shape, b.shape, group_ends.shape[0])
    d = rt.zeros(shape, out_dtype, a.device)
    rt.submit([kops.Gemm(variant=variant, a=a, a_scales=rt.place(a_scales), b=b,
                         b_scales=rt.place(b_scales), d=d, group_ends=ends)], a.device)
    return d


@grouped_gemm.register_fake
def _(a, a_scales, b, b_scales, group_ends, variant, out_dtype=torch.bfloat16):
    return a.new_empty(shapes.gemm_output(variant, a.shape, b.shape, group_ends.shape[0]),
                       dtype=out_dtype)


# ----- pad -------------------------------------------------------------------------------------

@torch.library.custom_op("kerneld::pad", mutates_args=())
def pad(x: Tensor, group_ends: Tensor, alignment: int) -> Tuple[Tensor, Tensor]:
    """Rows of each group of x (T,H) copied so that every group starts at a multiple of
    `alignment`, padding rows zero: (padded (T + G*(alignment-1), H), padded group ends (G) i32),
    the ends computed on the device."""
    rt = default_runtime()
    src, ends = rt.place(x), rt.place(group_ends)
    out = rt.empty((shapes.pad_rows(x.shape[0], group_ends.shape[0], alignment), x.shape[1]),
                   x.dtype, x.device)
    padded_ends = rt.empty((group_ends.shape[0],), torch.int32, x.device)
    rt.submit([kops.Pad(input=src, group_ends=ends, output=out, padded_group_ends=padded_ends,
                        alignment=alignment)], x.device)
    return out, padded_ends


@pad.register_fake
def _(x, group_ends, alignment):
    rows = shapes.pad_rows(x.shape[0], group_ends.shape[0], alignment)
    return x.new_empty((rows, x.shape[1])), group_ends.new_empty(group_ends.shape,
                                                                 dtype=torch.int32)


@torch.library.custom_op("kerneld::unpad", mutates_args=())
def unpad(x: Tensor, group_ends: Tensor, rows: int, alignment: int) -> Tensor:
    """The reverse of pad: the `rows` rows of the groups (group_ends: the unpadded ends)."""
    rt = default_runtime()
    src, ends = rt.place(x), rt.place(group_ends)
    out = rt.empty((rows, x.shape[1]), x.dtype, x.device)
    rt.submit([kops.Unpad(input=src, group_ends=ends, output=out, alignment=alignment)], x.device)
    return out


@unpad.register_fake
def _(x, group_ends, rows, alignment):
    return x.new_empty((rows, x.shape[1]))


# ----- row_amax --------------------------------------------------------------------------------

@torch.library.custom_op("kerneld::row_amax", mutates_args=())
def row_amax(x: Tensor) -> Tensor:
    """The largest magnitude of each row of x (R,C) f32/bf16/f16, exactly, as float32 (R) (NaN
    for a row holding one): the range an FP8 recipe must cover, per token or channel."""
    rt = default_runtime()
    src = rt.place(x)
    out = rt.empty((x.shape[0],), torch.float32, x.device)
    rt.submit([kops.RowAmax(input=src, output=out)], x.device)
    return out


@row_amax.register_fake
def _(x):
    return x.new_empty((x.shape[0],), dtype=torch.float32)


# ----- linear ----------------------------------------------------------------------------------

def _check_linear(x, weight, dgrad):
    if dgrad not in _DGRADS:
        raise ValueError(f'dgrad="{dgrad}" must be one of {", ".join(_DGRADS)}')
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"input {tuple(x.shape)} and weight {tuple(weight.shape)} are not "
                         "(M, K) and (N, K)")
    _check_out_dtype(x.dtype, "the input's dtype")
    if x.device != weight.device:
        raise ValueError(f"input is on {x.device} and weight on {weight.device}")


def _linear_outputs(x, weight, save, empty):
    m, k = x.shape
    n = weight.shape[0]
    y = empty((m, n), x.dtype, x.device)
    if not save:
        return y, empty((0,), torch.uint8, x.device), empty((0,), torch.float32, x.device)
    mp = padded_tokens(m)
    return y, empty((k, mp), torch.uint8, x.device), _act_scales(k, mp, empty, x.device)


def _linear_forward_ops(rt, x, y, xt, xts, w8, ws, save):
    """The forward's ops after W's quantize: pad X when its tokens are off the block and its Xᵀ
    is saved, quantize X (with Xᵀ in the same pass when saved), Y = X·Wᵀ."""
    m, k = x.shape
    device = x.device
    ops = []
    source = x
    if save and m % 128 != 0:
        source = rt.empty((xt.shape[1], k), x.dtype, device)
        ops.append(kops.Pad(input=x, group_ends=rt.group_ends_of(m, device), output=source,
                            padded_group_ends=rt.empty((1,), torch.int32, device),
                            alignment=128))
    x8 = rt.empty((source.shape[0], k), E4M3, device)
    xs = _act_scales(source.shape[0], k, _rt_empty, device)
    if save:
        ops.append(kops.Quantize(input=source, output=x8, scales=_written(xs), granularity="1x128",
                                 scale_layout=A_SCALE_LAYOUT, output_t=xt.view(E4M3),
                                 scales_t=_written(xts)))
    else:
        ops.append(kops.Quantize(input=x, output=x8, scales=_written(xs), granularity="1x128",
                                 scale_layout=A_SCALE_LAYOUT))
    ops.append(kops.Gemm(variant="nt", a=x8[:m], a_scales=xs[:m], b=w8, b_scales=ws, d=y))
    return ops


def _weight_codes(rt, w, device):
    """W (N,K)'s 128x128 codes and scales, and the op that writes them."""
    n, k = w.shape
    w8 = rt.empty((n, k), E4M3, device)
    ws = rt.empty(shapes.quantize_scales("128x128", n, k), torch.float32, device)
    return w8, ws, kops.Quantize(input=w, output=w8, scales=ws, granularity="128x128")


@torch.library.custom_op("kerneld::linear", mutates_args=())
def linear(x: Tensor, weight: Tensor, dgrad: str = "nn",
           save: bool = True) -> Tuple[Tensor, Tensor, Tensor]:
    """Y = X·Wᵀ in blockwise FP8 for X (M,K) bf16/f32 and W (N,K), Y in X's dtype; with `save`,
    also Xᵀ's 1x128 codes and scales for the backward (else two empty tensors)."""
    _check_linear(x, weight, dgrad)
    rt = default_runtime()
    x, w = rt.place(x), rt.place(weight)
    y, xt, xts = _linear_outputs(x, w, save, _rt_empty)
    w8, ws, quantize_w = _weight_codes(rt, w, x.device)
    rt.submit([quantize_w] + _linear_forward_ops(rt, x, y, xt, xts, w8, ws, save), x.device)
    return y, xt, xts


@linear.register_fake
def _(x, weight, dgrad="nn", save=True):
    _check_linear(x, weight, dgrad)
    return _linear_outputs(x, weight, save, _fake_empty(x))


def _linear_backward_outputs(dy, weight_shape, weight_dtype, need_dx, need_dw, empty):
    m, n = dy.shape
    k = weight_shape[1]
    dx = empty((m, k) if need_dx else (0,), dy.dtype, dy.device)
    dw = empty((n, k) if need_dw else (0,), weight_dtype, dy.device)
    return dx, dw


def _linear_backward_ops(rt, dy, xt, xt_scales, dx, dw, dgrad_ops):
    """The backward's ops: pad dY when its tokens are off the block and dW is asked for,
    quantize dY (and dYᵀ in the same pass), then dgrad_ops(dy8, dys) (the dX GEMM and what it
    needs of W) when dX is, and dW = dYᵀ·X (TN over the tokens) when dW is."""
    need_dx, need_dw = dx.numel() > 0, dw.numel() > 0
    m, n = dy.shape
    mp = xt.shape[1]
    device = dy.device
    ops = []
    source = dy
    if need_dw and mp != m:
        source = rt.empty((mp, n), dy.dtype, device)
        ops.append(kops.Pad(input=dy, group_ends=rt.group_ends_of(m, device), output=source,
                            padded_group_ends=rt.empty((1,), torch.int32, device),
                            alignment=128))
    rows = source.shape[0]
    dy8 = dys = dyt = dyts = None
    if need_dx:
        dy8 = rt.empty((rows, n), E4M3, device)
        dys = _act_scales(rows, n, _rt_empty, device)
    if need_dw:
        dyt = rt.empty((n, mp), E4M3, device)
        dyts = rt.empty((n, mp // 128), torch.float32, device)
    if need_dx and need_dw:
        # The dual pass writes dYᵀ's scales in the activation layout; the TN GEMM reads either.
        dyts = _act_scales(n, mp, _rt_empty, device)
        ops.append(kops.Quantize(input=source, output=dy8, scales=_written(dys),
                                 granularity="1x128", scale_layout=A_SCALE_LAYOUT, output_t=dyt,
                                 scales_t=_written(dyts)))
    elif need_dx:
        ops.append(kops.Quantize(input=dy, output=dy8, scales=_written(dys), granularity="1x128",
                                 scale_layout=A_SCALE_LAYOUT))
    else:
        ops.append(kops.Quantize(input=source, output=dyt, scales=dyts, granularity="1x128",
                                 transpose_output=True))
    if need_dx:
        ops += dgrad_ops(dy8[:m], dys[:m])
    if need_dw:
        ops.append(kops.Gemm(variant="tn", a=dyt, a_scales=dyts, b=xt.view(E4M3),
                             b_scales=xt_scales, d=dw))
    return ops


@torch.library.custom_op("kerneld::linear_backward", mutates_args=())
def linear_backward(dy: Tensor, xt: Tensor, xt_scales: Tensor, weight: Tensor, dgrad: str,
                    need_dx: bool, need_dw: bool) -> Tuple[Tensor, Tensor]:
    """dX (M,K) in dY's dtype and dW (N,K) in W's (each an empty tensor when not needed) from
    dY (M,N), the forward's saved Xᵀ codes and scales, and W (quantized again here)."""
    rt = default_runtime()
    dy, w = rt.place(dy), rt.place(weight)
    xt, xt_scales = rt.place(xt), rt.place(xt_scales)
    n, k = w.shape
    device = dy.device
    dx, dw = _linear_backward_outputs(dy, w.shape, w.dtype, need_dx, need_dw, _rt_empty)
    if not (need_dx or need_dw):
        return dx, dw

    def dgrad_ops(dy8, dys):
        if dgrad == "nt":
            wt8 = rt.empty((k, n), E4M3, device)
            wts = rt.empty(shapes.quantize_scales("128x128", k, n), torch.float32, device)
            return [kops.Quantize(input=w, output=wt8, scales=wts, granularity="128x128",
                                  transpose_output=True),
                    kops.Gemm(variant="nt", a=dy8, a_scales=dys, b=wt8, b_scales=wts, d=dx)]
        w8, ws, quantize_w = _weight_codes(rt, w, device)
        return [quantize_w, kops.Gemm(variant="nn", a=dy8, a_scales=dys, b=w8, b_scales=ws,
                                      d=dx)]

    rt.submit(_linear_backward_ops(rt, dy, xt, xt_scales, dx, dw, dgrad_ops), device)
    return dx, dw


@linear_backward.register_fake
def _(dy, xt, xt_scales, weight, dgrad, need_dx, need_dw):
    return _linear_backward_outputs(dy, weight.shape, weight.dtype, need_dx, need_dw,
                                    _fake_empty(dy))


def _linear_setup_context(ctx, inputs, output):
    x, weight, dgrad, save = inputs
    _, xt, xts = output
    ctx.save_for_backward(xt, xts, weight)
    ctx.dgrad = dgrad
    ctx.saved = save


def _linear_backward(ctx, dy, _dxt, _dxts):
    xt, xts, weight = ctx.saved_tensors
    if not ctx.saved:
        raise RuntimeError("kerneld::linear ran with save=False, so it has no backward")
    need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    dx, dw = torch.ops.kerneld.linear_backward(dy, xt, xts, weight, ctx.dgrad, need_dx, need_dw)
    return (dx if need_dx else None), (dw if need_dw else None), None, None


linear.register_autograd(_linear_backward, setup_context=_linear_setup_context)


# ----- linear on a weight already quantized (FSDP2's FP8 all-gather: kerneld.torch.fsdp) --------

def _check_fp8_weight(w_codes, w_scales):
    if w_codes.dtype != torch.uint8 or w_codes.dim() != 2 or w_scales.dtype != torch.float32:
        raise ValueError("w_codes must be (N, K) uint8 e4m3fn codes and w_scales float32")


@torch.library.custom_op("kerneld::linear_fp8_weight", mutates_args=())
def linear_fp8_weight(x: Tensor, w_codes: Tensor, w_scales: Tensor,
                      save: bool = True) -> Tuple[Tensor, Tensor, Tensor]:
    """kerneld::linear on W's 128x128 codes (uint8 e4m3fn bit patterns) and scales instead of W:
    Y, and with `save` Xᵀ's codes and scales."""
    _check_fp8_weight(w_codes, w_scales)
    _check_linear(x, w_codes, "nn")
    rt = default_runtime()
    x, w8, ws = rt.place(x), rt.place(w_codes).view(E4M3), rt.place(w_scales)
    y, xt, xts = _linear_outputs(x, w8, save, _rt_empty)
    rt.submit(_linear_forward_ops(rt, x, y, xt, xts, w8, ws, save), x.device)
    return y, xt, xts


@linear_fp8_weight.register_fake
def _(x, w_codes, w_scales, save=True):
    return _linear_outputs(x, w_codes, save, _fake_empty(x))


@torch.library.custom_op("kerneld::linear_fp8_weight_backward", mutates_args=())
def linear_fp8_weight_backward(dy: Tensor, xt: Tensor, xt_scales: Tensor, w_codes: Tensor,
                               w_scales: Tensor, weight_dtype: torch.dtype, need_dx: bool,
                               need_dw: bool) -> Tuple[Tensor, Tensor]:
    """kerneld::linear_backward on W's codes and scales: dX through NN on those codes, dW in
    `weight_dtype`."""
    rt = default_runtime()
    dy = rt.place(dy)
    xt, xt_scales = rt.place(xt), rt.place(xt_scales)
    w8, ws = rt.place(w_codes).view(E4M3), rt.place(w_scales)
    dx, dw = _linear_backward_outputs(dy, w8.shape, weight_dtype, need_dx, need_dw, _rt_empty)
    if not (need_dx or need_dw):
        return dx, dw

    def dgrad_ops(dy8, dys):
        return [kops.Gemm(variant="nn", a=dy8, a_scales=dys, b=w8, b_scales=ws, d=dx)]

    rt.submit(_linear_backward_ops(rt, dy, xt, xt_scales, dx, dw, dgrad_ops), dy.device)
    return dx, dw


@linear_fp8_weight_backward.register_fake
def _(dy, xt, xt_scales, w_codes, w_scales, weight_dtype, need_dx, need_dw):
    return _linear_backward_outputs(dy, w_codes.shape, weight_dtype, need_dx, need_dw,
                                    _fake_empty(dy))


# ----- grouped linear (MoE experts) ------------------------------------------------------------

def _check_grouped(x, weight, group_ends):
    if weight.dim() != 3:
        raise ValueError(f"weight must be (experts, out_features, in_features), got "
                         f"{tuple(weight.shape)}")
    e, n, k = weight.shape
    if x.dim() != 2 or x.shape[1] != k:
        raise ValueError(f"input must be (tokens, {k}), got {tuple(x.shape)}")
    if group_ends.dim() != 1 or group_ends.shape[0] != e:
        raise ValueError(f"group_ends must be ({e},) (one end offset per expert), got "
                         f"{tuple(group_ends.shape)}")
    if group_ends.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"group_ends must be int32 or int64, got {group_ends.dtype}")
    _check_out_dtype(x.dtype, "the input's dtype")


def _grouped_outputs(x, weight, save, empty):
    t, k = x.shape
    e, n, _ = weight.shape
    y = empty((t, n), x.dtype, x.device)
    if not save:
        return (y, empty((0,), torch.uint8, x.device), empty((0,), torch.float32, x.device),
                empty((0,), torch.int32, x.device))
    tp = (t + e * 127 + 127) // 128 * 128
    return (y, empty((k, tp), torch.uint8, x.device),
            empty((k, tp // 128), torch.float32, x.device), empty((e + 1,), torch.int32, x.device))


@torch.library.custom_op("kerneld::grouped_linear", mutates_args=())
def grouped_linear(x: Tensor, weight: Tensor, group_ends: Tensor,
                   save: bool = True) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """E experts' Linears over tokens grouped by expert: Y[group e] = X[group e]·W[e]ᵀ for X
    (T,K), W (E,N,K), group_ends (E) on X's device; with `save`, also what the backward needs:
    the codes and scales of the padded Xᵀ and the wgrad's group ends (the padded ends, then
    the padded length, so that the zero rows after the groups form one more group)."""
    _check_grouped(x, weight, group_ends)
    rt = default_runtime()
    x, w, ends = rt.place(x), rt.place(weight.contiguous()), rt.place(group_ends)
    t, k = x.shape
    e, n, _ = w.shape
    device = x.device
    y, xpt, xpts, kends = _grouped_outputs(x, w, save, _rt_empty)
    ops = []
    if save:
        tp = xpt.shape[1]
        kends[e:].fill_(tp)
        xp = rt.empty((tp, k), x.dtype, device)
        ops.append(kops.Pad(input=x, group_ends=ends, output=xp, padded_group_ends=kends[:e],
                            alignment=128))
        ops.append(kops.Quantize(input=xp, output=xpt.view(E4M3), scales=xpts,
                                 granularity="1x128", transpose_output=True))
    x8 = rt.empty((t, k), E4M3, device)
    xs = rt.empty((t, k // 128), torch.float32, device)
    ops.append(kops.Quantize(input=x, output=x8, scales=xs, granularity="1x128"))
    w8 = rt.empty((e, n, k), E4M3, device)
    ws = rt.empty((e, shapes.cdiv(n, 128), k // 128), torch.float32, device)
    ops.append(kops.Quantize(input=w.view(e * n, k), output=w8.view(e * n, k),
                             scales=ws.view(-1, k // 128), granularity="128x128"))
    ops.append(kops.Gemm(variant="m_grouped_nt", a=x8, a_scales=xs, b=w8, b_scales=ws, d=y,
                         group_ends=ends))
    rt.submit(ops, device)
    return y, xpt, xpts, kends


@grouped_linear.register_fake
def _(x, weight, group_ends, save=True):
    _check_grouped(x, weight, group_ends)
    return _grouped_outputs(x, weight, save, _fake_empty(x))


def _grouped_backward_outputs(dy, weight, need_dx, need_dw, empty):
    t = dy.shape[0]
    e, n, k = weight.shape
    return (empty((t, k) if need_dx else (0,), dy.dtype, dy.device),
            empty((e, n, k) if need_dw else (0,), weight.dtype, dy.device))


@torch.library.custom_op("kerneld::grouped_linear_backward", mutates_args=())
def grouped_linear_backward(dy: Tensor, xpt: Tensor, xpt_scales: Tensor, wgrad_ends: Tensor,
                            weight: Tensor, group_ends: Tensor, need_dx: bool,
                            need_dw: bool) -> Tuple[Tensor, Tensor]:
    """dX (T,K) and dW (E,N,K) of grouped_linear (each an empty tensor when not needed)."""
    rt = default_runtime()
    dy, w, ends = rt.place(dy), rt.place(weight.contiguous()), rt.place(group_ends)
    xpt, xpt_scales, wgrad_ends = rt.place(xpt), rt.place(xpt_scales), rt.place(wgrad_ends)
    t, n = dy.shape
    e, _, k = w.shape
    device = dy.device
    dx, dw = _grouped_backward_outputs(dy, w, need_dx, need_dw, _rt_empty)
    if not (need_dx or need_dw):
        return dx, dw
    tp = xpt.shape[1]
    ops = []
    if need_dw:
        dyp = rt.empty((tp, n), dy.dtype, device)
        ops.append(kops.Pad(input=dy, group_ends=ends, output=dyp,
                            padded_group_ends=rt.empty((e,), torch.int32, device),
                            alignment=128))
        dypt = rt.empty((n, tp), E4M3, device)
        dypts = rt.empty((n, tp // 128), torch.float32, device)
        ops.append(kops.Quantize(input=dyp, output=dypt, scales=dypts, granularity="1x128",
                                 transpose_output=True))
    if need_dx:
        dy8 = rt.empty((t, n), E4M3, device)
        dys = rt.empty((t, n // 128), torch.float32, device)
        ops.append(kops.Quantize(input=dy, output=dy8, scales=dys, granularity="1x128"))
        wt8 = rt.empty((e, k, n), E4M3, device)
        wts = rt.empty((e, shapes.cdiv(k, 128), n // 128), torch.float32, device)
        for i in range(e):
            ops.append(kops.Quantize(input=w[i], output=wt8[i], scales=wts[i],
                                     granularity="128x128", transpose_output=True))
        ops.append(kops.Gemm(variant="m_grouped_nt", a=dy8, a_scales=dys, b=wt8, b_scales=wts,
                             d=dx, group_ends=ends))
    if need_dw:
        # The zero rows after the padded groups form one more group; its dW slice is dropped.
        dw_all = rt.empty((e + 1, n, k), w.dtype, device)
        ops.append(kops.Gemm(variant="k_grouped_tn", a=dypt, a_scales=dypts, b=xpt.view(E4M3),
                             b_scales=xpt_scales, d=dw_all, group_ends=wgrad_ends))
    rt.submit(ops, device)
    if need_dw:
        dw = dw_all[:e]
    return dx, dw


@grouped_linear_backward.register_fake
def _(dy, xpt, xpt_scales, wgrad_ends, weight, group_ends, need_dx, need_dw):
    return _grouped_backward_outputs(dy, weight, need_dx, need_dw, _fake_empty(dy))


def _grouped_setup_context(ctx, inputs, output):
    x, weight, group_ends, save = inputs
    _, xpt, xpts, kends = output
    ctx.save_for_backward(xpt, xpts, kends, weight, group_ends)
    ctx.saved = save


def _grouped_backward(ctx, dy, _d1, _d2, _d3):
    xpt, xpts, kends, weight, group_ends = ctx.saved_tensors
    if not ctx.saved:
        raise RuntimeError("kerneld::grouped_linear ran with save=False, so it has no backward")
    need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    dx, dw = torch.ops.kerneld.grouped_linear_backward(dy, xpt, xpts, kends, weight, group_ends,
                                                        need_dx, need_dw)
    return (dx if need_dx else None), (dw if need_dw else None), None, None


grouped_linear.register_autograd(_grouped_backward, setup_context=_grouped_setup_context)
