"""What the GPU tests (tests/python/gpu) share: the CUDA skip mark, SQNR, the output folder."""
import os
import tempfile

import pytest

torch = pytest.importorskip("torch")

CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def out_dir() -> str:
    """Where GPU tests write what they record ($KD_GPU_OUT, else a temporary folder)."""
    path = os.environ.get("KD_GPU_OUT") or tempfile.mkdtemp(prefix="kd_gpu_out.")
    os.makedirs(path, exist_ok=True)
    return path


def sqnr(ref, actual) -> float:
    """20 log10(|ref| / |ref - actual|) in dB, as torchao's tests measure."""
    ref, actual = ref.double(), actual.double()
    noise = (ref - actual).norm()
    if noise == 0:
        return float("inf")
    return float(20 * torch.log10(ref.norm() / noise))
