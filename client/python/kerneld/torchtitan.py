"""kerneld in torchtitan's trainer: model converters that go into a model's `converters` list,
beside or instead of torchtitan's Float8LinearConverter, and swap its layers for kerneld's
blockwise FP8 ones before the model is built. Everything else in the job (activation
checkpointing, per-block torch.compile, FSDP2, checkpoints) stays torchtitan's own.

    from kerneld.torchtitan import KerneldLinearConverter
    model_spec = model_registry("8B", converters=[
        KerneldLinearConverter.Config(model_compile_enabled=True)])

KerneldLinearConverter replaces each eligible Linear.Config with KerneldLinear.Config: a
torchtitan Linear (same parameters and state_dict) whose forward is kerneld's blockwise FP8
Linear (kerneld.torch.fp8_linear). Eligible: not named by a `filter_fqns` entry, selected by
the measured default rule unless `auto_filter=False` (kerneld.torch.default_rule), and exactly
a torchtitan Linear (a subclass with a forward of its own stays as it is). A layer the kernels
cannot take (a dimension not a multiple of 128) stays in its dtype and is named, with the
reason, in one log line. KerneldGroupedExpertsConverter does the same for MoE experts: their
grouped GEMMs become kerneld's (kerneld.torch.grouped_mm), whatever the routing (group sizes
need no padding).

Imported only where torchtitan is installed; an API of torchtitan this module does not know
fails the import with a message naming the torchtitan version."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from typing import List

import torchtitan

TESTED_TORCHTITAN = "0.3.0"

try:
    from torchtitan.components.quantization import QuantizationConverter
    from torchtitan.models.common.linear import Linear
    from torchtitan.models.common.moe import GroupedExperts
    if not (hasattr(QuantizationConverter.Config, "model_compile_enabled") and
            hasattr(Linear.Config, "traverse") and hasattr(GroupedExperts, "_grouped_mm")):
        raise ImportError("a converter, Linear or GroupedExperts interface is missing")
except ImportError as e:
    raise ImportError(
        f"kerneld.torchtitan needs torchtitan's model-converter API (QuantizationConverter, "
        f"Linear.Config.traverse, GroupedExperts._grouped_mm) as torchtitan "
        f"{TESTED_TORCHTITAN} has it; torchtitan {torchtitan.__version__} does not: {e}") from e

from kerneld.torch.linear import (DEFAULT_DGRAD, _check_dgrad, default_rule, fp8_linear,
                                  linear_shape_problem)
from kerneld.torch.moe import grouped_mm

logger = logging.getLogger("kerneld.torchtitan")


class KerneldLinear(Linear):
    """torchtitan's Linear, its matmuls blockwise FP8 on kerneld (kerneld.torch.fp8_linear)."""

    @dataclass(kw_only=True, slots=True)
    class Config(Linear.Config):
        dgrad: str = DEFAULT_DGRAD
        """The backward's dX form, "nn" or "nt" (kerneld.torch.Float8BlockwiseLinear)."""

    def __init__(self, config: Config):
        super().__init__(config)
        self.dgrad = _check_dgrad(config.dgrad)

    def forward(self, x):
        return fp8_linear(x, self.weight, self.bias, self.dgrad)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", blockwise_fp8 (kerneld), dgrad={self.dgrad}"


def _replace(model_config, parent, attr, new_config):
    if parent is None:
        return new_config
    if isinstance(parent, list):
        parent[attr] = new_config
    else:
        setattr(parent, attr, new_config)
    return model_config


def _copy_fields(config) -> dict:
    return {f.name: getattr(config, f.name) for f in fields(config) if not f.name.startswith("_")}


def _warn_without_compile(config, what: str) -> None:
    if not config.model_compile_enabled:
        logger.warning("kerneld: %s run eagerly: enable torch.compile (compile.enable with "
                       "\"model\" in compile.components) to fuse the work around them", what)


class KerneldLinearConverter(QuantizationConverter):
    """Swaps eligible torchtitan Linear layers for KerneldLinear (the module docstring)."""

    @dataclass(kw_only=True, slots=True)
    class Config(QuantizationConverter.Config):
        filter_fqns: List[str] = field(default_factory=list)
        """Layers to leave alone: any whose fully qualified name contains one of these."""

        auto_filter: bool = True
        """Convert only the layers the measured default rule selects (kerneld.torch.
        default_rule: where blockwise FP8 through kerneld beats bf16); False converts every
        eligible layer but the output head."""

        dgrad: str = DEFAULT_DGRAD
        """The backward's dX form, "nn" or "nt"."""

    def __init__(self, config: Config):
        self.config = config
        _check_dgrad(config.dgrad)

    def convert(self, model_config):
        cfg = self.config
        converted, skipped = [], []
        for fqn, linear, parent, attr in list(model_config.traverse(Linear.Config)):
            if type(linear) is not Linear.Config:
                if not isinstance(linear, KerneldLinear.Config):
                    skipped.append(f"{fqn}: {type(linear).__qualname__} is not a plain Linear")
                continue
            if any(f in fqn for f in cfg.filter_fqns):
                continue
            problem = linear_shape_problem(linear.in_features, linear.out_features)
            if problem is not None:
                skipped.append(f"{fqn}: {problem}")
                continue
            if fqn.rsplit(".", 1)[-1] in ("output", "lm_head"):
                continue
            if cfg.auto_filter and not default_rule(linear.in_features, linear.out_features,
                                                    fqn):
                continue
            new = KerneldLinear.Config(**_copy_fields(linear), dgrad=cfg.dgrad)
            model_config = _replace(model_config, parent, attr, new)
            converted.append(fqn)
        if skipped:
            logger.warning("kerneld: %d Linear layer(s) stay in their dtype: %s", len(skipped),
                           "; ".join(skipped))
        logger.info("kerneld: %d Linear layer(s) run blockwise FP8 on kerneld", len(converted))
        if converted:
            _warn_without_compile(cfg, "kerneld's Linear layers")
        return model_config


_experts_classes: dict = {}


def _kerneld_experts_class(parent: type) -> type:
    """A subclass of a GroupedExperts class whose grouped GEMMs run on kerneld."""
    if parent in _experts_classes:
        return _experts_classes[parent]

    class KerneldGroupedExperts(parent):  # type: ignore[valid-type, misc]
        @dataclass(kw_only=True, slots=True)
        class Config(parent.Config):  # type: ignore[misc]
            pass

        def _grouped_mm(self, *, A, B_t, offs):
            return grouped_mm(A, B_t, offs)

    KerneldGroupedExperts.__name__ = KerneldGroupedExperts.__qualname__ = (
        f"Kerneld{parent.__name__}")
    _experts_classes[parent] = KerneldGroupedExperts
    return KerneldGroupedExperts


class KerneldGroupedExpertsConverter(QuantizationConverter):
    """Runs every GroupedExperts' grouped GEMMs on kerneld (the module docstring)."""

    @dataclass(kw_only=True, slots=True)
    class Config(QuantizationConverter.Config):
        filter_fqns: List[str] = field(default_factory=list)
        """Experts to leave alone: any whose fully qualified name contains one of these."""

    def __init__(self, config: Config):
        self.config = config

    def convert(self, model_config):
        converted, skipped = [], []
        for fqn, experts, parent, attr in list(model_config.traverse(GroupedExperts.Config)):
            if any(f in fqn for f in self.config.filter_fqns):
                continue
            owner = type(experts)._owner
            if owner is None or owner.__name__.startswith("Kerneld"):
                continue
            problem = linear_shape_problem(experts.dim, experts.hidden_dim)
            if problem is not None:
                skipped.append(f"{fqn}: {problem.replace('in_features', 'dim').replace('out_features', 'hidden_dim')}")
                continue
            cls = _kerneld_experts_class(owner)
            model_config = _replace(model_config, parent, attr, cls.Config(**_copy_fields(experts)))
            converted.append(fqn)
        if skipped:
            logger.warning("kerneld: %d expert layer(s) stay in their dtype: %s", len(skipped),
                           "; ".join(skipped))
        logger.info("kerneld: %d expert layer(s) run their grouped GEMMs on kerneld",
                    len(converted))
        if converted:
            _warn_without_compile(self.config, "kerneld's grouped experts")
        return model_config


__all__ = ["KerneldGroupedExpertsConverter", "KerneldLinear", "KerneldLinearConverter",
           "TESTED_TORCHTITAN"]
