"""PyTorch peer for the GPU IPC tests: exports the CUDA IPC handle of a tensor *slice* the way a
trainer does (the caching allocator's block handle plus the slice's byte offset inside it) and
keeps the tensor alive until stdin closes.

Prints one line: "<handle hex> <offset> <bytes> <fnv1a of the slice's bytes>".
"""
import sys

import torch


def fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main() -> None:
    torch.manual_seed(7)
    base = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    piece = base[300:428]  # 128 rows, a slice that starts inside the allocation
    storage = piece.untyped_storage()
    shared = storage._share_cuda_()
    handle, storage_offset = shared[1], shared[3]
    # Recent PyTorch prefixes the raw cudaIpcMemHandle_t (the last 64 bytes) with a format
    # version and the segment kind ("c": a cudaMalloc segment).
    if len(handle) > 64:
        assert handle[-65:-64] == b"c", "not a cudaMalloc segment handle"
        handle = handle[-64:]
    offset = storage_offset + piece.storage_offset() * piece.element_size()
    nbytes = piece.numel() * piece.element_size()
    data = piece.contiguous().view(torch.uint8).cpu().numpy().tobytes()
    print(handle.hex(), offset, nbytes, format(fnv1a(data), "x"), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
