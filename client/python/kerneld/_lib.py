"""ctypes declarations of kerneld's C ABI (include/kerneld/c/kerneld.h) and the loader of
libkerneld_c.so.

Where the library is looked for, in order:
  1. $KERNELD_LIB: the library file itself, or a directory holding libkerneld_c.so;
  2. this package's directory (a copy installed next to __init__.py);
  3. the build tree: <repo>/build/client/c/ when the package is imported from its source folder
     (client/python/kerneld), then build/client/c/ under the current directory;
  4. install prefixes: <sys.prefix>/lib, /usr/local/lib, then the dynamic loader's own search
     (LD_LIBRARY_PATH, ld.so.cache).
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import List, Optional

# The header version this binding was written against: (major << 16) | minor.
API_VERSION_MAJOR = 1
API_VERSION_MINOR = 0
IPC_HANDLE_BYTES = 64
MAX_RANK = 4
_LIB_NAMES = ("libkerneld_c.so", "libkerneld_c.so.1")


class Tensor(ctypes.Structure):
    _fields_ = [
        ("buffer_id", ctypes.c_uint64),
        ("byte_offset", ctypes.c_uint64),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
    ]


class QuantizeOp(ctypes.Structure):
    _fields_ = [
        ("input", Tensor),
        ("output", Tensor),
        ("scales", Tensor),
        ("granularity", ctypes.c_int32),
        ("transpose_output", ctypes.c_int32),
        ("scale_format", ctypes.c_int32),
        ("scale_layout", ctypes.c_int32),
        ("eps", ctypes.c_float),
        ("mx_rounding", ctypes.c_int32),
        ("output_t", Tensor),
        ("scales_t", Tensor),
        ("group_ends", Tensor),
    ]


class GemmOp(ctypes.Structure):
    _fields_ = [
        ("variant", ctypes.c_int32),
        ("accumulate", ctypes.c_int32),
        ("a", Tensor),
        ("a_scales", Tensor),
        ("b", Tensor),
        ("b_scales", Tensor),
        ("d", Tensor),
        ("group_ends", Tensor),
    ]


class PadOp(ctypes.Structure):
    _fields_ = [
        ("input", Tensor),
        ("group_ends", Tensor),
        ("output", Tensor),
        ("padded_group_ends", Tensor),
        ("alignment", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


class UnpadOp(ctypes.Structure):
    _fields_ = [
        ("input", Tensor),
        ("group_ends", Tensor),
        ("output", Tensor),
        ("alignment", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


class OpUnion(ctypes.Union):
    _fields_ = [("quantize", QuantizeOp), ("gemm", GemmOp), ("pad", PadOp), ("unpad", UnpadOp)]


class Op(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("reserved", ctypes.c_int32), ("u", OpUnion)]


class Completion(ctypes.Structure):
    _fields_ = [
        ("mode", ctypes.c_int32),
        ("wait_event_size", ctypes.c_uint32),
        ("signal_event_size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("wait_event", ctypes.c_uint8 * IPC_HANDLE_BYTES),
        ("signal_event", ctypes.c_uint8 * IPC_HANDLE_BYTES),
    ]


class ClientOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("connect_timeout_ms", ctypes.c_uint32),
        ("control_timeout_ms", ctypes.c_uint32),
        ("op_timeout_ms", ctypes.c_uint32),
        ("unlink_after_register", ctypes.c_int32),
        ("channel_tag", ctypes.c_int32),
    ]


class RingOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("slots", ctypes.c_uint32),
        ("slot_bytes", ctypes.c_uint32),
        ("spin_us", ctypes.c_uint32),
    ]


class Allocation(ctypes.Structure):
    _fields_ = [
        ("buffer_id", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("shm_name", ctypes.c_char * 256),
        ("ipc_kind", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("ipc_offset", ctypes.c_uint64),
        ("ipc_handle", ctypes.c_uint8 * IPC_HANDLE_BYTES),
    ]


_STRUCTS = {
    "kd_tensor": Tensor,
    "kd_quantize_op": QuantizeOp,
    "kd_gemm_op": GemmOp,
    "kd_pad_op": PadOp,
    "kd_unpad_op": UnpadOp,
    "kd_op": Op,
    "kd_completion": Completion,
    "kd_allocation": Allocation,
    "kd_client_options": ClientOptions,
    "kd_ring_options": RingOptions,
}

_c_client_p = ctypes.c_void_p
_c_shm_p = ctypes.c_void_p
_u64p = ctypes.POINTER(ctypes.c_uint64)
_u32p = ctypes.POINTER(ctypes.c_uint32)
_dblp = ctypes.POINTER(ctypes.c_double)

# name: (restype, argtypes)
_PROTOTYPES = {
    "kd_api_version": (ctypes.c_uint32, []),
    "kd_version_string": (ctypes.c_char_p, []),
    "kd_last_error": (ctypes.c_char_p, []),
    "kd_last_error_code": (ctypes.c_int, []),
    "kd_status_code_name": (ctypes.c_char_p, [ctypes.c_int]),
    "kd_sizeof": (ctypes.c_uint32, [ctypes.c_char_p]),
    "kd_client_options_init": (None, [ctypes.POINTER(ClientOptions)]),
    "kd_connect": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ClientOptions),
                                  ctypes.POINTER(_c_client_p)]),
    "kd_close": (None, [_c_client_p]),
    "kd_client_target": (ctypes.c_char_p, [_c_client_p]),
    "kd_session_open": (ctypes.c_int, [_c_client_p, ctypes.c_char_p, ctypes.c_uint32]),
    "kd_session_close": (ctypes.c_int, [_c_client_p, _u32p]),
    "kd_session_status": (ctypes.c_int, [_c_client_p]),
    "kd_session_id": (ctypes.c_char_p, [_c_client_p]),
    "kd_session_backend": (ctypes.c_char_p, [_c_client_p]),
    "kd_session_lease_seconds": (ctypes.c_uint32, [_c_client_p]),
    "kd_ring_options_init": (None, [ctypes.POINTER(RingOptions)]),
    "kd_submit_ring_attach": (ctypes.c_int, [_c_client_p, ctypes.POINTER(RingOptions)]),
    "kd_submit_ring_info": (ctypes.c_int, [_c_client_p, _u64p, _u64p]),
    "kd_shm_create": (ctypes.c_int, [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int64,
                                     ctypes.POINTER(_c_shm_p)]),
    "kd_shm_destroy": (None, [_c_shm_p]),
    "kd_shm_data": (ctypes.c_void_p, [_c_shm_p]),
    "kd_shm_size": (ctypes.c_uint64, [_c_shm_p]),
    "kd_shm_name": (ctypes.c_char_p, [_c_shm_p]),
    "kd_shm_buffer_id": (ctypes.c_uint64, [_c_shm_p]),
    "kd_register_shm": (ctypes.c_int, [_c_client_p, _c_shm_p, _u64p]),
    "kd_register_ipc": (ctypes.c_int, [_c_client_p, ctypes.c_int32, ctypes.c_char_p,
                                       ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, _u64p]),
    "kd_allocate": (ctypes.c_int, [_c_client_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int32,
                                   ctypes.POINTER(Allocation)]),
    "kd_allocate_shm": (ctypes.c_int, [_c_client_p, ctypes.c_uint64, ctypes.c_char_p,
                                       ctypes.c_int32, ctypes.POINTER(_c_shm_p)]),
    "kd_release": (ctypes.c_int, [_c_client_p, ctypes.c_uint64]),
    "kd_release_shm": (ctypes.c_int, [_c_client_p, _c_shm_p]),
    "kd_quantize": (ctypes.c_int, [_c_client_p, ctypes.POINTER(QuantizeOp),
                                   ctypes.POINTER(Completion), _dblp]),
    "kd_gemm": (ctypes.c_int, [_c_client_p, ctypes.POINTER(GemmOp), ctypes.POINTER(Completion),
                               _dblp]),
    "kd_pad": (ctypes.c_int, [_c_client_p, ctypes.POINTER(PadOp), ctypes.POINTER(Completion),
                              _dblp]),
    "kd_unpad": (ctypes.c_int, [_c_client_p, ctypes.POINTER(UnpadOp), ctypes.POINTER(Completion),
                                _dblp]),
    "kd_submit": (ctypes.c_int, [_c_client_p, ctypes.POINTER(Op), ctypes.c_size_t,
                                 ctypes.POINTER(Completion), _dblp]),
}


def candidate_paths() -> List[str]:
    """Where load() looks, in order (see the module docstring)."""
    paths: List[str] = []
    env = os.environ.get("KERNELD_LIB")
    if env:
        if os.path.isdir(env):
            paths += [os.path.join(env, n) for n in _LIB_NAMES]
        else:
            paths.append(env)
    here = os.path.dirname(os.path.abspath(__file__))
    paths += [os.path.join(here, n) for n in _LIB_NAMES]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    for root in (repo, os.getcwd()):
        paths += [os.path.join(root, "build", "client", "c", n) for n in _LIB_NAMES]
    for prefix in (sys.prefix, "/usr/local"):
        paths += [os.path.join(prefix, "lib", n) for n in _LIB_NAMES]
    return paths


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None


def _bind(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def _check(lib: ctypes.CDLL, path: str) -> None:
    version = lib.kd_api_version()
    major, minor = version >> 16, version & 0xFFFF
    if major != API_VERSION_MAJOR or minor < API_VERSION_MINOR:
        raise ImportError(
            f"{path} implements kerneld C API {major}.{minor}; this package needs "
            f"{API_VERSION_MAJOR}.x with x >= {API_VERSION_MINOR}")
    for name, struct in _STRUCTS.items():
        size = lib.kd_sizeof(name.encode())
        if size != ctypes.sizeof(struct):
            raise ImportError(f"{path}: sizeof({name}) is {size} in the library but "
                              f"{ctypes.sizeof(struct)} in this package's declaration")


def load() -> ctypes.CDLL:
    """The loaded library (loaded once per process). ImportError naming every place tried."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidate_paths():
            if not os.path.exists(path):
                tried.append(f"{path} (absent)")
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            _bind(lib)
            _check(lib, path)
            _lib, _lib_path = lib, path
            return lib
        for name in _LIB_NAMES:
            try:
                lib = ctypes.CDLL(name)
            except OSError as e:
                tried.append(f"{name} via the dynamic loader ({e})")
                continue
            _bind(lib)
            _check(lib, name)
            _lib, _lib_path = lib, name
            return lib
        raise ImportError("libkerneld_c.so not found; set KERNELD_LIB to its path. Tried:\n  " +
                          "\n  ".join(tried))


def path() -> Optional[str]:
    """The path the library was loaded from (None before load())."""
    return _lib_path
