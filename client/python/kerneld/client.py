"""kerneld.Client: one connection and one session to the daemon, through the C ABI."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib, errors, shapes
from . import dtypes as dt
from .dtypes import CompletionMode, DType, GemmVariant, QuantGranularity
from .ops import OPS, Completion, Gemm, Pad, Quantize, TensorRef, Typed, Unpad
from .shm import HostMemory, ShmArray


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


class DaemonBuffer:
    """A buffer the daemon allocated from its pool (Client.allocate): host memory as a numpy
    uint8 `array`, or device memory by `ipc_handle` (+ `ipc_offset`) on `device`."""

    def __init__(self, buffer_id: int, size: int, array: Optional[np.ndarray] = None,
                 ipc_handle: Optional[bytes] = None, ipc_offset: int = 0, device: int = 0,
                 shm: Optional[int] = None):
        self.buffer_id, self.size, self.array = buffer_id, size, array
        self.ipc_handle, self.ipc_offset, self.device = ipc_handle, ipc_offset, device
        self._shm = shm


class Client:
    """A connection to kerneld holding one session.

        with kerneld.Client("run/kerneld.sock") as kd:
            x = kd.asarray(np.random.randn(256, 512).astype(np.float32), "bf16")
            q, s = kd.quantize(x)                       # 1x128 blocks, e4m3fn codes + scales

    `target` is the data socket (default $KERNELD_SOCKET, else /run/kerneld/kerneld.sock). The
    session's op calls go through a submit ring unless ring=False. Failing calls raise the
    KerneldError subclass of the daemon's code (kerneld.InvalidArgument...). Thread-safe for
    ops and buffers; close() must not overlap other calls. A client belongs to the process that
    made it (a forked child opens its own)."""

    def __init__(self, target: Optional[str] = None, *, name: Optional[str] = None,
                 lease_seconds: int = 0, ring: bool = True, ring_slots: int = 8,
                 ring_slot_bytes: int = 64 << 10, ring_spin_us: int = 100,
                 connect_timeout: float = 5.0, control_timeout: float = 10.0,
                 op_timeout: float = 60.0, unlink_after_register: bool = True,
                 shm_mode: int = 0o600, shm_group: int = -1, host_pool_bytes: int = 1 << 30,
                 device_map: Optional[Dict[int, int]] = None):
        self._binding = _lib.binding()
        self._lib = self._binding.lib
        self._handle = None
        self._pid = os.getpid()
        self._shm_mode, self._shm_group = shm_mode, shm_group
        self._close_lock = threading.Lock()
        self._cuda = None
        self._device_map = device_map if device_map is not None else _device_map_from_env()
        if target is None:
            target = os.environ.get("KERNELD_SOCKET", "")
        options = _lib.ClientOptions()
        self._lib.kd_client_options_init(ctypes.byref(options))
        options.connect_timeout_ms = int(connect_timeout * 1000)
        options.control_timeout_ms = int(control_timeout * 1000)
        options.op_timeout_ms = int(op_timeout * 1000)
        options.unlink_after_register = 1 if unlink_after_register else 0
        handle = ctypes.c_void_p()
        self._check(self._lib.kd_connect(target.encode(), ctypes.byref(options),
                                         ctypes.byref(handle)))
        self._handle = handle
        try:
            client_name = name if name is not None else f"python-{os.getpid()}"
            self._check(self._lib.kd_session_open(self._handle, client_name.encode(),
                                                  lease_seconds))
            if ring:
                ro = _lib.RingOptions()
                self._lib.kd_ring_options_init(ctypes.byref(ro))
                ro.slots, ro.slot_bytes, ro.spin_us = ring_slots, ring_slot_bytes, ring_spin_us
                self._check(self._lib.kd_submit_ring_attach(self._handle, ctypes.byref(ro)))
        except BaseException:
            self._lib.kd_close(self._handle)
            self._handle = None
            raise
        self.host = HostMemory(self, host_pool_bytes)

    # ----- errors ------------------------------------------------------------------------------

    def _raise(self, code: int, message: Optional[bytes] = None):
        if message is None:
            message = self._lib.kd_last_error()
        raise errors.from_code(code, (message or b"").decode("utf-8", "replace"))

    def _check(self, code: int) -> None:
        if code != 0:
            self._raise(code)

    # ----- connection and session --------------------------------------------------------------

    def close(self) -> None:
        """Ends the session (the daemon releases every buffer it held) and the connection."""
        with self._close_lock:
            if self._handle is None:
                return
            if self._cuda is not None:
                self._cuda.close()
            self.host.close()
            if os.getpid() == self._pid:
                self._lib.kd_close(self._handle)
            self._handle = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _h(self):
        if self._handle is None:
            raise errors.FailedPrecondition("the kerneld client is closed")
        return self._handle

    @property
    def target(self) -> str:
        return self._lib.kd_client_target(self._h()).decode()

    @property
    def session_id(self) -> str:
        return self._lib.kd_session_id(self._h()).decode()

    @property
    def backend(self) -> str:
        """The daemon's default backend: "cpu" or "cuda"."""
        return self._lib.kd_session_backend(self._h()).decode()

    @property
    def lease_seconds(self) -> int:
        return self._lib.kd_session_lease_seconds(self._h())

    def session_status(self) -> None:
        """Returns while the session is open; raises NotFound once the daemon ended it,
        Unavailable once the daemon went away."""
        self._check(self._lib.kd_session_status(self._h()))

    @property
    def has_ring(self) -> bool:
        return bool(self._lib.kd_submit_ring_info(self._h(), None, None))

    def ring_counts(self) -> Tuple[int, int]:
        """(calls answered through the submit ring, calls that fell back to gRPC)."""
        calls, fallbacks = ctypes.c_uint64(), ctypes.c_uint64()
        self._lib.kd_submit_ring_info(self._h(), ctypes.byref(calls), ctypes.byref(fallbacks))
        return calls.value, fallbacks.value

    # ----- host memory -------------------------------------------------------------------------

    def empty(self, shape: Union[int, Sequence[int]], dtype: Any = DType.F32) -> ShmArray:
        """An uninitialised array in registered shm. `dtype` is a kerneld dtype (or a numpy
        one): bf16 arrays hold uint16 bit patterns, FP8 and e8m0 ones uint8 codes."""
        kd = dt.dtype(dtype)
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        root = self.host.alloc(count * dt.ITEMSIZE[kd])
        array = root.view(dt.NUMPY_STORAGE[kd]).reshape(shape).view(ShmArray)
        array.kd_dtype = kd
        return array

    def zeros(self, shape: Union[int, Sequence[int]], dtype: Any = DType.F32) -> ShmArray:
        array = self.empty(shape, dtype)
        array.view(np.uint8)[...] = 0
        return array

    def asarray(self, values: Any, dtype: Any = None) -> ShmArray:
        """A copy of `values` in registered shm; float values given for a bf16 array are rounded
        to bf16 (nearest even)."""
        values = np.asarray(values)
        kd = dt.dtype(dtype if dtype is not None else values.dtype)
        array = self.empty(values.shape, kd)
        if kd == DType.BF16 and values.dtype != np.uint16:
            array[...] = dt.to_bf16(values.astype(np.float32))
        else:
            array[...] = values.astype(dt.NUMPY_STORAGE[kd], copy=False)
        return array

    def allocate(self, nbytes: int, backend: Optional[str] = None, device: int = 0) -> DaemonBuffer:
        """nbytes from the daemon's own pool. Host memory comes back mapped (`.array`, uint8),
        device memory as an IPC handle. Release it with release()."""
        if backend in (None, "", "cpu") and (backend == "cpu" or self.backend == "cpu"):
            shm = ctypes.c_void_p()
            self._check(self._lib.kd_allocate_shm(self._h(), nbytes,
                                                  (backend or "").encode(), device,
                                                  ctypes.byref(shm)))
            ptr = self._lib.kd_shm_data(shm)
            size = self._lib.kd_shm_size(shm)
            buffer_id = self._lib.kd_shm_buffer_id(shm)
            array = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))
            self.host.register_external(ptr, ptr + size, buffer_id)
            return DaemonBuffer(buffer_id, size, array=array, shm=shm.value)
        out = _lib.Allocation()
        self._check(self._lib.kd_allocate(self._h(), nbytes, (backend or "").encode(), device,
                                          ctypes.byref(out)))
        return DaemonBuffer(out.buffer_id, out.size, ipc_handle=bytes(out.ipc_handle),
                            ipc_offset=out.ipc_offset, device=out.device)

    def release(self, buffer: Union[int, DaemonBuffer]) -> None:
        """Releases a buffer of the session: a DaemonBuffer (its host mapping goes too, so drop
        its array first) or a raw buffer id. NotFound if the session holds no such buffer."""
        if isinstance(buffer, DaemonBuffer):
            self._check(self._lib.kd_release(self._h(), buffer.buffer_id))
            if buffer._shm is not None:
                self.host.forget_external(buffer.array.ctypes.data)
                buffer.array = None
                self._lib.kd_shm_destroy(ctypes.c_void_p(buffer._shm))
                buffer._shm = None
            return
        self._check(self._lib.kd_release(self._h(), int(buffer)))

    def register_ipc(self, handle: bytes, size: int, *, offset: int = 0, device: int = 0,
                     kind: Union[dt.IpcKind, int] = dt.IpcKind.CUDA) -> int:
        """Registers GPU memory by its IPC handle (64 bytes of cudaIpcMemHandle_t) plus the
        offset of the buffer inside the exporter's allocation; returns the buffer id. Torch
        CUDA tensors need none of this: ops register their allocations themselves."""
        if len(handle) != _lib.IPC_HANDLE_BYTES:
            raise errors.InvalidArgument(f"handle has {len(handle)} bytes, not "
                                         f"{_lib.IPC_HANDLE_BYTES}")
        buffer_id = ctypes.c_uint64()
        self._check(self._lib.kd_register_ipc(self._h(), int(kind), bytes(handle), offset, size,
                                              device, ctypes.byref(buffer_id)))
        return buffer_id.value

    # ----- tensor references -------------------------------------------------------------------

    def cuda_registry(self):
        """The per-session cache of registered CUDA allocations (kerneld.cuda)."""
        if self._cuda is None:
            from .cuda import CudaRegistry
            with self._close_lock:
                if self._cuda is None:
                    self._cuda = CudaRegistry(self, self._device_map)
        return self._cuda

    def fill_tensor(self, out: _lib.Tensor, obj: Any, field: str = "tensor") -> None:
        """Writes the wire reference of `obj` into the ctypes kd_tensor `out`. None leaves it
        absent (rank 0). A tensor's dtype is its own (torch's float8 dtypes included), a
        ShmArray's its kd_dtype, a plain numpy array's from its numpy dtype (uint16 is bf16,
        uint8 u8); typed(x, dtype) says otherwise."""
        if obj is None:
            out.rank = 0
            return
        kd = None
        if isinstance(obj, Typed):
            kd, obj = dt.dtype(obj.dtype), obj.value
        if isinstance(obj, TensorRef):
            _set_ref(out, obj.buffer_id, obj.byte_offset, dt.dtype(obj.dtype), obj.shape,
                     obj.strides, field)
            return
        if _is_torch(obj):
            ptr = obj.data_ptr()
            shape = tuple(obj.shape)
            strides = tuple(obj.stride())
            itemsize = obj.element_size()
            if kd is None:
                kd = dt.from_torch_dtype(obj.dtype)
            if obj.is_cuda:
                nbytes = _extent(shape, strides, itemsize, field)
                buffer_id, offset = self.cuda_registry().locate(ptr, nbytes, obj.device.index)
                _set_ref(out, buffer_id, offset, kd, shape, _strides_or_none(shape, strides),
                         field)
                return
        elif isinstance(obj, np.ndarray):
            ptr = obj.__array_interface__["data"][0]
            shape = obj.shape
            itemsize = obj.itemsize
            if any(s % itemsize for s in obj.strides):
                raise errors.InvalidArgument(f"{field}: strides {obj.strides} are not multiples "
                                             f"of the element size {itemsize}")
            strides = tuple(s // itemsize for s in obj.strides)
            if kd is None:
                tag = getattr(obj, "kd_dtype", None)
                if tag is not None and dt.ITEMSIZE[tag] == itemsize and obj.dtype.kind in "uif":
                    kd = tag
                else:
                    kd = dt.from_numpy_dtype(obj.dtype)
        else:
            raise TypeError(f"{field}: {type(obj).__name__} is not a numpy array, torch tensor, "
                            "TensorRef or typed(...)")
        if dt.ITEMSIZE[kd] != itemsize:
            raise errors.InvalidArgument(f"{field}: a {kd.name} tensor needs {dt.ITEMSIZE[kd]}-"
                                         f"byte elements, this one has {itemsize}")
        if any(s < 0 for s in strides):
            raise errors.InvalidArgument(f"{field}: negative strides {strides}; pass a "
                                         "contiguous copy")
        nbytes = _extent(shape, strides, itemsize, field)
        where = self.host.locate(ptr, nbytes)
        if where is None:
            raise errors.InvalidArgument(
                f"{field}: its memory (0x{ptr:x}, {nbytes} bytes) is not in a buffer registered "
                "with this session; make it with Client.empty()/asarray() (or torch.from_numpy "
                "of one)")
        _set_ref(out, where[0], where[1], kd, shape, _strides_or_none(shape, strides), field)

    def tensor_ref(self, obj: Any, dtype: Any = None) -> TensorRef:
        """What the daemon is told about `obj`: its buffer id, offset, dtype, shape, strides."""
        t = _lib.Tensor()
        self.fill_tensor(t, Typed(obj, dtype) if dtype is not None else obj)
        strides = list(t.strides[:t.rank]) if any(t.strides[:t.rank]) else None
        return TensorRef(t.buffer_id, DType(t.dtype), list(t.shape[:t.rank]), t.byte_offset,
                         strides)

    # ----- ops ---------------------------------------------------------------------------------

    def _c_completion(self, completion: Optional[Completion]):
        if completion is None:
            return None
        if isinstance(completion, _lib.Completion):
            return ctypes.byref(completion)
        if completion._c is None:
            c = _lib.Completion()
            c.mode = int(CompletionMode.parse(completion.mode))
            for name in ("wait_event", "signal_event"):
                value = getattr(completion, name)
                if value:
                    if len(value) > _lib.IPC_HANDLE_BYTES:
                        raise errors.InvalidArgument(f"completion.{name} has {len(value)} bytes")
                    setattr(c, name + "_size", len(value))
                    ctypes.memmove(getattr(c, name), value, len(value))
            completion._c = c
        return ctypes.byref(completion._c)

    def to_c_op(self, op: Any, out: Optional[Any] = None, prefix: str = ""):
        """The ctypes kd_op of an op value (an instance of a kerneld.OPS class), field by field
        as the op table declares them."""
        spec = getattr(type(op), "spec", None)
        if spec is None or OPS.get(spec.name) is not type(op):
            names = ", ".join(cls.__name__ for cls in OPS.values())
            raise TypeError(f"{type(op).__name__} is not an op ({names})")
        c = out if out is not None else self._binding.Op()
        c.kind = spec.kind
        s = getattr(c.u, spec.name)
        where = f"{prefix}{spec.name}."
        for f in spec.fields:
            value = getattr(op, f.name)
            if f.kind == "tensor":
                self.fill_tensor(getattr(s, f.name), value, where + f.name)
            elif f.kind == "enum":
                try:
                    setattr(s, f.name, int(self._binding.enums[f.enum].parse(value)))
                except ValueError as e:
                    raise errors.InvalidArgument(f"{where}{f.name}: {e}") from None
            elif f.kind == "flag":
                setattr(s, f.name, 1 if value else 0)
            elif f.kind == "int":
                setattr(s, f.name, int(value))
            else:
                setattr(s, f.name, float(value))
        return c

    def submit(self, ops: Iterable[Any], completion: Optional[Completion] = None) -> float:
        """Runs a batch in order (every op validated before the first runs) and returns the
        device seconds when the daemon knows them (SYNC), else 0. `ops` holds op values
        (kerneld.Quantize(...), ...), or is a ctypes array of kd_op built with to_c_op()."""
        if isinstance(ops, ctypes.Array):
            array, count = ops, len(ops)
        else:
            ops = list(ops)
            count = len(ops)
            array = self._binding.op_array(count)
            for i, op in enumerate(ops):
                self.to_c_op(op, array[i], f"ops[{i}].")
        seconds = ctypes.c_double()
        self._check(self._lib.kd_submit(self._h(), array, count, self._c_completion(completion),
                                        ctypes.byref(seconds)))
        return seconds.value

    def run(self, op: Any, completion: Optional[Completion] = None) -> float:
        """One op, as a batch of one."""
        return self.submit([op], completion)

    def quantize(self, input: Any, output: Any = None, scales: Any = None, *,
                 granularity: Any = "1x128", out_dtype: Any = "e4m3fn",
                 transpose_output: bool = False, dual: bool = False, output_t: Any = None,
                 scales_t: Any = None, scale_format: Any = "unspecified",
                 scale_layout: Any = "unspecified", eps: float = 0.0,
                 mx_rounding: Any = "unspecified", group_ends: Any = None,
                 completion: Optional[Completion] = None):
        """Quantizes `input` (R,C) and returns (output, scales), plus (output_t, scales_t) with
        dual=True (the fused pass of X and Xᵀ: 1x128 or 128x128). Outputs not given are allocated in shm
        with the shapes kerneld.proto gives for the granularity (host backends only)."""
        g = dt.granularity(granularity)
        kd_out = dt.dtype(out_dtype)
        layout = dt.ScaleLayout.parse(scale_layout)
        rows, cols = (input.value if isinstance(input, Typed) else input).shape
        if transpose_output:
            rows, cols = cols, rows
        if output is None:
            output = self.empty((rows, cols), kd_out)
        if scales is None:
            ge = group_ends.value if isinstance(group_ends, Typed) else group_ends
            groups = len(ge) if ge is not None else 0
            scales = self.empty(shapes.quantize_scales(g, rows, cols, layout, groups),
                                shapes.scales_dtype(g))
        if dual:
            if output_t is None:
                output_t = self.empty((cols, rows), kd_out)
            if scales_t is None:
                scales_t = self.empty(shapes.dual_scales_t(g, rows, cols, layout), DType.F32)
        op = Quantize(input=input, output=_typed(output, kd_out), scales=scales, granularity=g,
                      transpose_output=transpose_output, scale_format=scale_format,
                      scale_layout=scale_layout, eps=eps, mx_rounding=mx_rounding,
                      output_t=_typed(output_t, kd_out), scales_t=scales_t,
                      group_ends=group_ends)
        self.run(op, completion)
        if dual:
            return output, scales, output_t, scales_t
        return output, scales

    def gemm(self, variant: Any, a: Any, a_scales: Any, b: Any, b_scales: Any, d: Any = None,
             *, accumulate: bool = False, group_ends: Any = None, out_dtype: Any = "bf16",
             completion: Optional[Completion] = None):
        """Blockwise FP8 GEMM (kerneld.proto's GemmVariant for the shapes); returns d, allocated
        in shm when not given."""
        v = dt.gemm_variant(variant)
        if d is None:
            ash = (a.value if isinstance(a, Typed) else a).shape
            bsh = (b.value if isinstance(b, Typed) else b).shape
            ge = group_ends.value if isinstance(group_ends, Typed) else group_ends
            shape = shapes.gemm_output(v, ash, bsh, len(ge) if ge is not None else 0)
            d = self.zeros(shape, out_dtype)
        self.run(Gemm(variant=v, a=a, a_scales=a_scales, b=b, b_scales=b_scales, d=d,
                      accumulate=accumulate, group_ends=group_ends), completion)
        return d

    def pad(self, input: Any, group_ends: Any, alignment: int = 128, output: Any = None,
            padded_group_ends: Any = None, completion: Optional[Completion] = None):
        """Per-group token padding; returns (output, padded_group_ends), allocated in shm when
        not given (output rows: input rows + groups * (alignment - 1))."""
        src = input.value if isinstance(input, Typed) else input
        ge = group_ends.value if isinstance(group_ends, Typed) else group_ends
        if output is None:
            kd = dt.dtype(getattr(src, "kd_dtype", None) or src.dtype)
            output = self.empty((shapes.pad_rows(src.shape[0], len(ge), alignment), src.shape[1]),
                                kd)
        if padded_group_ends is None:
            padded_group_ends = self.empty((len(ge),), DType.I32)
        self.run(Pad(input=input, group_ends=group_ends, output=output,
                     padded_group_ends=padded_group_ends, alignment=alignment), completion)
        return output, padded_group_ends

    def unpad(self, input: Any, group_ends: Any, rows: int, alignment: int = 128,
              output: Any = None, completion: Optional[Completion] = None):
        """The reverse of pad(): returns output (rows, H)."""
        src = input.value if isinstance(input, Typed) else input
        if output is None:
            kd = dt.dtype(getattr(src, "kd_dtype", None) or src.dtype)
            output = self.empty((rows, src.shape[1]), kd)
        self.run(Unpad(input=input, group_ends=group_ends, output=output, alignment=alignment),
                 completion)
        return output


def _typed(x: Any, kd: Optional[DType] = None) -> Any:
    if x is None or isinstance(x, (Typed, TensorRef)) or kd is None:
        return x
    tag = getattr(x, "kd_dtype", None)
    if tag is not None and tag != DType.U8:
        return x
    if isinstance(x, np.ndarray) and x.dtype == np.uint8:
        return Typed(x, kd)
    return x


def _extent(shape, strides, itemsize: int, field: str) -> int:
    if any(s == 0 for s in shape):
        return 0
    return (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * itemsize


def _strides_or_none(shape, strides):
    expected, acc = [], 1
    for n in reversed(shape):
        expected.append(acc)
        acc *= n
    expected.reverse()
    for n, s, e in zip(shape, strides, expected):
        if n != 1 and s != e:
            return strides
    return None


def _set_ref(out: _lib.Tensor, buffer_id: int, offset: int, kd: DType, shape, strides,
             field: str) -> None:
    rank = len(shape)
    if rank < 1 or rank > _lib.MAX_RANK:
        raise errors.InvalidArgument(f"{field}: rank {rank} must be in 1..{_lib.MAX_RANK}")
    out.buffer_id = buffer_id
    out.byte_offset = offset
    out.dtype = int(kd)
    out.rank = rank
    for i in range(rank):
        out.shape[i] = int(shape[i])
        out.strides[i] = int(strides[i]) if strides is not None else 0
    for i in range(rank, _lib.MAX_RANK):
        out.shape[i] = 0
        out.strides[i] = 0


def _device_map_from_env() -> Optional[Dict[int, int]]:
    """$KERNELD_DEVICE_MAP="0:2,1:3": this process's CUDA device 0 is the daemon's 2, ..."""
    text = os.environ.get("KERNELD_DEVICE_MAP")
    if not text:
        return None
    mapping = {}
    for pair in text.split(","):
        mine, theirs = pair.split(":")
        mapping[int(mine)] = int(theirs)
    return mapping


def connect(target: Optional[str] = None, **kwargs) -> Client:
    """Client(target, **kwargs): a connection with an open session (and a submit ring)."""
    return Client(target, **kwargs)
