"""MoE experts in blockwise FP8 on kerneld, as torchao's MoE training recipe runs them: grouped
GEMMs over token groups whose end offsets live on the device, so nothing synchronises with the
host whatever the routing (torch.ops.kerneld.grouped_linear: see kerneld.torch.ops).

  Float8MoEExperts   E experts' Linear layers (weight (E, N, K)) over tokens sorted by expert
  grouped_mm         a drop-in for torch._grouped_mm(x, w.transpose(-2, -1), offs=ends) as
                     torchtitan's GroupedExperts calls it, for x (T, K) and w (E, N, K)

Forward: the tokens padded per group to multiples of 128 rows (for wgrad's token blocks), X
quantized 1x128, the padded Xᵀ quantized 1x128 along the tokens and saved, W 128x128, and the
M-grouped NT GEMM. Backward: dY likewise, Wᵀ of each expert 128x128, the M-grouped NT GEMM for
dX and the K-grouped TN GEMM for dW over the padded groups."""
from __future__ import annotations

import math

import torch
from torch import nn

from . import ops as _ops  # registers torch.ops.kerneld.*
from .linear import check_linear_shape


def grouped_linear(x: torch.Tensor, weight: torch.Tensor,
                   group_ends: torch.Tensor) -> torch.Tensor:
    """Y[group e] = X[group e] · W[e]ᵀ for X (T, K) sorted by expert, W (E, N, K) and
    group_ends (E,) int32/int64 on X's device (the end row of each expert's group,
    non-decreasing, the last == T; empty groups allowed). Differentiable in X and W."""
    save = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    dtype = x.dtype
    compute = x if dtype in (torch.bfloat16, torch.float32) else x.float()
    y = torch.ops.kerneld.grouped_linear(compute, weight, group_ends, save)[0]
    return y if y.dtype == dtype else y.to(dtype)


def grouped_mm(x: torch.Tensor, w_t: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """torch._grouped_mm(x, w_t, offs=offs) for x (T, K), w_t (E, K, N) and offs (E,) int32
    (the groups' end offsets), in blockwise FP8 on kerneld: w_t is the transposed view of the
    (E, N, K) expert weights torchtitan's GroupedExperts holds."""
    return grouped_linear(x, w_t.transpose(-2, -1), offs)


class Float8MoEExperts(nn.Module):
    """E experts, each a Linear in_features -> out_features without bias, weight (E, N, K).
    forward(x, group_ends): x (T, in_features) holds the tokens sorted by expert, group_ends
    (E,) int32/int64 on x's device the end offset of each expert's group (non-decreasing, the
    last == T; empty groups allowed); returns (T, out_features). Both feature sizes must be
    multiples of 128. The group ends are read on the device (CUDA) with no host sync; the CUDA
    backend clamps bad ends instead of reporting them (kerneld.proto, GemmOp)."""

    def __init__(self, num_experts: int, in_features: int, out_features: int, device=None,
                 dtype=None):
        super().__init__()
        check_linear_shape(in_features, out_features)
        self.num_experts, self.in_features, self.out_features = (num_experts, in_features,
                                                                 out_features)
        self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features,
                                               device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)  # nn.Linear's default, per expert
        nn.init.uniform_(self.weight, -bound, bound)

    def forward(self, x: torch.Tensor, group_ends: torch.Tensor) -> torch.Tensor:
        return grouped_linear(x, self.weight, group_ends)

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, in_features={self.in_features}, "
                f"out_features={self.out_features}, blockwise_fp8 (kerneld)")
