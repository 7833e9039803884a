"""Float8BlockwiseLinear, an nn.Linear whose matmuls are blockwise FP8 on kerneld
(torch.ops.kerneld.linear: see kerneld.torch.ops), and convert_to_float8_blockwise, which swaps a
model's nn.Linear layers for it.

A converted layer keeps nn.Linear's parameters and state_dict (a checkpoint moves between bf16 and
kerneld runs), is still an nn.Linear, and works under torch.compile (fullgraph), activation
checkpointing, FSDP2 and DDP: its forward is one custom op whose backward is another. The bias is
added by PyTorch, outside the FP8 path."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch
from torch import nn

from . import ops as _ops  # registers torch.ops.kerneld.*
from .fsdp import GatheredFP8Weight, gathered_linear, wrap_weight

logger = logging.getLogger("kerneld.torch")

_DGRADS = ("nn", "nt")
# The form Float8BlockwiseLinear's backward computes dX in (see kerneld.torch.ops).
DEFAULT_DGRAD = "nn"


def linear_shape_problem(in_features: int, out_features: int) -> Optional[str]:
    """Why kerneld's kernels cannot take this Linear, or None: in_features is the forward's
    reduction and the 1x128 block dimension of X, out_features the dgrad's reduction and the
    1x128 block dimension of dY, so both must be multiples of 128."""
    bad = [f"{name}={value}" for name, value in (("in_features", in_features),
                                                  ("out_features", out_features))
           if value % 128 != 0]
    if not bad:
        return None
    return (f"{' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a multiple of 128 "
            "(blockwise FP8 uses 1x128 and 128x128 blocks)")


def check_linear_shape(in_features: int, out_features: int, where: str = "") -> None:
    """ValueError unless kerneld's kernels take this Linear (linear_shape_problem)."""
    problem = linear_shape_problem(in_features, out_features)
    if problem is not None:
        raise ValueError(f"{where}{problem}")


def _check_dgrad(dgrad: Optional[str]) -> str:
    dgrad = DEFAULT_DGRAD if dgrad is None else dgrad
    if dgrad not in _DGRADS:
        raise ValueError(f'dgrad="{dgrad}" must be one of {", ".join(_DGRADS)}')
    return dgrad


class Float8BlockwiseLinear(nn.Linear):
    """nn.Linear whose matmuls run as blockwise FP8 on kerneld: 1x128 blocks on activations and
    gradients, 128x128 on the weight, fp32 accumulation (kerneld.torch.ops). A drop-in: same
    parameters, state_dict and isinstance(m, nn.Linear). in_features and out_features must be
    multiples of 128. Master weights may be bf16 or fp32; inputs of any leading shape, bf16 or
    fp32 (fp16 is computed in fp32 and cast back). Its backward saves Xᵀ's FP8 codes, not X.
    dgrad="nn" or "nt" chooses how dX is computed (kerneld.torch.ops; None: DEFAULT_DGRAD)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None, *, dgrad: Optional[str] = None):
        check_linear_shape(in_features, out_features)
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.dgrad = _check_dgrad(dgrad)

    @classmethod
    def from_linear(cls, linear: nn.Linear, *,
                    dgrad: Optional[str] = None) -> "Float8BlockwiseLinear":
        """A Float8BlockwiseLinear sharing `linear`'s parameters (no copy)."""
        check_linear_shape(linear.in_features, linear.out_features)
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = linear.in_features, linear.out_features
        new.weight = linear.weight
        new.bias = linear.bias
        new.dgrad = _check_dgrad(dgrad)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fp8_linear(x, self.weight, self.bias, self.dgrad)

    def extra_repr(self) -> str:
        return (super().extra_repr() +
                f", blockwise_fp8=1x128/128x128 (kerneld), dgrad={self.dgrad}")


def fp8_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
               dgrad: str = DEFAULT_DGRAD) -> torch.Tensor:
    """F.linear(x, weight, bias) in blockwise FP8 on kerneld, differentiable."""
    k = weight.shape[1]
    if x.shape[-1] != k:
        raise ValueError(f"input.shape[-1]={x.shape[-1]} must equal in_features={k}")
    lead = x.shape[:-1]
    x2 = x.reshape(-1, k)
    compute = x2 if x2.dtype in (torch.bfloat16, torch.float32) else x2.float()
    save = torch.is_grad_enabled() and (compute.requires_grad or weight.requires_grad)
    if isinstance(weight, GatheredFP8Weight):
        # FSDP2 all-gathered the weight as FP8 codes (fsdp_float8_all_gather).
        y = gathered_linear(compute, weight, save)
    elif compute.shape[0] == 0:
        y = compute @ weight.to(compute.dtype).t()
    else:
        y = torch.ops.kerneld.linear(compute, weight, dgrad, save)[0]
    if x.dim() != 2:
        y = y.view(*lead, weight.shape[0])
    if y.dtype != x.dtype:
        y = y.to(x.dtype)
    if bias is not None:
        y = y + bias.to(y.dtype)
    return y


# ----- conversion ------------------------------------------------------------------------------

# Measured rule of the default filter (docs/decisions/0018-default-float8-filter.md): a Linear
# stays in bf16 when either dimension is below MIN_FEATURES or in * out is below
# MIN_OUT_FEATURES_TIMES_IN, the shapes where FP8 through the daemon lost to bf16 at 8192 tokens.
MIN_FEATURES = 4096
MIN_OUT_FEATURES_TIMES_IN = 4096 * 8192


def default_rule(in_features: int, out_features: int, fqn: str) -> bool:
    """The default filter's rule (default_filter), on a Linear's dimensions and name."""
    if fqn.rsplit(".", 1)[-1] in ("output", "lm_head"):
        return False
    return (min(in_features, out_features) >= MIN_FEATURES and
            in_features * out_features >= MIN_OUT_FEATURES_TIMES_IN)


def default_filter(module: nn.Module, fqn: str) -> bool:
    """The default module filter: True (convert) for a Linear whose dimensions are both at least
    MIN_FEATURES and whose in_features * out_features is at least MIN_OUT_FEATURES_TIMES_IN; an
    output head named "output" or "lm_head" stays in bf16 (its logits feed the loss directly)."""
    return isinstance(module, nn.Linear) and default_rule(module.in_features,
                                                          module.out_features, fqn)


def convert_all(module: nn.Module, fqn: str) -> bool:
    """A module filter that converts every Linear kerneld's kernels can take."""
    return isinstance(module, nn.Linear)


@dataclass
class Float8BlockwiseLinearConfig:
    """How convert_to_float8_blockwise converts.

    dgrad: the backward's dX form ("nn" or "nt", Float8BlockwiseLinear).
    module_filter_fn: (module, fqn) -> bool, which Linears to convert; None takes
        default_filter (the measured rule), convert_all converts every one.
    fsdp_float8_all_gather: FSDP2 all-gathers each converted weight as its 128x128 FP8 codes
        and scales instead of bf16 (kerneld.torch.fsdp; out_features must be a multiple of
        128 times the FSDP world size). Off by default."""
    dgrad: str = DEFAULT_DGRAD
    module_filter_fn: Optional[Callable[[nn.Module, str], bool]] = None
    fsdp_float8_all_gather: bool = False


def convert_to_float8_blockwise(
        model: nn.Module, config: Optional[Float8BlockwiseLinearConfig] = None, *,
        module_filter_fn: Optional[Callable[[nn.Module, str], bool]] = None) -> nn.Module:
    """Swaps, in place, every nn.Linear of `model` that the filter selects for a
    Float8BlockwiseLinear sharing its parameters, and returns the model. The filter is
    `module_filter_fn`, else config.module_filter_fn, else default_filter. A selected layer the
    kernels cannot take (a dimension not a multiple of 128) stays as it is and is named once in
    the log, with the reason."""
    config = config or Float8BlockwiseLinearConfig()
    dgrad = _check_dgrad(config.dgrad)
    keep = module_filter_fn or config.module_filter_fn or default_filter
    if isinstance(model, nn.Linear) and not isinstance(model, Float8BlockwiseLinear):
        if keep(model, "") and _convertible(model, "(the model)", []):
            new = Float8BlockwiseLinear.from_linear(model, dgrad=dgrad)
            if config.fsdp_float8_all_gather:
                wrap_weight(new)
            return new
        return model
    swaps, skipped = [], []
    for fqn, module in model.named_modules():
        for name, child in module.named_children():
            if not isinstance(child, nn.Linear) or isinstance(child, Float8BlockwiseLinear):
                continue
            child_fqn = f"{fqn}.{name}" if fqn else name
            if not keep(child, child_fqn) or not _convertible(child, child_fqn, skipped):
                continue
            swaps.append((module, name, child))
    for parent, name, child in swaps:
        new = Float8BlockwiseLinear.from_linear(child, dgrad=dgrad)
        if config.fsdp_float8_all_gather:
            wrap_weight(new)
        setattr(parent, name, new)
    if skipped:
        logger.warning("kerneld: %d Linear layer(s) stay in their dtype: %s", len(skipped),
                       "; ".join(skipped))
    return model


def _convertible(linear: nn.Linear, fqn: str, skipped: List[str]) -> bool:
    problem = linear_shape_problem(linear.in_features, linear.out_features)
    if problem is None:
        return True
    skipped.append(f"{fqn}: {problem}")
    if fqn == "(the model)":
        logger.warning("kerneld: %s stays in its dtype: %s", fqn, problem)
    return False
