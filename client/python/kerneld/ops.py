"""The ops as Python values for Client.submit() and Client.run(): one class per op of the op
table (include/kerneld/op_table.h, as libkerneld_c.so exports it), named as the table names it
(Quantize, Gemm, Pad, Unpad), with the table's fields as keyword arguments:

    kerneld.Quantize(input=x, output=codes, scales=s, granularity="1x128")
    kerneld.Gemm(variant="nt", a=a, a_scales=sa, b=b, b_scales=sb, d=d)

A tensor field takes a numpy array or torch tensor in memory the client has registered (ShmArray,
a pool block, a CUDA tensor), a TensorRef naming a buffer explicitly, or typed(x, dtype) to say
what an array's bits are (a uint8 array holding e5m2 codes); an optional one may be None. An enum
field takes a member, its name or label ("1x128", "k_block_major") or UNSPECIFIED (the op's
default); a flag a bool; an int an int; a float a float (0.0: the op's default). `OPS` maps each
op's name to its class; every class has `.spec` (its row of the table)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Union

from . import _lib

_binding = _lib.binding()


@dataclass
class TensorRef:
    """A tensor named by buffer id and byte offset, as the wire carries it. Strides in elements;
    None means contiguous row-major."""
    buffer_id: int
    dtype: Any
    shape: Sequence[int]
    byte_offset: int = 0
    strides: Optional[Sequence[int]] = None


@dataclass
class Typed:
    """An array or tensor whose bits are of kerneld dtype `dtype` (see typed())."""
    value: Any
    dtype: Any


def typed(value: Any, dtype: Any) -> Typed:
    """`value` (a numpy array or torch tensor) read as `dtype`: typed(codes, "e5m2")."""
    return Typed(value, dtype)


def _default(spec: _lib.FieldSpec):
    if spec.kind == "tensor":
        return dataclasses.MISSING if spec.required else None
    if spec.kind == "enum":
        return _binding.enums[spec.enum].UNSPECIFIED
    return {"flag": False, "int": 0, "float": 0.0}[spec.kind]


def _op_class(spec: _lib.OpSpec) -> type:
    fields = []
    for f in spec.fields:
        default = _default(f)
        fields.append((f.name, Any) if default is dataclasses.MISSING else
                      (f.name, Any, field(default=default)))
    cls = dataclasses.make_dataclass(spec.type, fields, kw_only=True)
    cls.__module__ = __name__
    cls.spec = spec
    cls.__doc__ = (f"The {spec.name} op (kerneld.proto's {spec.type}Op): "
                   + ", ".join(f.name for f in spec.fields) + ".")
    return cls


# Every op of the table, by name.
OPS: Dict[str, type] = {name: _op_class(spec) for name, spec in _binding.ops.items()}
globals().update({cls.__name__: cls for cls in OPS.values()})
__all__ = ["Completion", "OPS", "TensorRef", "Typed", "typed"] + [c.__name__ for c in OPS.values()]


@dataclass
class Completion:
    """SYNC (the default: the call returns once the ops finished) or ASYNC (returns once they
    are enqueued; the daemon records `signal_event` behind them). Events are the bytes of CUDA
    IPC event handles (torch.cuda.Event(interprocess=True).ipc_handle())."""
    mode: Union[str, Any] = "sync"
    wait_event: Optional[bytes] = None
    signal_event: Optional[bytes] = None
    _c: Any = field(default=None, repr=False, compare=False)
