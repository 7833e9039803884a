"""kerneld's wire enums (from the op table of libkerneld_c.so) and the numpy side of its dtypes:
bf16 is carried as uint16 bit patterns and FP8 / e8m0 as uint8 codes (numpy has neither), with
exact conversions to and from float32."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from . import _lib


_binding = _lib.binding()

# The wire enums, built from the op table of libkerneld_c.so (include/kerneld/op_table.h): each
# member carries its table label (Granularity "1x128" is QuantGranularity.G1X128), and 0 is
# UNSPECIFIED in every enum. KerneldEnum.parse(value) takes a member, a name, a label or a number.
DType = _binding.enums["DType"]
QuantGranularity = _binding.enums["QuantGranularity"]
ScaleFormat = _binding.enums["ScaleFormat"]
ScaleLayout = _binding.enums["ScaleLayout"]
MxRounding = _binding.enums["MxRounding"]
GemmVariant = _binding.enums["GemmVariant"]
CompletionMode = _binding.enums["CompletionMode"]
IpcKind = _binding.enums["IpcKind"]

# Bytes per element of each dtype (the table's).
ITEMSIZE: Dict[Any, int] = {d: d.itemsize for d in DType if d.value}

# The numpy dtype that holds each kerneld dtype's bits: bf16 as uint16 bit patterns, FP8 and e8m0
# as uint8 codes (numpy has neither).
NUMPY_STORAGE: Dict[Any, np.dtype] = {
    DType.F32: np.dtype(np.float32), DType.BF16: np.dtype(np.uint16),
    DType.F16: np.dtype(np.float16), DType.E4M3FN: np.dtype(np.uint8),
    DType.E4M3FNUZ: np.dtype(np.uint8), DType.E5M2: np.dtype(np.uint8),
    DType.E8M0: np.dtype(np.uint8), DType.I32: np.dtype(np.int32),
    DType.I64: np.dtype(np.int64), DType.U8: np.dtype(np.uint8),
}

# Names accepted for dtypes beyond the table's labels ("bf16", "e4m3fn"): numpy's and torch's.
_ALIASES = {
    "float32": DType.F32, "fp32": DType.F32, "bfloat16": DType.BF16, "float16": DType.F16,
    "fp16": DType.F16, "half": DType.F16, "float8_e4m3fn": DType.E4M3FN,
    "float8_e4m3fnuz": DType.E4M3FNUZ, "float8_e5m2": DType.E5M2, "float8_e8m0fnu": DType.E8M0,
    "int32": DType.I32, "int64": DType.I64, "uint8": DType.U8,
}


def granularity(value: Any):
    return QuantGranularity.parse(value)


def gemm_variant(value: Any):
    return GemmVariant.parse(value)


def dtype(value: Any):
    """A DType from a DType, its label ("bf16") or another name ("bfloat16", "float8_e4m3fn"),
    a numpy dtype (float32, float16, int32, int64, uint8 as U8, uint16 as BF16) or a torch
    dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        alias = _ALIASES.get(value.lower())
        if alias is not None:
            return alias
        try:
            return DType.parse(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a kerneld dtype") from None
    if isinstance(value, int):
        return DType(value)
    module = type(value).__module__
    if module.startswith("torch"):
        return from_torch_dtype(value)
    return from_numpy_dtype(np.dtype(value))


def from_numpy_dtype(dt: np.dtype):
    dt = np.dtype(dt)
    table = {np.dtype(np.float32): DType.F32, np.dtype(np.float16): DType.F16,
             np.dtype(np.uint16): DType.BF16, np.dtype(np.int32): DType.I32,
             np.dtype(np.int64): DType.I64, np.dtype(np.uint8): DType.U8}
    if dt not in table:
        raise ValueError(f"numpy dtype {dt} has no kerneld dtype (float32, float16, uint16 for "
                         "bf16, int32, int64, uint8)")
    return table[dt]


def from_torch_dtype(dt):
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


def torch_dtype(kd):
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


# The largest finite value of each FP8 format (448, 240, 57344), from its code table.
FP8_MAX = {kd: float(np.max(np.abs(t[np.isfinite(t)]))) for kd, t in _DECODE.items()}


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
