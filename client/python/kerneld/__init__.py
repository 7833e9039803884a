"""kerneld: FP8 quantize / blockwise FP8 GEMM / MoE pad from Python, run by the node's kerneld
daemon (ctypes over its C ABI, libkerneld_c.so).

    import numpy as np, kerneld
    with kerneld.connect("run/kerneld.sock") as kd:            # CPU backend: numpy in shm
        x = kd.asarray(np.random.randn(256, 512).astype(np.float32), "bf16")
        codes, scales = kd.quantize(x, granularity="1x128")    # uint8 e4m3fn codes, f32 scales
        print(kerneld.decode(codes, "e4m3fn")[0, :4] * scales[0, 0])

PyTorch models: kerneld.torch.convert_to_float8_blockwise(model).
"""
from . import dtypes
from ._lib import candidate_paths as library_candidates
from ._lib import load as load_library
from .client import Client, DaemonBuffer, connect
from .dtypes import (CompletionMode, DType, FP8_MAX, GemmVariant, IpcKind, MxRounding,
                     QuantGranularity, ScaleFormat, ScaleLayout, decode, from_bf16, to_bf16)
from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded,
                     FailedPrecondition, Internal, InvalidArgument, KerneldError, NotFound,
                     OutOfRange, PermissionDenied, ResourceExhausted, Unauthenticated,
                     Unavailable, Unimplemented, Unknown)
from .ops import OPS, Completion, TensorRef, Typed, typed
from .ops import *  # noqa: F401,F403  (one class per op of the table: Quantize, Gemm, ...)
from .shm import ShmArray

__version__ = "0.1.0"


def api_version() -> int:
    """The C ABI version of the loaded libkerneld_c.so, (major << 16) | minor."""
    return load_library().kd_api_version()


def library_path() -> str:
    """Where libkerneld_c.so was loaded from."""
    from . import _lib
    return _lib.binding().path
