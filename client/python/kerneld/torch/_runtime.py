"""How kerneld.torch reaches the daemon: a Client per process, the placement of tensors where
the daemon can see them, and the submission of one batch of ops ordered on the caller's stream.

CUDA tensors are used where they are (their allocation is registered once per session by IPC
handle); each batch waits on an interprocess event recorded on the current stream and the
current stream waits on the daemon's signal event (ASYNC completion): no host synchronisation.
On the CPU backend tensors live in the client's shm pool; a CPU tensor elsewhere is copied into
it, and results are allocated in it (torch.from_numpy of a pool block)."""
from __future__ import annotations

import os
import threading
import warnings
from typing import Optional, Sequence

import torch

from ..client import Client
from ..cuda import EventPool


class Runtime:
    """A Client and what kerneld.torch needs around it. Thread-safe.

    sync=True (CUDA): every batch waits for the caller's stream on the host and runs SYNC, so
    the daemon reports its kernel seconds (accumulated in `kernel_seconds`): for measuring where
    time goes, not for training."""

    def __init__(self, client: Client, sync: bool = False):
        self.client = client
        self.sync = sync
        self.events = EventPool()
        self.submits = 0
        self.kernel_seconds = 0.0
        self._group_cache = {}
        self._lock = threading.Lock()
        self._warned_mps = False

    # ----- memory ------------------------------------------------------------------------------

    def empty(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """An uninitialised contiguous tensor the daemon can see."""
        if device.type == "cuda":
            return torch.empty(shape, dtype=dtype, device=device)
        numel = 1
        for n in shape:
            numel *= int(n)
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        root = self.client.host.alloc(nbytes)
        return torch.from_numpy(root[:nbytes]).view(dtype).view(tuple(int(n) for n in shape))

    def zeros(self, shape, dtype, device) -> torch.Tensor:
        t = self.empty(shape, dtype, device)
        t.zero_()
        return t

    def place(self, t: torch.Tensor) -> torch.Tensor:
        """`t` with its last dimension contiguous, where the daemon can see it: itself on CUDA
        (or a contiguous copy), on the CPU itself when it lies in the shm pool, else a copy
        there."""
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

    def submit(self, ops, device: torch.device) -> None:
        """Runs `ops` (kerneld op values) as one batch, ordered after the work already queued on
        the current stream and before the work queued after this call (CUDA), or synchronously
        (CPU)."""
        self.submits += 1
        if device.type != "cuda":
            self.kernel_seconds += self.client.submit(ops)
            return
        index = device.index if device.index is not None else torch.cuda.current_device()
        stream = torch.cuda.current_stream(index)
        if not self._warned_mps:
            self._warn_without_mps()
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

    def _warn_without_mps(self) -> None:
        self._warned_mps = True
        pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
        if not os.path.exists(os.path.join(pipe, "control")):
            warnings.warn(
                f"kerneld: no MPS control daemon at {pipe} (CUDA_MPS_PIPE_DIRECTORY): the GPU "
                "time-slices between this process and kerneld, and every hand-over between "
                "their streams costs 140-320 us instead of 1-10 us (docs/decisions/0012-mps.md); "
                "start nvidia-cuda-mps-control -d on the node", RuntimeWarning, stacklevel=3)


_default: Optional[Runtime] = None
_default_pid = 0
_default_lock = threading.Lock()


def set_default_client(client: Optional[Client]) -> None:
    """The client kerneld.torch's ops use in this process (None: make one on first use from
    $KERNELD_SOCKET)."""
    global _default, _default_pid
    with _default_lock:
        _default = Runtime(client) if client is not None else None
        _default_pid = os.getpid()


def set_default_runtime(runtime: Optional[Runtime]) -> None:
    """The runtime kerneld.torch's ops use in this process."""
    global _default, _default_pid
    with _default_lock:
        _default = runtime
        _default_pid = os.getpid()


def default_runtime() -> Runtime:
    """This process's runtime, connecting on first use ($KERNELD_SOCKET, or the default
    socket)."""
    global _default, _default_pid
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            _default = Runtime(Client(name=f"torch-{os.getpid()}"))
            _default_pid = os.getpid()
        return _default
