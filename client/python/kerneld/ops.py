"""The ops as Python values (kerneld.proto's QuantizeOp, GemmOp, PadOp, UnpadOp) for
Client.submit(). A tensor argument is a numpy array or torch tensor in memory the client has
registered (ShmArray, a pool block, a CUDA tensor), a TensorRef naming a buffer explicitly, or
typed(x, dtype) to say what an array's bits are (a uint8 array holding e5m2 codes). Left
untyped, a uint8 array or tensor is taken as e4m3fn where the field holds FP8 codes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from .dtypes import DType, Granularity, GemmVariant, MxRounding, ScaleFormat, ScaleLayout


@dataclass
class TensorRef:
    """A tensor named by buffer id and byte offset, as the wire carries it. Strides in elements;
    None means contiguous row-major."""
    buffer_id: int
    dtype: Union[DType, str, int]
    shape: Sequence[int]
    byte_offset: int = 0
    strides: Optional[Sequence[int]] = None


@dataclass
class Typed:
    """An array or tensor whose bits are of kerneld dtype `dtype` (see typed())."""
    value: Any
    dtype: Union[DType, str, int]


def typed(value: Any, dtype: Union[DType, str, int]) -> Typed:
    """`value` (a numpy array or torch tensor) read as `dtype`: typed(codes, "e5m2")."""
    return Typed(value, dtype)


@dataclass
class Quantize:
    input: Any
    output: Any
    scales: Any
    granularity: Union[Granularity, str, int] = Granularity.G1X128
    transpose_output: bool = False
    scale_format: Union[ScaleFormat, str, int] = ScaleFormat.UNSPECIFIED
    scale_layout: Union[ScaleLayout, str, int] = ScaleLayout.UNSPECIFIED
    eps: float = 0.0
    mx_rounding: Union[MxRounding, str, int] = MxRounding.UNSPECIFIED
    output_t: Any = None
    scales_t: Any = None
    group_ends: Any = None


@dataclass
class Gemm:
    variant: Union[GemmVariant, str, int]
    a: Any
    a_scales: Any
    b: Any
    b_scales: Any
    d: Any
    accumulate: bool = False
    group_ends: Any = None


@dataclass
class Pad:
    input: Any
    group_ends: Any
    output: Any
    padded_group_ends: Any
    alignment: int = 128


@dataclass
class Unpad:
    input: Any
    group_ends: Any
    output: Any
    alignment: int = 128


@dataclass
class Completion:
    """SYNC (the default: the call returns once the ops finished) or ASYNC (returns once they
    are enqueued; the daemon records `signal_event` behind them). Events are the bytes of CUDA
    IPC event handles (torch.cuda.Event(interprocess=True).ipc_handle())."""
    mode: str = "sync"
    wait_event: Optional[bytes] = None
    signal_event: Optional[bytes] = None
    _c: Any = field(default=None, repr=False, compare=False)
