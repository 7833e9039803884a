"""CUDA tensors for the daemon: registration of the caching allocator's segments by IPC handle
(once per segment and session), and pooled interprocess events that order the daemon's work
with the caller's current stream, with no host synchronisation.

The driver API is reached through ctypes on libcuda (no compiled extension): for a tensor's
pointer, cuPointerGetAttributes gives the allocation's base, size and a process-unique buffer
id; a cached registration is used only while the base still holds the same buffer id, so an
allocation the caching allocator freed (or gave back to the driver) and whose address came back
for another is registered again, and the old registration is released."""
from __future__ import annotations

import ctypes
import threading
from typing import Dict, List, Optional, Tuple

from . import _lib, errors
from .dtypes import CompletionMode

# cuPointerGetAttributes attributes (cuda.h CUpointer_attribute).
_ATTR_MEMORY_TYPE = 2
_ATTR_BUFFER_ID = 7
_ATTR_DEVICE_ORDINAL = 9
_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE = 10
_ATTR_RANGE_START_ADDR = 11
_ATTR_RANGE_SIZE = 12
_MEMORYTYPE_DEVICE = 2
_CUDA_ERROR_INVALID_CONTEXT = 201


class Driver:
    """The few libcuda entry points this package uses."""

    def __init__(self):
        lib = None
        for name in ("libcuda.so.1", "libcuda.so"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise errors.FailedPrecondition("libcuda.so.1 (the NVIDIA driver) cannot be loaded")
        self._lib = lib
        lib.cuPointerGetAttributes.restype = ctypes.c_int
        lib.cuPointerGetAttributes.argtypes = [ctypes.c_uint, ctypes.POINTER(ctypes.c_int),
                                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]
        lib.cuIpcGetMemHandle.restype = ctypes.c_int
        lib.cuIpcGetMemHandle.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
        lib.cuGetErrorString.restype = ctypes.c_int
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuDevicePrimaryCtxRetain.restype = ctypes.c_int
        lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        lib.cuCtxSetCurrent.restype = ctypes.c_int
        lib.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
        attrs = [_ATTR_RANGE_START_ADDR, _ATTR_RANGE_SIZE, _ATTR_BUFFER_ID, _ATTR_DEVICE_ORDINAL,
                 _ATTR_MEMORY_TYPE, _ATTR_IS_LEGACY_CUDA_IPC_CAPABLE]
        self._attrs = (ctypes.c_int * len(attrs))(*attrs)
        self._local = threading.local()

    def _slots(self):
        # Per thread: six zeroed 8-byte slots (a bool attribute writes fewer bytes).
        slots = getattr(self._local, "slots", None)
        if slots is None:
            values = [ctypes.c_uint64() for _ in range(6)]
            pointers = (ctypes.c_void_p * 6)(*[ctypes.addressof(v) for v in values])
            slots = self._local.slots = (values, pointers)
        return slots

    def error(self, code: int) -> str:
        text = ctypes.c_char_p()
        self._lib.cuGetErrorString(code, ctypes.byref(text))
        return f"CUDA driver error {code}" + (f" ({text.value.decode()})" if text.value else "")

    def _use_primary_context(self, device: int) -> None:
        # A thread that never touched the device has no current context: use the device's
        # primary context, the one PyTorch allocates in.
        ctx = ctypes.c_void_p()
        if self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device) == 0:
            self._lib.cuCtxSetCurrent(ctx)

    def allocation(self, ptr: int, device: Optional[int] = None
                   ) -> Optional[Tuple[int, int, int, int, int, int]]:
        """(base, size, buffer id, device ordinal, memory type, legacy-IPC capable) of the
        allocation holding `ptr`, or None when the driver knows no allocation there."""
        values, pointers = self._slots()
        for v in values:
            v.value = 0
        rc = self._lib.cuPointerGetAttributes(6, self._attrs, pointers, ptr)
        if rc == _CUDA_ERROR_INVALID_CONTEXT and device is not None:
            self._use_primary_context(device)
            rc = self._lib.cuPointerGetAttributes(6, self._attrs, pointers, ptr)
        if rc != 0:
            return None
        return tuple(v.value for v in values)

    def ipc_handle(self, base: int, device: int) -> bytes:
        handle = ctypes.create_string_buffer(_lib.IPC_HANDLE_BYTES)
        rc = self._lib.cuIpcGetMemHandle(handle, base)
        if rc == _CUDA_ERROR_INVALID_CONTEXT:
            self._use_primary_context(device)
            rc = self._lib.cuIpcGetMemHandle(handle, base)
        if rc != 0:
            raise errors.FailedPrecondition(
                f"cuIpcGetMemHandle of the allocation at 0x{base:x}: {self.error(rc)}")
        return handle.raw


class _Segment:
    __slots__ = ("base", "size", "alloc_id", "device", "buffer_id")

    def __init__(self, base, size, alloc_id, device, buffer_id):
        self.base, self.size, self.alloc_id = base, size, alloc_id
        self.device, self.buffer_id = device, buffer_id


class CudaRegistry:
    """The session's registered CUDA allocations, keyed by base address. Thread-safe."""

    def __init__(self, client, device_map: Optional[Dict[int, int]] = None):
        self._client = client
        self._driver = Driver()
        self._device_map = device_map or {}
        self._lock = threading.Lock()
        self._segments: Dict[int, _Segment] = {}
        self.registrations = 0  # segments registered over the session's life
        self.releases = 0  # registrations released because their allocation went away

    def daemon_device(self, device: int) -> int:
        return self._device_map.get(device, device)

    def locate(self, ptr: int, nbytes: int, device: Optional[int] = None) -> Tuple[int, int]:
        """(buffer id, byte offset) of [ptr, ptr + nbytes) in a registered allocation,
        registering the allocation on first use."""
        info = self._driver.allocation(ptr, device)
        if info is None or info[4] != _MEMORYTYPE_DEVICE:
            raise errors.InvalidArgument(f"0x{ptr:x} is not CUDA device memory")
        base, size, alloc_id, ordinal, _, legacy_ipc = info
        if not legacy_ipc:
            raise errors.FailedPrecondition(
                f"the CUDA memory at 0x{ptr:x} cannot be exported with cudaIpcGetMemHandle: it "
                "comes from expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
                "True) or another virtual-memory allocator. Run the trainer without "
                "expandable_segments to share its tensors with kerneld.")
        if ptr + nbytes > base + size:
            raise errors.InvalidArgument(
                f"[0x{ptr:x}, +{nbytes}) runs past the end of its allocation "
                f"[0x{base:x}, +{size})")
        with self._lock:
            seg = self._segments.get(base)
            if seg is not None and seg.alloc_id == alloc_id and seg.size == size:
                return seg.buffer_id, ptr - base
        return self._register(base, size, alloc_id, ordinal), ptr - base

    def _register(self, base: int, size: int, alloc_id: int, ordinal: int) -> int:
        stale = self._stale()
        for seg in stale:
            self._release(seg)
        with self._lock:
            seg = self._segments.get(base)
            if seg is not None and seg.alloc_id == alloc_id and seg.size == size:
                return seg.buffer_id  # another thread registered it meanwhile
        handle = self._driver.ipc_handle(base, ordinal)
        buffer_id = self._client.register_ipc(handle, size, offset=0,
                                              device=self.daemon_device(ordinal))
        with self._lock:
            old = self._segments.get(base)
            self._segments[base] = _Segment(base, size, alloc_id, ordinal, buffer_id)
            self.registrations += 1
        if old is not None:
            self._release(old)
        return buffer_id

    def _stale(self) -> List[_Segment]:
        """Registrations whose allocation is gone (freed, or its address now holds another)."""
        with self._lock:
            segments = list(self._segments.values())
        stale = []
        for seg in segments:
            info = self._driver.allocation(seg.base)
            if info is None or info[0] != seg.base or info[2] != seg.alloc_id:
                stale.append(seg)
        return stale

    def _release(self, seg: _Segment) -> None:
        with self._lock:
            if self._segments.get(seg.base) is seg:
                del self._segments[seg.base]
            self.releases += 1
        try:
            self._client.release(seg.buffer_id)
        except errors.NotFound:
            pass

    def sweep(self) -> int:
        """Releases the registrations of allocations that are gone; returns how many. Runs by
        itself before every new registration; call it after torch.cuda.empty_cache() to hand
        the memory back at once (the daemon's mapping otherwise keeps it alive)."""
        stale = self._stale()
        for seg in stale:
            self._release(seg)
        return len(stale)

    def segments(self) -> List[Tuple[int, int, int]]:
        """(base, size, buffer id) of every registered allocation."""
        with self._lock:
            return [(s.base, s.size, s.buffer_id) for s in self._segments.values()]

    def close(self) -> None:
        with self._lock:
            self._segments.clear()


class EventPair:
    """Two interprocess events of one device and the kd_completion naming them: the caller's
    stream is recorded on `wait` before a call, and waits on `signal` after it."""

    def __init__(self, device: int):
        import torch
        with torch.cuda.device(device):
            self.wait = torch.cuda.Event(enable_timing=False, blocking=False, interprocess=True)
            self.signal = torch.cuda.Event(enable_timing=False, blocking=False, interprocess=True)
            wait_handle = bytes(self.wait.ipc_handle())
            signal_handle = bytes(self.signal.ipc_handle())
        c = _lib.Completion()
        c.mode = int(CompletionMode.ASYNC)
        c.wait_event_size = len(wait_handle)
        c.signal_event_size = len(signal_handle)
        ctypes.memmove(c.wait_event, wait_handle, len(wait_handle))
        ctypes.memmove(c.signal_event, signal_handle, len(signal_handle))
        self.completion = c
        self.device = device


class EventPool:
    """Event pairs per device, reused: a pair goes back once the call that used it returned
    (the daemon has enqueued its wait on `wait` and its record of `signal` by then) and the
    caller's stream wait on `signal` is enqueued. The daemon opens each event once per session.
    Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._free: Dict[int, List[EventPair]] = {}
        self.created = 0

    def acquire(self, device: int) -> EventPair:
        with self._lock:
            free = self._free.get(device)
            if free:
                return free.pop()
            self.created += 1
        return EventPair(device)

    def release(self, pair: EventPair) -> None:
        with self._lock:
            self._free.setdefault(pair.device, []).append(pair)
