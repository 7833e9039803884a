"""kerneld's wire enums and the numpy side of its dtypes: bf16 is carried as uint16 bit patterns
and FP8 / e8m0 as uint8 codes (numpy has neither), with exact conversions to and from float32."""
from __future__ import annotations

import enum
from typing import Any, Dict

import numpy as np


class DType(enum.IntEnum):
    F32 = 1
    BF16 = 2
    F16 = 3
    E4M3FN = 4
    E4M3FNUZ = 5
    E5M2 = 6
    E8M0 = 7
    I32 = 8
    I64 = 9
    U8 = 10


class Granularity(enum.IntEnum):
    G1X128 = 1
    G128X1 = 2
    G128X128 = 3
    PER_ROW = 4
    PER_TENSOR = 5
    MX_1X32 = 6
    JAGGED_ROWWISE = 7
    JAGGED_COLWISE = 8


class ScaleFormat(enum.IntEnum):
    UNSPECIFIED = 0
    FP32 = 1
    POW2 = 2


class ScaleLayout(enum.IntEnum):
    UNSPECIFIED = 0
    ROW_MAJOR = 1
    K_BLOCK_MAJOR = 2


class MxRounding(enum.IntEnum):
    UNSPECIFIED = 0
    FLOOR = 1
    RCEIL = 2


class GemmVariant(enum.IntEnum):
    NT = 1
    NN = 2
    TN = 3
    M_GROUPED_NT = 4
    K_GROUPED_TN = 5


class CompletionMode(enum.IntEnum):
    UNSPECIFIED = 0
    SYNC = 1
    ASYNC = 2


class IpcKind(enum.IntEnum):
    CUDA = 1
    HIP = 2


ITEMSIZE: Dict[DType, int] = {
    DType.F32: 4, DType.BF16: 2, DType.F16: 2, DType.E4M3FN: 1, DType.E4M3FNUZ: 1,
    DType.E5M2: 1, DType.E8M0: 1, DType.I32: 4, DType.I64: 8, DType.U8: 1,
}

# The numpy dtype that holds each kerneld dtype's bits.
NUMPY_STORAGE: Dict[DType, np.dtype] = {
    DType.F32: np.dtype(np.float32), DType.BF16: np.dtype(np.uint16),
    DType.F16: np.dtype(np.float16), DType.E4M3FN: np.dtype(np.uint8),
    DType.E4M3FNUZ: np.dtype(np.uint8), DType.E5M2: np.dtype(np.uint8),
    DType.E8M0: np.dtype(np.uint8), DType.I32: np.dtype(np.int32),
    DType.I64: np.dtype(np.int64), DType.U8: np.dtype(np.uint8),
}

FP8_MAX = {DType.E4M3FN: 448.0, DType.E4M3FNUZ: 240.0, DType.E5M2: 57344.0}

_NAMES = {
    "f32": DType.F32, "float32": DType.F32, "fp32": DType.F32,
    "bf16": DType.BF16, "bfloat16": DType.BF16,
    "f16": DType.F16, "float16": DType.F16, "fp16": DType.F16, "half": DType.F16,
    "e4m3fn": DType.E4M3FN, "float8_e4m3fn": DType.E4M3FN,
    "e4m3fnuz": DType.E4M3FNUZ, "float8_e4m3fnuz": DType.E4M3FNUZ,
    "e5m2": DType.E5M2, "float8_e5m2": DType.E5M2,
    "e8m0": DType.E8M0, "float8_e8m0fnu": DType.E8M0,
    "i32": DType.I32, "int32": DType.I32, "i64": DType.I64, "int64": DType.I64,
    "u8": DType.U8, "uint8": DType.U8,
}

_GRANULARITY_NAMES = {
    "1x128": Granularity.G1X128, "128x1": Granularity.G128X1, "128x128": Granularity.G128X128,
    "per_row": Granularity.PER_ROW, "per_tensor": Granularity.PER_TENSOR,
    "mx_1x32": Granularity.MX_1X32, "jagged_rowwise": Granularity.JAGGED_ROWWISE,
    "jagged_colwise": Granularity.JAGGED_COLWISE,
}


def _enum(cls, value: Any, names: Dict[str, Any] = None):
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        key = value.lower()
        if names and key in names:
            return names[key]
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError(f"{value!r} is not a {cls.__name__}") from None
    return cls(int(value))


def granularity(value: Any) -> Granularity:
    return _enum(Granularity, value, _GRANULARITY_NAMES)


def gemm_variant(value: Any) -> GemmVariant:
    return _enum(GemmVariant, value)


def dtype(value: Any) -> DType:
    """A DType from a DType, its number, a name ("bf16", "float8_e4m3fn"), a numpy dtype
    (float32, float16, int32, int64, uint8 as U8, uint16 as BF16) or a torch dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        if value.lower() in _NAMES:
            return _NAMES[value.lower()]
        raise ValueError(f"{value!r} is not a kerneld dtype")
    if isinstance(value, int):
        return DType(value)
    module = type(value).__module__
    if module.startswith("torch"):
        return from_torch_dtype(value)
    return from_numpy_dtype(np.dtype(value))


def from_numpy_dtype(dt: np.dtype) -> DType:
    dt = np.dtype(dt)
    table = {np.dtype(np.float32): DType.F32, np.dtype(np.float16): DType.F16,
             np.dtype(np.uint16): DType.BF16, np.dtype(np.int32): DType.I32,
             np.dtype(np.int64): DType.I64, np.dtype(np.uint8): DType.U8}
    if dt not in table:
        raise ValueError(f"numpy dtype {dt} has no kerneld dtype (float32, float16, uint16 for "
                         "bf16, int32, int64, uint8)")
    return table[dt]


def from_torch_dtype(dt) -> DType:
    import torch
    table = {torch.float32: DType.F32, torch.bfloat16: DType.BF16, torch.float16: DType.F16,
             torch.int32: DType.I32, torch.int64: DType.I64, torch.uint8: DType.U8}
    for name, kd in (("float8_e4m3fn", DType.E4M3FN), ("float8_e4m3fnuz", DType.E4M3FNUZ),
                     ("float8_e5m2", DType.E5M2), ("float8_e8m0fnu", DType.E8M0)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = kd
    if dt not in table:
        raise ValueError(f"torch dtype {dt} has no kerneld dtype")
    return table[dt]


def torch_dtype(kd: DType):
    """The torch dtype for a kerneld dtype: the float8 dtypes where this torch has them, else
    torch.uint8 for every one-byte code."""
    import torch
    kd = dtype(kd)
    names = {DType.F32: "float32", DType.BF16: "bfloat16", DType.F16: "float16",
             DType.I32: "int32", DType.I64: "int64", DType.U8: "uint8",
             DType.E4M3FN: "float8_e4m3fn", DType.E4M3FNUZ: "float8_e4m3fnuz",
             DType.E5M2: "float8_e5m2", DType.E8M0: "float8_e8m0fnu"}
    return getattr(torch, names[kd], torch.uint8)


# ----- bf16 -----------------------------------------------------------------------------------

def to_bf16(values) -> np.ndarray:
    """float32 values to bf16 bit patterns (uint16), rounded to nearest even; NaN stays NaN."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded.reshape(f.shape)


def from_bf16(bits) -> np.ndarray:
    """bf16 bit patterns (uint16) to float32, exactly."""
    b = np.ascontiguousarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32).reshape(b.shape)


# ----- FP8 and e8m0 codes ---------------------------------------------------------------------

def _fp8_table(exp_bits: int, man_bits: int, bias: int, fnuz: bool, ieee_inf: bool) -> np.ndarray:
    table = np.zeros(256, dtype=np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        if fnuz and code == 0x80:
            table[code] = np.nan
            continue
        if ieee_inf and e == (1 << exp_bits) - 1:
            table[code] = sign * np.inf if m == 0 else np.nan
            continue
        if not fnuz and not ieee_inf and e == (1 << exp_bits) - 1 and m == (1 << man_bits) - 1:
            table[code] = np.nan  # e4m3fn: S.1111.111
            continue
        if e == 0:
            value = m / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            value = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        table[code] = sign * value
    return table


_DECODE = {
    DType.E4M3FN: _fp8_table(4, 3, 7, fnuz=False, ieee_inf=False),
    DType.E4M3FNUZ: _fp8_table(4, 3, 8, fnuz=True, ieee_inf=False),
    DType.E5M2: _fp8_table(5, 2, 15, fnuz=False, ieee_inf=True),
}


def decode(codes, kd) -> np.ndarray:
    """FP8 codes (uint8) of `kd` (E4M3FN, E4M3FNUZ, E5M2) or e8m0 scales (E8M0) to float32."""
    kd = dtype(kd)
    c = np.asarray(codes, dtype=np.uint8)
    if kd == DType.E8M0:
        out = np.ldexp(np.float32(1.0), c.astype(np.int32) - 127).astype(np.float32)
        out[c == 0xFF] = np.nan
        return out
    if kd not in _DECODE:
        raise ValueError(f"{kd.name} is not an FP8 or e8m0 dtype")
    return _DECODE[kd][c]
