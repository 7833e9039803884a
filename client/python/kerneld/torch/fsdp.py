"""FSDP2 all-gathers of blockwise FP8 weights (opt-in: Float8BlockwiseLinearConfig(
fsdp_float8_all_gather=True)), torchao's float8 all-gather idea applied to 128x128 blocks.

A converted Linear's weight becomes a BlockwiseFP8Weight: the same high-precision tensor, which
FSDP2 shards as it shards any parameter, with FSDP2's all-gather extension. Before each
all-gather every rank quantizes its own shard with 128x128 blocks on kerneld, and the ranks
all-gather the e4m3fn codes and their scales instead of bf16: half the bytes. A shard's rows must
be whole blocks (out_features a multiple of 128 times the FSDP world size); a weight whose are not
is all-gathered in its dtype, as without the option, and named once in the log. The unsharded
weight is a GatheredFP8Weight, which Float8BlockwiseLinear's forward runs as it is (no weight
quantize) and whose backward uses the same codes for dX; dW is computed in the parameter dtype
and reduce-scattered by FSDP as usual. Results equal those of the bf16 all-gather path up to the
fp32 summation order, since both quantize the same weight values into the same blocks."""
from __future__ import annotations

import logging
from typing import Any, Optional, Tuple

import torch
from torch.utils import _pytree as pytree

from . import ops as _ops  # registers torch.ops.kerneld.*

logger = logging.getLogger("kerneld.torch")

# The ops FSDP2 runs on a sharded parameter whose result must stay a BlockwiseFP8Weight (padding
# and chunking dim 0, moving it, copying into it).
_PRESERVE = {
    torch.ops.aten.empty_like.default, torch.ops.aten.new_zeros.default,
    torch.ops.aten.slice.Tensor, torch.ops.aten.copy_.default, torch.ops.aten.view.default,
    torch.ops.aten.as_strided.default, torch.ops.aten._to_copy.default,
    torch.ops.aten._pin_memory.default, torch.ops.aten.split.Tensor,
    torch.ops.aten.clone.default,
}


class BlockwiseFP8Weight(torch.Tensor):
    """A high-precision weight (or its FSDP2 shard) whose FSDP2 all-gather moves blockwise FP8
    codes and scales (the module docstring). Behaves as the tensor it wraps for every other op."""

    @staticmethod
    def __new__(cls, tensor: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, tensor.size(), strides=tensor.stride(), storage_offset=tensor.storage_offset(),
            dtype=tensor.dtype, layout=tensor.layout, device=tensor.device,
            requires_grad=tensor.requires_grad)

    def __init__(self, tensor: torch.Tensor):
        self._tensor = tensor

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func == torch.ops.aten.detach.default:
            return BlockwiseFP8Weight(args[0]._tensor)
        args, kwargs = pytree.tree_map_only(BlockwiseFP8Weight, lambda t: t._tensor,
                                            (args, kwargs or {}))
        out = func(*args, **kwargs)
        if func not in _PRESERVE:
            return out
        return pytree.tree_map_only(torch.Tensor, BlockwiseFP8Weight, out)

    def __tensor_flatten__(self):
        return ["_tensor"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors, spec, outer_size, outer_stride):
        return BlockwiseFP8Weight(inner_tensors["_tensor"])

    def __repr__(self):
        return f"BlockwiseFP8Weight({self._tensor!r})"

    def fsdp_pre_all_gather(self, mesh, outer_size, outer_stride, module, mp_policy):
        # The values the bf16 all-gather would have gathered: the shard in the compute dtype.
        shard = self._tensor
        if mp_policy is not None and mp_policy.param_dtype is not None:
            shard = shard.to(mp_policy.param_dtype)
        if shard.shape[0] % 128 != 0:
            # 128x128 blocks would straddle ranks: this weight is all-gathered as it is.
            _warn_unaligned(tuple(outer_size), shard.shape[0], mesh.size())
            return (shard,), _HIGH_PRECISION
        codes, scales = torch.ops.kerneld.quantize(shard, "128x128")
        return (codes.view(torch.uint8), scales), None

    def fsdp_post_all_gather(self, all_gather_outputs: Tuple[torch.Tensor, ...], metadata: Any,
                             param_dtype: torch.dtype, *, out: Optional[torch.Tensor] = None):
        if out is not None:
            return  # the unsharded weight's inner tensors were filled in place
        if metadata == _HIGH_PRECISION:
            (weight,) = all_gather_outputs
            return weight, (weight,)
        codes, scales = all_gather_outputs
        return GatheredFP8Weight(codes, scales, param_dtype), (codes, scales)


_HIGH_PRECISION = "high-precision"
_warned_shapes = set()


def _warn_unaligned(shape, rows, world) -> None:
    if shape in _warned_shapes:
        return
    _warned_shapes.add(shape)
    logger.warning("kerneld: a weight of shape %s is all-gathered in its dtype, not as FP8: its "
                   "shards of %d rows are not whole 128-row blocks (out_features must be a "
                   "multiple of 128 x the FSDP world size %d)", shape, rows, world)


class GatheredFP8Weight(torch.Tensor):
    """An unsharded weight (N, K) as FSDP2 all-gathered it: e4m3fn codes (as uint8) and 128x128
    scales, presented as a tensor of the parameter dtype. Float8BlockwiseLinear runs it as it is;
    any other use dequantizes it."""

    @staticmethod
    def __new__(cls, codes: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype):
        return torch.Tensor._make_wrapper_subclass(
            cls, codes.size(), strides=codes.stride(), dtype=dtype, device=codes.device,
            requires_grad=False)

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype):
        self._codes, self._scales, self._dtype = codes, scales, dtype

    def dequantize(self) -> torch.Tensor:
        n, k = self._codes.shape
        values = self._codes.view(torch.float8_e4m3fn).float().view(n // 128, 128, k // 128, 128)
        values = values * self._scales.view(n // 128, 1, k // 128, 1)
        return values.view(n, k).to(self._dtype)

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func in (torch.ops.aten.detach.default, torch.ops.aten.as_strided.default,
                    torch.ops.aten.alias.default):
            w = args[0]
            return GatheredFP8Weight(w._codes, w._scales, w._dtype)
        args, kwargs = pytree.tree_map_only(GatheredFP8Weight, lambda t: t.dequantize(),
                                            (args, kwargs or {}))
        return func(*args, **kwargs)

    def __tensor_flatten__(self):
        return ["_codes", "_scales"], self._dtype

    @staticmethod
    def __tensor_unflatten__(inner_tensors, dtype, outer_size, outer_stride):
        return GatheredFP8Weight(inner_tensors["_codes"], inner_tensors["_scales"], dtype)

    def __repr__(self):
        return f"GatheredFP8Weight(shape={tuple(self.shape)}, dtype={self._dtype})"


class _GatheredLinear(torch.autograd.Function):
    """Y = X·Wᵀ on an all-gathered FP8 weight; dW in the weight's dtype for FSDP to reduce."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: GatheredFP8Weight, save: bool):
        y, xt, xts = torch.ops.kerneld.linear_fp8_weight(x, weight._codes, weight._scales, save)
        ctx.save_for_backward(xt, xts, weight._codes, weight._scales)
        ctx.weight_dtype = weight._dtype
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        xt, xts, codes, scales = ctx.saved_tensors
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dx, dw = torch.ops.kerneld.linear_fp8_weight_backward(
            dy, xt, xts, codes, scales, ctx.weight_dtype, need_dx, need_dw)
        return (dx if need_dx else None), (dw if need_dw else None), None


def gathered_linear(x: torch.Tensor, weight: GatheredFP8Weight, save: bool) -> torch.Tensor:
    return _GatheredLinear.apply(x, weight, save)


def wrap_weight(module: torch.nn.Module) -> None:
    """Makes `module.weight` a BlockwiseFP8Weight (for fsdp_float8_all_gather)."""
    w = module.weight
    if isinstance(w, BlockwiseFP8Weight):
        return
    module.weight = torch.nn.Parameter(BlockwiseFP8Weight(w.data), requires_grad=w.requires_grad)


torch.serialization.add_safe_globals([BlockwiseFP8Weight])
