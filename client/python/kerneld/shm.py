"""Host memory the CPU backend reads and writes: POSIX shm buffers made and registered through
the C ABI, exposed as numpy arrays, and a pool that keeps buffers registered for reuse."""
from __future__ import annotations

import bisect
import ctypes
import threading
import weakref
from typing import Dict, List, Optional, Tuple

import numpy as np

from . import _lib
from .dtypes import DType

_MIN_BLOCK = 64 << 10


class ShmArray(np.ndarray):
    """A numpy array whose memory is a registered shm buffer; `kd_dtype` says what its bits are
    (DType.BF16 for a uint16 array, DType.E4M3FN for a uint8 one...). Views keep it. Arrays made
    by arithmetic on it are new memory, not in shm, and cannot be passed to the daemon."""

    kd_dtype: Optional[DType] = None

    def __array_finalize__(self, obj) -> None:
        self.kd_dtype = getattr(obj, "kd_dtype", None)


class _Block:
    __slots__ = ("handle", "ptr", "size", "buffer_id")

    def __init__(self, handle: int, ptr: int, size: int, buffer_id: int):
        self.handle, self.ptr, self.size, self.buffer_id = handle, ptr, size, buffer_id


def block_size(nbytes: int) -> int:
    """The pool's size class for `nbytes`: at least 64 KiB, then steps of a quarter of the next
    power of two (at most 25% unused)."""
    if nbytes <= _MIN_BLOCK:
        return _MIN_BLOCK
    p = 1 << (nbytes - 1).bit_length()
    step = max(p // 4, _MIN_BLOCK)
    return (nbytes + step - 1) // step * step


class HostMemory:
    """The client's registered host memory: pooled shm blocks handed out as numpy arrays, and an
    address index that maps any pointer inside a registered buffer to (buffer id, offset).
    Thread-safe. A block goes back to the pool when the last array (or torch tensor made with
    torch.from_numpy) viewing it is collected; free blocks beyond `max_cached_bytes` are
    released from the daemon and unmapped."""

    def __init__(self, client, max_cached_bytes: int):
        self._client = client
        self._max_cached = max_cached_bytes
        self._lock = threading.Lock()
        self._free: Dict[int, List[_Block]] = {}
        self._cached = 0
        self._starts: List[int] = []
        self._regions: List[Tuple[int, int, int]] = []  # (start, end, buffer_id), by start
        self._all: List[_Block] = []
        self._closed = False

    def _index_add(self, start: int, end: int, buffer_id: int) -> None:
        i = bisect.bisect_left(self._starts, start)
        self._starts.insert(i, start)
        self._regions.insert(i, (start, end, buffer_id))

    def _index_remove(self, start: int) -> None:
        i = bisect.bisect_left(self._starts, start)
        if i < len(self._starts) and self._starts[i] == start:
            del self._starts[i]
            del self._regions[i]

    def locate(self, ptr: int, nbytes: int) -> Optional[Tuple[int, int]]:
        """(buffer id, byte offset) of [ptr, ptr + nbytes) in a registered buffer, or None."""
        with self._lock:
            i = bisect.bisect_right(self._starts, ptr) - 1
            if i < 0:
                return None
            start, end, buffer_id = self._regions[i]
            if ptr >= end or ptr + nbytes > end:
                return None
            return buffer_id, ptr - start

    def _new_block(self, size: int) -> _Block:
        lib = _lib.load()
        handle = ctypes.c_void_p()
        self._client._check(lib.kd_shm_create(size, self._client._shm_mode,
                                              self._client._shm_group, ctypes.byref(handle)))
        buffer_id = ctypes.c_uint64()
        rc = lib.kd_register_shm(self._client._handle, handle, ctypes.byref(buffer_id))
        if rc != 0:
            message = lib.kd_last_error()
            lib.kd_shm_destroy(handle)
            self._client._raise(rc, message)
        return _Block(handle.value, lib.kd_shm_data(handle), size, buffer_id.value)

    def alloc(self, nbytes: int) -> np.ndarray:
        """A uint8 array of `nbytes` (uninitialised) in a registered block."""
        nbytes = max(int(nbytes), 1)
        size = block_size(nbytes)
        with self._lock:
            if self._closed:
                raise RuntimeError("the kerneld client is closed")
            free = self._free.get(size)
            block = free.pop() if free else None
            if block is not None:
                self._cached -= block.size
        if block is None:
            block = self._new_block(size)
            with self._lock:
                self._all.append(block)
                self._index_add(block.ptr, block.ptr + block.size, block.buffer_id)
        raw = (ctypes.c_uint8 * nbytes).from_address(block.ptr)
        root = np.ctypeslib.as_array(raw)
        # Not at exit: an array still alive then must keep its mapping.
        weakref.finalize(root, self._give_back, block).atexit = False
        return root

    def _give_back(self, block: _Block) -> None:
        lib = _lib.load()
        with self._lock:
            if self._closed:
                # The session (and its registrations) ended with the client; only the mapping
                # is left, and no array views it any more.
                lib.kd_shm_destroy(ctypes.c_void_p(block.handle))
                return
            if self._cached + block.size <= self._max_cached:
                self._free.setdefault(block.size, []).append(block)
                self._cached += block.size
                return
            self._all.remove(block)
            self._index_remove(block.ptr)
        if self._client._handle:
            lib.kd_release(self._client._handle, block.buffer_id)
        lib.kd_shm_destroy(ctypes.c_void_p(block.handle))

    def register_external(self, start: int, end: int, buffer_id: int) -> None:
        with self._lock:
            self._index_add(start, end, buffer_id)

    def forget_external(self, start: int) -> None:
        with self._lock:
            self._index_remove(start)

    def close(self) -> None:
        """Unmaps the free blocks; a block still viewed by an array is unmapped when the last
        view goes (its memory stays valid for the arrays, but the daemon no longer sees it)."""
        lib = _lib.load()
        with self._lock:
            free = [b for blocks in self._free.values() for b in blocks]
            self._all, self._free, self._cached = [], {}, 0
            self._starts, self._regions = [], []
            self._closed = True
        for block in free:
            lib.kd_shm_destroy(ctypes.c_void_p(block.handle))

    def stats(self) -> Dict[str, int]:
        with self._lock:
            return {"blocks": len(self._all), "bytes": sum(b.size for b in self._all),
                    "cached_free_bytes": self._cached}
