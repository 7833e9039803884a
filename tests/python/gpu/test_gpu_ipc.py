"""Torch CUDA tensors reach the daemon by the IPC handle of their caching-allocator segment
plus their offset: slices at any offset, a segment registered once per session, registrations
of freed segments released, and expandable-segments memory refused with a clear error."""
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import kerneld  # noqa: E402
from gpu_util import requires_cuda  # noqa: E402
from kerneld.torch.inprocess import quantize_1x128  # noqa: E402

pytestmark = requires_cuda


def quantize_on_daemon(kd, x):
    out = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    scales = torch.empty(x.shape[0], x.shape[1] // 128, device=x.device)
    torch.cuda.synchronize()  # SYNC op without events: the inputs must be written already
    kd.run(kerneld.Quantize(input=x, output=kerneld.typed(out, "e4m3fn"), scales=scales,
                            granularity="1x128"))
    return out, scales


def test_slices_at_any_offset_match_the_reference(gpu_kd):
    torch.manual_seed(7)
    base = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    registry = gpu_kd.cuda_registry()
    for piece in (base[:128], base[300:428], base[896:], base[:, 128:384], base[5:133, 256:]):
        out, scales = quantize_on_daemon(gpu_kd, piece)
        codes, ref_scales = quantize_1x128(piece)
        assert torch.equal(out, codes.view(torch.uint8)), f"codes of slice at {piece.data_ptr()}"
        assert torch.equal(scales, ref_scales)
    count = registry.registrations
    for _ in range(3):
        quantize_on_daemon(gpu_kd, base[300:428])
    assert registry.registrations == count, "a registered segment was registered again"


def test_a_freed_segment_is_registered_again_and_the_old_registration_released(gpu_kd):
    registry = gpu_kd.cuda_registry()
    for round_ in range(4):
        big = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)  # its own segment
        out, scales = quantize_on_daemon(gpu_kd, big[:256])
        codes, ref_scales = quantize_1x128(big[:256])
        assert torch.equal(out, codes.view(torch.uint8)), f"round {round_}: stale mapping"
        del big, out, scales
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # the segment goes back to the driver
    released = registry.sweep()
    live = {base for base, _, _ in registry.segments()}
    assert registry.releases >= 3, (registry.registrations, registry.releases, released)
    assert len(live) <= 8, f"{len(live)} registrations kept for a handful of live segments"


EXPANDABLE = r"""
import sys, torch, kerneld
kd = kerneld.connect(sys.argv[1])
x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
out = torch.empty(256, 256, dtype=torch.uint8, device="cuda")
s = torch.empty(256, 2, device="cuda")
try:
    kd.run(kerneld.Quantize(input=x, output=kerneld.typed(out, "e4m3fn"), scales=s,
                            granularity="1x128"))
    print("ACCEPTED")
except kerneld.FailedPrecondition as e:
    print("REFUSED", e.message)
"""


def test_expandable_segments_are_refused_with_a_clear_error(gpu_socket):
    env = dict(__import__("os").environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    out = subprocess.run([sys.executable, "-c", EXPANDABLE, gpu_socket], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("REFUSED"), out.stdout + out.stderr
    assert "expandable_segments" in out.stdout
