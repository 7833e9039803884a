"""The one binding layer over kerneld's C ABI (include/kerneld/c/kerneld.h): the loader of
libkerneld_c.so, and the Python declarations of its ops and enums, built from the op table the
library exports (kd_enum_value_at, kd_op_info_at: include/kerneld/op_table.h). Nothing above this
module knows a ctypes field or an enum's number: it builds ops by name (kerneld.ops) and passes
enums by member or label (kerneld.dtypes).

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
import enum
import os
import sys
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

# The C ABI major version this binding speaks: (major << 16) | minor from kd_api_version().
API_VERSION_MAJOR = 2
IPC_HANDLE_BYTES = 64
MAX_RANK = 4
_LIB_NAMES = ("libkerneld_c.so", "libkerneld_c.so.2")


class Tensor(ctypes.Structure):
    _fields_ = [
        ("buffer_id", ctypes.c_uint64),
        ("byte_offset", ctypes.c_uint64),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
    ]


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


class _EnumValueInfo(ctypes.Structure):
    _fields_ = [("enum_name", ctypes.c_char_p), ("name", ctypes.c_char_p),
                ("label", ctypes.c_char_p), ("value", ctypes.c_int32), ("bytes", ctypes.c_uint32)]


class _FieldInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_char_p), ("output", ctypes.c_int32),
                ("required", ctypes.c_int32), ("offset", ctypes.c_uint32),
                ("enum_name", ctypes.c_char_p)]


class _OpInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_char_p), ("kind", ctypes.c_int32),
                ("size", ctypes.c_uint32), ("field_count", ctypes.c_uint32),
                ("fields", ctypes.POINTER(_FieldInfo))]


# The hand-declared structs, checked against the library's sizeof.
_STRUCTS = {
    "kd_tensor": Tensor,
    "kd_completion": Completion,
    "kd_allocation": Allocation,
    "kd_client_options": ClientOptions,
    "kd_ring_options": RingOptions,
}

# How each field kind of the op table is stored in the C structs.
_FIELD_CTYPES = {"tensor": Tensor, "enum": ctypes.c_int32, "flag": ctypes.c_int32,
                 "int": ctypes.c_int32, "float": ctypes.c_float}


@dataclass(frozen=True)
class FieldSpec:
    """One field of an op, as the table declares it."""
    name: str
    kind: str  # "tensor", "enum", "flag", "int", "float"
    output: bool  # tensors: the op writes it
    required: bool  # tensors: it must be present
    enum: Optional[str]  # kind "enum": the enum's name in the table


@dataclass(frozen=True)
class OpSpec:
    """One op of the table: its name ("quantize"), type name ("Quantize"), kind (its number in
    the C ABI's kd_op), fields in order, and its ctypes struct."""
    name: str
    type: str
    kind: int
    fields: Tuple[FieldSpec, ...]
    struct: type


class Binding:
    """The loaded library and the declarations built from its table."""

    def __init__(self, lib: ctypes.CDLL, path: str):
        self.lib = lib
        self.path = path
        self.enums: Dict[str, type] = {}
        self.ops: Dict[str, OpSpec] = {}
        self._read_enums()
        self._read_ops()
        self.Op = self._op_struct()
        self._bind()

    # ----- the table ------------------------------------------------------------------------

    def _read_enums(self) -> None:
        at = self.lib.kd_enum_value_at
        at.restype, at.argtypes = ctypes.POINTER(_EnumValueInfo), [ctypes.c_uint32]
        rows: Dict[str, List[Tuple[str, str, int, int]]] = {}
        i = 0
        while True:
            p = at(i)
            if not p:
                break
            v = p.contents
            rows.setdefault(v.enum_name.decode(), []).append(
                (v.name.decode(), v.label.decode(), v.value, v.bytes))
            i += 1
        for enum_name, values in rows.items():
            self.enums[enum_name] = _make_enum(enum_name, values)

    def _read_ops(self) -> None:
        at = self.lib.kd_op_info_at
        at.restype, at.argtypes = ctypes.POINTER(_OpInfo), [ctypes.c_uint32]
        i = 0
        while True:
            p = at(i)
            if not p:
                break
            info = p.contents
            fields, ctype_fields, offsets = [], [], []
            for j in range(info.field_count):
                f = info.fields[j]
                kind = f.kind.decode()
                spec = FieldSpec(f.name.decode(), kind, bool(f.output), bool(f.required),
                                 f.enum_name.decode() or None)
                fields.append(spec)
                ctype_fields.append((spec.name, _FIELD_CTYPES[kind]))
                offsets.append(f.offset)
            name = info.name.decode()
            struct = type(f"kd_{name}_op", (ctypes.Structure,), {"_fields_": ctype_fields})
            if ctypes.sizeof(struct) != info.size:
                raise ImportError(f"{self.path}: kd_{name}_op is {info.size} bytes in the "
                                  f"library, {ctypes.sizeof(struct)} as declared from its table")
            for (fname, _), offset in zip(ctype_fields, offsets):
                if getattr(struct, fname).offset != offset:
                    raise ImportError(f"{self.path}: kd_{name}_op.{fname} is at {offset} in the "
                                      "library, elsewhere as declared from its table")
            self.ops[name] = OpSpec(name, info.type.decode(), info.kind, tuple(fields), struct)
            i += 1

    def _op_struct(self) -> type:
        union = type("kd_op_union", (ctypes.Union,),
                     {"_fields_": [(spec.name, spec.struct) for spec in self.ops.values()]})
        return type("kd_op", (ctypes.Structure,), {
            "_fields_": [("kind", ctypes.c_int32), ("reserved", ctypes.c_int32), ("u", union)]})

    # ----- functions --------------------------------------------------------------------------

    def _bind(self) -> None:
        c_client_p, c_shm_p = ctypes.c_void_p, ctypes.c_void_p
        u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
        dblp = ctypes.POINTER(ctypes.c_double)
        prototypes = {
            "kd_api_version": (ctypes.c_uint32, []),
            "kd_version_string": (ctypes.c_char_p, []),
            "kd_last_error": (ctypes.c_char_p, []),
            "kd_last_error_code": (ctypes.c_int, []),
            "kd_status_code_name": (ctypes.c_char_p, [ctypes.c_int]),
            "kd_sizeof": (ctypes.c_uint32, [ctypes.c_char_p]),
            "kd_client_options_init": (None, [ctypes.POINTER(ClientOptions)]),
            "kd_connect": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ClientOptions),
                                          ctypes.POINTER(c_client_p)]),
            "kd_close": (None, [c_client_p]),
            "kd_client_target": (ctypes.c_char_p, [c_client_p]),
            "kd_session_open": (ctypes.c_int, [c_client_p, ctypes.c_char_p, ctypes.c_uint32]),
            "kd_session_close": (ctypes.c_int, [c_client_p, u32p]),
            "kd_session_status": (ctypes.c_int, [c_client_p]),
            "kd_session_id": (ctypes.c_char_p, [c_client_p]),
            "kd_session_backend": (ctypes.c_char_p, [c_client_p]),
            "kd_session_lease_seconds": (ctypes.c_uint32, [c_client_p]),
            "kd_ring_options_init": (None, [ctypes.POINTER(RingOptions)]),
            "kd_submit_ring_attach": (ctypes.c_int, [c_client_p, ctypes.POINTER(RingOptions)]),
            "kd_submit_ring_info": (ctypes.c_int, [c_client_p, u64p, u64p]),
            "kd_shm_create": (ctypes.c_int, [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int64,
                                             ctypes.POINTER(c_shm_p)]),
            "kd_shm_destroy": (None, [c_shm_p]),
            "kd_shm_data": (ctypes.c_void_p, [c_shm_p]),
            "kd_shm_size": (ctypes.c_uint64, [c_shm_p]),
            "kd_shm_name": (ctypes.c_char_p, [c_shm_p]),
            "kd_shm_buffer_id": (ctypes.c_uint64, [c_shm_p]),
            "kd_register_shm": (ctypes.c_int, [c_client_p, c_shm_p, u64p]),
            "kd_register_ipc": (ctypes.c_int, [c_client_p, ctypes.c_int32, ctypes.c_char_p,
                                               ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32,
                                               u64p]),
            "kd_allocate": (ctypes.c_int, [c_client_p, ctypes.c_uint64, ctypes.c_char_p,
                                           ctypes.c_int32, ctypes.POINTER(Allocation)]),
            "kd_allocate_shm": (ctypes.c_int, [c_client_p, ctypes.c_uint64, ctypes.c_char_p,
                                               ctypes.c_int32, ctypes.POINTER(c_shm_p)]),
            "kd_release": (ctypes.c_int, [c_client_p, ctypes.c_uint64]),
            "kd_release_shm": (ctypes.c_int, [c_client_p, c_shm_p]),
            "kd_submit": (ctypes.c_int, [c_client_p, ctypes.POINTER(self.Op), ctypes.c_size_t,
                                         ctypes.POINTER(Completion), dblp]),
        }
        for name, (restype, argtypes) in prototypes.items():
            fn = getattr(self.lib, name)
            fn.restype = restype
            fn.argtypes = argtypes

    def check(self) -> None:
        """ImportError unless the library speaks this binding's C ABI major version and its
        hand-declared structs have the library's sizes."""
        version = self.lib.kd_api_version()
        major, minor = version >> 16, version & 0xFFFF
        if major != API_VERSION_MAJOR:
            raise ImportError(f"{self.path} implements kerneld C API {major}.{minor}; this "
                              f"package speaks {API_VERSION_MAJOR}.x")
        for name, struct in _STRUCTS.items():
            size = self.lib.kd_sizeof(name.encode())
            if size != ctypes.sizeof(struct):
                raise ImportError(f"{self.path}: sizeof({name}) is {size} in the library but "
                                  f"{ctypes.sizeof(struct)} in this package's declaration")
        size = self.lib.kd_sizeof(b"kd_op")
        if size != ctypes.sizeof(self.Op):
            raise ImportError(f"{self.path}: sizeof(kd_op) is {size} in the library but "
                              f"{ctypes.sizeof(self.Op)} as built from its table")

    def op_array(self, count: int):
        """An uninitialised ctypes array of `count` kd_op (at least one element)."""
        return (self.Op * max(count, 1))()


class KerneldEnum(enum.IntEnum):
    """A wire enum of the op table. Members carry the table's `label` ("1x128"); parse() takes
    a member, its name or label (any case), or its number."""

    label: str

    @classmethod
    def parse(cls, value):
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.lower()
            for member in cls:
                if member.label == key or member.name.lower() == key:
                    return member
            raise ValueError(f"{value!r} is not a {cls.__name__} (one of "
                             f"{', '.join(m.label for m in cls if m.value)})")
        if isinstance(value, enum.Enum):
            raise ValueError(f"{value!r} is not a {cls.__name__}")
        return cls(int(value))


def _python_name(name: str) -> str:
    # A member name cannot start with a digit: QuantGranularity's 1X128 is G1X128.
    return "G" + name if name[0].isdigit() else name


def _make_enum(enum_name: str, values: List[Tuple[str, str, int, int]]) -> type:
    members = [("UNSPECIFIED", 0)] + [(_python_name(n), v) for n, _, v, _ in values]
    cls = KerneldEnum(enum_name, members, module=__name__.rsplit(".", 1)[0] + ".dtypes")
    labels = {0: "unspecified"}
    labels.update({v: label for _, label, v, _ in values})
    sizes = {v: size for _, _, v, size in values}
    for member in cls:
        member.label = labels[member.value]
        member.itemsize = sizes.get(member.value, 0)
    return cls


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
_binding: Optional[Binding] = None


def _open(path: str) -> Binding:
    binding = Binding(ctypes.CDLL(path), path)
    binding.check()
    return binding


def binding() -> Binding:
    """The process's binding (the library loaded once). ImportError naming every place tried."""
    global _binding
    with _lock:
        if _binding is not None:
            return _binding
        tried = []
        for path in candidate_paths():
            if not os.path.exists(path):
                tried.append(f"{path} (absent)")
                continue
            try:
                _binding = _open(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            return _binding
        for name in _LIB_NAMES:
            try:
                _binding = _open(name)
            except OSError as e:
                tried.append(f"{name} via the dynamic loader ({e})")
                continue
            return _binding
        raise ImportError("libkerneld_c.so not found; set KERNELD_LIB to its path. Tried:\n  " +
                          "\n  ".join(tried))


def load() -> ctypes.CDLL:
    """The loaded library."""
    return binding().lib


def path() -> Optional[str]:
    """The path the library was loaded from (None before it was loaded)."""
    return _binding.path if _binding is not None else None
