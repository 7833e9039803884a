"""The shapes of what kerneld's ops write, as kerneld.proto defines them (the daemon checks them:
kernels/ops/*.cc), for callers that allocate outputs: Client's helpers and kerneld.torch's fake
(meta) implementations, which pass symbolic sizes through these same functions."""
from __future__ import annotations

from .dtypes import DType, QuantGranularity, ScaleLayout

BLOCK = 128
MX_BLOCK = 32


def cdiv(a, b):
    return (a + b - 1) // b


def quantize_scales(granularity, rows, cols, layout=ScaleLayout.UNSPECIFIED, groups=0):
    """The scales of a quantize of Y (rows, cols) (Y = X, or Xᵀ with transpose_output)."""
    g = QuantGranularity.parse(granularity)
    k_major = ScaleLayout.parse(layout) == ScaleLayout.K_BLOCK_MAJOR
    if g in (QuantGranularity.G1X128, QuantGranularity.JAGGED_ROWWISE):
        return (cols // BLOCK, rows) if k_major else (rows, cols // BLOCK)
    if g == QuantGranularity.G128X1:
        return (cdiv(rows, BLOCK), cols)
    if g == QuantGranularity.G128X128:
        return (cdiv(rows, BLOCK), cols // BLOCK)
    if g == QuantGranularity.PER_ROW:
        return (rows, 1)
    if g == QuantGranularity.PER_TENSOR:
        return (1,)
    if g == QuantGranularity.MX_1X32:
        return (rows, cols // MX_BLOCK)
    if g == QuantGranularity.JAGGED_COLWISE:
        return (groups, rows)
    raise ValueError(f"granularity={g.label} has no scale shape")


def scales_dtype(granularity):
    """f32 scales, e8m0 for MX."""
    return (DType.E8M0 if QuantGranularity.parse(granularity) == QuantGranularity.MX_1X32
            else DType.F32)


def dual_scales_t(granularity, rows, cols, layout=ScaleLayout.UNSPECIFIED):
    """The scales of Xᵀ (cols, rows) a dual pass of X (rows, cols) writes beside X's."""
    g = QuantGranularity.parse(granularity)
    if g == QuantGranularity.G128X128:
        return (cols // BLOCK, rows // BLOCK)
    if ScaleLayout.parse(layout) == ScaleLayout.K_BLOCK_MAJOR:
        return (rows // BLOCK, cols)
    return (cols, rows // BLOCK)


def pad_rows(rows, groups, alignment):
    """The rows a pad output needs: every group rounded up to `alignment`."""
    return rows + groups * (alignment - 1)


def gemm_output(variant, a_shape, b_shape, groups=0):
    """The shape of d for a GEMM of a (a_shape) and b (b_shape)."""
    from .dtypes import GemmVariant
    v = GemmVariant.parse(variant)
    if v == GemmVariant.K_GROUPED_TN:
        return (groups, a_shape[0], b_shape[0])
    if v == GemmVariant.NN:
        return (a_shape[0], b_shape[1])
    return (a_shape[0], b_shape[-2])
