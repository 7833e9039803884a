"""Plain numpy references of kerneld's quantization recipe (kerneld.proto, QuantizeOp) and of
its blockwise GEMM, independent of the daemon's code."""
import numpy as np

import kerneld

_E4M3_MAX = np.float32(448.0)
_EPS = np.float32(1e-12)
# The 127 finite non-negative e4m3fn values, ascending: code c has value _MAGS[c].
_MAGS = kerneld.decode(np.arange(0x7F, dtype=np.uint8), "e4m3fn").astype(np.float64)


def encode_e4m3fn(v: np.ndarray) -> np.ndarray:
    """float32 values to e4m3fn codes: saturated to +-448, rounded to nearest even; -0 keeps
    its sign; NaN gives 0x7f."""
    v = np.asarray(v, dtype=np.float32)
    a = np.minimum(np.abs(v).astype(np.float64), 448.0)
    hi = np.clip(np.searchsorted(_MAGS, a), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    d_lo, d_hi = a - _MAGS[lo], _MAGS[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    codes = np.where(pick_hi, hi, lo).astype(np.uint8)
    codes |= np.where(np.signbit(v), 0x80, 0).astype(np.uint8)
    codes[np.isnan(v)] = 0x7F
    return codes


def quantize(x: np.ndarray, block_rows: int, block_cols: int):
    """(codes, stored scales) of x (R,C) float32 with blocks of block_rows x block_cols (the
    last row block may be partial): scale = 448 / max(amax, eps) in fp32, code =
    e4m3fn(x * scale), stored = 1 / scale."""
    x = np.asarray(x, dtype=np.float32)
    rows, cols = x.shape
    rb = (rows + block_rows - 1) // block_rows
    cb = cols // block_cols
    padded = np.zeros((rb * block_rows, cols), dtype=np.float32)
    padded[:rows] = np.abs(x)
    amax = padded.reshape(rb, block_rows, cb, block_cols).max(axis=(1, 3))
    scale = _E4M3_MAX / np.maximum(amax, _EPS)
    expanded = np.repeat(np.repeat(scale, block_rows, axis=0), block_cols, axis=1)[:rows]
    codes = encode_e4m3fn(x * expanded)
    return codes, (np.float32(1.0) / scale).astype(np.float32)


def dequantize(codes: np.ndarray, scales: np.ndarray, block_rows: int, block_cols: int):
    values = kerneld.decode(codes, "e4m3fn").astype(np.float64)
    rows = codes.shape[0]
    s = np.repeat(np.repeat(scales.astype(np.float64), block_rows, axis=0), block_cols, axis=1)
    return values * s[:rows, :codes.shape[1]]
