"""How kerneld.torch reaches the daemon: a Client per process, the placement of tensors where
the daemon can see them, and the submission of one batch ordered on the caller's stream.

CUDA tensors are used where they are (their allocation is registered once per session by IPC
handle); each batch waits on an interprocess event recorded on the current stream and the
current stream waits on the daemon's signal event (ASYNC completion): no host synchronisation.
On the CPU backend tensors live in the client's shm pool; a CPU tensor elsewhere is copied into
it, and results are allocated in it (torch.from_numpy of a pool block)."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Optional, Sequence, Tuple

import torch

from .. import _lib
from ..client import Client
from ..cuda import EventPool
from ..dtypes import DType, ScaleLayout

# (buffer id, byte offset, kerneld dtype, shape, strides or None): one tensor of an op.
Ref = Tuple[int, int, int, Sequence[int], Optional[Sequence[int]]]

_TORCH_TO_KD = {torch.float32: DType.F32, torch.bfloat16: DType.BF16, torch.float16: DType.F16,
                torch.int32: DType.I32, torch.int64: DType.I64, torch.uint8: DType.U8}


def kd_dtype(t: torch.Tensor) -> int:
    try:
        return int(_TORCH_TO_KD[t.dtype])
    except KeyError:
        raise TypeError(f"kerneld has no dtype for {t.dtype}") from None


def set_ref(ct: _lib.Tensor, ref: Ref) -> None:
    buffer_id, offset, kd, shape, strides = ref
    ct.buffer_id = buffer_id
    ct.byte_offset = offset
    ct.dtype = kd
    ct.rank = len(shape)
    sh = ct.shape
    for i, n in enumerate(shape):
        sh[i] = n
    if strides is not None:
        st = ct.strides
        for i, s in enumerate(strides):
            st[i] = s


class Runtime:
    """A Client and what kerneld.torch needs around it. Thread-safe."""

    def __init__(self, client: Client, a_scale_layout: str = "row_major", sync: bool = False):
        """sync=True (CUDA): every batch waits for the caller's stream on the host and runs
        SYNC, so the daemon reports its kernel seconds (accumulated in `kernel_seconds`): for
        measuring where time goes, not for training."""
        self.client = client
        self.sync = sync
        self.events = EventPool()
        self.a_scale_layout = ScaleLayout[a_scale_layout.upper()]
        self.submits = 0
        self.kernel_seconds = 0.0
        self._group_cache = {}
        self._lock = threading.Lock()

    # ----- memory ------------------------------------------------------------------------------

    def empty(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """An uninitialised tensor the daemon can see."""
        if device.type == "cuda":
            return torch.empty(shape, dtype=dtype, device=device)
        numel = 1
        for n in shape:
            numel *= n
        itemsize = torch.empty((), dtype=dtype).element_size()
        root = self.client.host.alloc(numel * itemsize)
        return torch.from_numpy(root).view(dtype).view(shape)

    def zeros(self, shape, dtype, device) -> torch.Tensor:
        t = self.empty(shape, dtype, device)
        t.zero_()
        return t

    def place(self, t: torch.Tensor) -> torch.Tensor:
        """`t`, or on the CPU a copy of it in the shm pool when it lies outside; the last
        dimension made contiguous."""
        if t.dim() > 0 and t.stride(-1) != 1:
            t = t.contiguous()
        if t.is_cuda:
            return t
        nbytes = t.numel() * t.element_size()
        if nbytes and self.client.host.locate(t.data_ptr(), nbytes) is not None:
            return t
        copy = self.empty(tuple(t.shape), t.dtype, t.device)
        copy.copy_(t)
        return copy

    def locate(self, t: torch.Tensor) -> Tuple[int, int]:
        """(buffer id, byte offset) of `t`'s first element."""
        nbytes = max(t.numel() * t.element_size(), 1)
        if t.is_cuda:
            return self.client.cuda_registry().locate(t.data_ptr(), nbytes, t.device.index)
        where = self.client.host.locate(t.data_ptr(), nbytes)
        if where is None:
            raise ValueError("a CPU tensor outside the kerneld shm pool reached an op; "
                             "Runtime.place() it first")
        return where

    def group_ends_of(self, rows: int, device: torch.device) -> torch.Tensor:
        """A one-element i32 tensor holding `rows` on `device` (one group: padding a plain
        token dimension), made once per (rows, device)."""
        key = (rows, str(device))
        with self._lock:
            t = self._group_cache.get(key)
        if t is None:
            t = self.empty((1,), torch.int32, device)
            t.fill_(rows)
            with self._lock:
                self._group_cache[key] = t
        return t

    # ----- submission --------------------------------------------------------------------------

    def submit(self, ops: ctypes.Array, device: torch.device) -> None:
        """Runs `ops` as one batch, ordered after the work already queued on the current stream
        and before the work queued after this call (CUDA), or synchronously (CPU)."""
        self.submits += 1
        if device.type != "cuda":
            self.kernel_seconds += self.client.submit(ops)
            return
        index = device.index if device.index is not None else torch.cuda.current_device()
        stream = torch.cuda.current_stream(index)
        if self.sync:
            stream.synchronize()
            self.kernel_seconds += self.client.submit(ops)
            return
        pair = self.events.acquire(index)
        try:
            pair.wait.record(stream)
            self.client.submit(ops, pair.completion)
            stream.wait_event(pair.signal)
        finally:
            self.events.release(pair)


_default: Optional[Runtime] = None
_default_pid = 0
_default_lock = threading.Lock()


def set_default_client(client: Optional[Client], a_scale_layout: str = "row_major") -> None:
    """The client kerneld.torch modules use in this process (None: make one on first use from
    $KERNELD_SOCKET)."""
    global _default, _default_pid
    with _default_lock:
        _default = Runtime(client, a_scale_layout) if client is not None else None
        _default_pid = os.getpid()


def default_runtime() -> Runtime:
    """This process's runtime, connecting on first use ($KERNELD_SOCKET, or the default
    socket; $KERNELD_A_SCALE_LAYOUT=k_block_major selects that a_scales layout)."""
    global _default, _default_pid
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            layout = os.environ.get("KERNELD_A_SCALE_LAYOUT", "row_major")
            _default = Runtime(Client(name=f"torch-{os.getpid()}"), layout)
            _default_pid = os.getpid()
        return _default
