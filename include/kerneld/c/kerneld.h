/* kerneld's C ABI: the data-plane client (libkerneld_c.so) for callers that are not C++: the
 * `kerneld` Python package (ctypes), and any Rust, Julia or Go binding.
 *
 *   kd_client* c = NULL;
 *   if (kd_connect("/run/kerneld/kerneld.sock", NULL, &c) != KD_OK) { puts(kd_last_error()); }
 *   kd_session_open(c, "trainer-rank0", 0);
 *   kd_shm* x = NULL;  kd_shm_create(bytes, 0600, -1, &x);  kd_register_shm(c, x, &x_id);
 *   kd_op ops[3] = {...};  kd_submit(c, ops, 3, NULL, NULL);   (NULL completion: SYNC)
 *   kd_close(c);                        (ends the session; the daemon releases its buffers)
 *
 * C99, plain C types only; every handle is opaque. The semantics of the calls are those of
 * proto/kerneld/v1/kerneld.proto, which documents every op field, layout and error; the
 * structs below mirror its messages field for field.
 *
 * Errors. Every function that can fail returns a kd_status_code: KD_OK (0) or a gRPC canonical
 * code (the daemon's, or the library's own for a bad argument). kd_last_error() and
 * kd_last_error_code() give the message and code of the most recent call made *on the calling
 * thread* (an empty message and KD_OK after a success); the message names the field and the
 * rule, e.g. "ops[0].quantize.input.shape[1]=200 is not a multiple of block 128".
 *
 * Thread-safety, per function, is stated in a "Thread-safety:" line. In short: a kd_client may
 * be used from many threads at once for buffer calls and ops; opening/closing its session,
 * attaching its ring and kd_close must not overlap any other call on the same client. A kd_shm
 * is not synchronised (its memory may be used from any thread).
 *
 * Versioning. KD_API_VERSION is the version this header describes, kd_api_version() the one
 * the loaded library implements: (major << 16) | minor. A library serves a header of the same
 * major and a minor at most its own. Structs whose first member is `struct_size` may grow at
 * their end within a major version; set it with the matching *_init function.
 */
#ifndef KERNELD_C_KERNELD_H_
#define KERNELD_C_KERNELD_H_

#include <stddef.h>
#include <stdint.h>

#include "kerneld/op_table.h"

#if defined(_WIN32)
#define KD_API __declspec(dllexport)
#else
#define KD_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KD_API_VERSION_MAJOR 2
#define KD_API_VERSION_MINOR 0
#define KD_API_VERSION ((KD_API_VERSION_MAJOR << 16) | KD_API_VERSION_MINOR)

/* Bytes of a CUDA/HIP IPC memory or event handle (cudaIpcMemHandle_t, hipIpcEventHandle_t). */
#define KD_IPC_HANDLE_BYTES 64
/* Most dimensions of a tensor reference. */
#define KD_MAX_RANK 4

/* ------------------------------------------------------------------------------------------ */
/* Status codes: the gRPC canonical codes, numbered as gRPC numbers them. */
typedef enum kd_status_code {
  KD_OK = 0,
  KD_CANCELLED = 1,
  KD_UNKNOWN = 2,
  KD_INVALID_ARGUMENT = 3,
  KD_DEADLINE_EXCEEDED = 4,
  KD_NOT_FOUND = 5,
  KD_ALREADY_EXISTS = 6,
  KD_PERMISSION_DENIED = 7,
  KD_RESOURCE_EXHAUSTED = 8,
  KD_FAILED_PRECONDITION = 9,
  KD_ABORTED = 10,
  KD_OUT_OF_RANGE = 11,
  KD_UNIMPLEMENTED = 12,
  KD_INTERNAL = 13,
  KD_UNAVAILABLE = 14,
  KD_DATA_LOSS = 15,
  KD_UNAUTHENTICATED = 16
} kd_status_code;

/* The version the loaded library implements, (major << 16) | minor. Thread-safety: any. */
KD_API uint32_t kd_api_version(void);
/* The library's release ("0.1.0"), a static string. Thread-safety: any. */
KD_API const char* kd_version_string(void);
/* The message of the most recent kd_ call on this thread ("" after a success). Valid until the
 * next kd_ call on this thread. Thread-safety: any (the state is per thread). */
KD_API const char* kd_last_error(void);
/* The code of the most recent kd_ call on this thread. Thread-safety: any. */
KD_API int kd_last_error_code(void);
/* "INVALID_ARGUMENT" for 3, ...; "UNKNOWN" for a number outside 0..16. A static string.
 * Thread-safety: any. */
KD_API const char* kd_status_code_name(int code);
/* sizeof the named struct of this header ("kd_tensor", "kd_op", "kd_completion",
 * "kd_allocation", "kd_client_options", "kd_ring_options", "kd_quantize_op", "kd_gemm_op",
 * "kd_pad_op", "kd_unpad_op") as the library was compiled, 0 for another name: a binding that
 * declares the structs itself (ctypes, Rust, Julia) checks its layouts against it.
 * Thread-safety: any. */
KD_API uint32_t kd_sizeof(const char* type_name);

/* ------------------------------------------------------------------------------------------ */
/* Wire enums: the values of kerneld.proto's enums, from the table in kerneld/op_table.h (one
 * enumerator per entry: KD_DTYPE_BF16, KD_QUANT_1X128, KD_GEMM_TN...). 0 is unspecified. */
#define KD_C_ENUM_VALUE_(prefix, suffix, cpp, value, ...) prefix##suffix = value,

typedef enum kd_dtype {
  KD_DTYPE_UNSPECIFIED = 0,
#define KD_C_X_(...) KD_C_ENUM_VALUE_(KD_DTYPE_, __VA_ARGS__)
  KD_ENUM_VALUES_DType(KD_C_X_)
#undef KD_C_X_
} kd_dtype;

typedef enum kd_quant_granularity {
  KD_QUANT_UNSPECIFIED = 0,
#define KD_C_X_(...) KD_C_ENUM_VALUE_(KD_QUANT_, __VA_ARGS__)
  KD_ENUM_VALUES_QuantGranularity(KD_C_X_)
#undef KD_C_X_
} kd_quant_granularity;

typedef enum kd_scale_format {
  KD_SCALE_FORMAT_UNSPECIFIED = 0, /* = FP32 */
#define KD_C_X_(...) KD_C_ENUM_VALUE_(KD_SCALE_, __VA_ARGS__)
  KD_ENUM_VALUES_ScaleFormat(KD_C_X_)
#undef KD_C_X_
} kd_scale_format;

typedef enum kd_scale_layout {
  KD_SCALE_LAYOUT_UNSPECIFIED = 0, /* = row-major */
#define KD_C_X_(...) KD_C_ENUM_VALUE_(KD_SCALE_LAYOUT_, __VA_ARGS__)
  KD_ENUM_VALUES_ScaleLayout(KD_C_X_)
#undef KD_C_X_
} kd_scale_layout;

typedef enum kd_mx_rounding {
  KD_MX_ROUNDING_UNSPECIFIED = 0, /* = floor */
#define KD_C_X_(...) KD_C_ENUM_VALUE_(KD_MX_ROUNDING_, __VA_ARGS__)
  KD_ENUM_VALUES_MxRounding(KD_C_X_)
#undef KD_C_X_
} kd_mx_rounding;

typedef enum kd_gemm_variant {
  KD_GEMM_UNSPECIFIED = 0,
#define KD_C_X_(...) KD_C_ENUM_VALUE_(KD_GEMM_, __VA_ARGS__)
  KD_ENUM_VALUES_GemmVariant(KD_C_X_)
#undef KD_C_X_
} kd_gemm_variant;

typedef enum kd_ipc_kind {
  KD_IPC_UNSPECIFIED = 0,
#define KD_C_X_(...) KD_C_ENUM_VALUE_(KD_IPC_, __VA_ARGS__)
  KD_ENUM_VALUES_IpcKind(KD_C_X_)
#undef KD_C_X_
} kd_ipc_kind;

typedef enum kd_completion_mode {
  KD_COMPLETION_UNSPECIFIED = 0, /* = SYNC */
#define KD_C_X_(...) KD_C_ENUM_VALUE_(KD_COMPLETION_, __VA_ARGS__)
  KD_ENUM_VALUES_CompletionMode(KD_C_X_)
#undef KD_C_X_
} kd_completion_mode;
#undef KD_C_ENUM_VALUE_

/* KD_OP_QUANTIZE, KD_OP_GEMM...: which member of kd_op.u holds an op. */
typedef enum kd_op_kind {
  KD_OP_NONE = 0,
#define KD_C_X_(name, Name, UPPER, number) KD_OP_##UPPER = number,
  KD_OPS(KD_C_X_)
#undef KD_C_X_
} kd_op_kind;

/* ------------------------------------------------------------------------------------------ */
/* Tensors and ops (kerneld.proto's TensorRef, its op messages, Op). */

/* A view of a tensor inside a registered buffer. `rank` 0 marks an absent (optional) tensor;
 * otherwise 1..KD_MAX_RANK and shape[0..rank) are used. Strides are in elements, one per
 * dimension, the last 1; all of strides[0..rank) zero means contiguous row-major. */
typedef struct kd_tensor {
  uint64_t buffer_id;
  uint64_t byte_offset;
  int32_t dtype; /* kd_dtype */
  int32_t rank;
  int64_t shape[KD_MAX_RANK];
  int64_t strides[KD_MAX_RANK];
} kd_tensor;

/* One struct per op of KD_OPS, kd_<name>_op, its fields those of the op's kerneld.proto message
 * in the same order (KD_OP_FIELDS_<name>): a tensor is a kd_tensor (rank 0: absent), an enum an
 * int32_t of its kd_ enum, a flag an int32_t 0 or 1, an int an int32_t and a float a float;
 * kerneld.proto documents every field:
 *   kd_quantize_op { input, output, scales, granularity, transpose_output, scale_format,
 *                    scale_layout, eps, mx_rounding, output_t, scales_t, group_ends }
 *   kd_gemm_op     { variant, a, a_scales, b, b_scales, d, accumulate, group_ends }
 *   kd_pad_op      { input, group_ends, output, padded_group_ends, alignment }
 *   kd_unpad_op    { input, group_ends, output, alignment } */
#define KD_C_TENSOR_(field, dir, req) kd_tensor field;
#define KD_C_ENUM_(field, Enum) int32_t field;
#define KD_C_FLAG_(field) int32_t field;
#define KD_C_INT_(field) int32_t field;
#define KD_C_FLOAT_(field) float field;
#define KD_C_X_(name, Name, UPPER, number)                                            \
  typedef struct kd_##name##_op {                                                     \
    KD_OP_FIELDS_##name(KD_C_TENSOR_, KD_C_ENUM_, KD_C_FLAG_, KD_C_INT_, KD_C_FLOAT_) \
  } kd_##name##_op;
KD_OPS(KD_C_X_)
#undef KD_C_X_
#undef KD_C_TENSOR_
#undef KD_C_ENUM_
#undef KD_C_FLAG_
#undef KD_C_INT_
#undef KD_C_FLOAT_

/* One op of a batch: `kind` says which member of `u` holds it. */
typedef struct kd_op {
  int32_t kind; /* kd_op_kind */
  int32_t reserved;
  union {
#define KD_C_X_(name, Name, UPPER, number) kd_##name##_op name;
    KD_OPS(KD_C_X_)
#undef KD_C_X_
  } u;
} kd_op;

/* The table as data, for bindings that build their declarations from it (the Python package).
 * kd_enum_value_at(i) is the i-th value of every enum of KD_ENUMS, enum by enum, and NULL past
 * the last; kd_op_info_at(i) the i-th op of KD_OPS with its fields, NULL past the last. The
 * strings and arrays are static. Thread-safety: any. */
typedef struct kd_enum_value_info {
  const char* enum_name; /* "QuantGranularity" */
  const char* name;      /* "1X128": the C enumerator without its prefix */
  const char* label;     /* "1x128" */
  int32_t value;
  uint32_t bytes; /* DType: the element size; 0 otherwise */
} kd_enum_value_info;

typedef struct kd_field_info {
  const char* name;
  const char* kind;      /* "tensor", "enum", "flag" (int32_t 0/1), "int" (int32_t), "float" */
  int32_t output;        /* tensors: 1 when the op writes it */
  int32_t required;      /* tensors: 1 unless the op may leave it absent */
  uint32_t offset;       /* in the op's struct */
  const char* enum_name; /* KD_FIELD_ENUM: the enum's name in KD_ENUMS, else "" */
} kd_field_info;

typedef struct kd_op_info {
  const char* name; /* "quantize" */
  const char* type; /* "Quantize" */
  int32_t kind;     /* kd_op_kind */
  uint32_t size;    /* sizeof(kd_<name>_op) */
  uint32_t field_count;
  const kd_field_info* fields;
} kd_op_info;

KD_API const kd_enum_value_info* kd_enum_value_at(uint32_t index);
KD_API const kd_op_info* kd_op_info_at(uint32_t index);

/* How the caller learns that ops finished (kerneld.proto's Completion). A NULL kd_completion*
 * means SYNC with no events. An event is present when its size is non-zero (then
 * KD_IPC_HANDLE_BYTES for CUDA and HIP events, made with cudaEventInterprocess |
 * cudaEventDisableTiming): the daemon's stream waits on `wait_event` before launching, and
 * records `signal_event` after the ops (required with ASYNC). The daemon opens each distinct
 * event handle once per session and keeps it open: reuse events rather than making new ones. */
typedef struct kd_completion {
  int32_t mode; /* kd_completion_mode */
  uint32_t wait_event_size;
  uint32_t signal_event_size;
  uint32_t reserved;
  uint8_t wait_event[KD_IPC_HANDLE_BYTES];
  uint8_t signal_event[KD_IPC_HANDLE_BYTES];
} kd_completion;

/* ------------------------------------------------------------------------------------------ */
/* Connection and session. */

typedef struct kd_client kd_client;

typedef struct kd_client_options {
  uint32_t struct_size;          /* sizeof(kd_client_options), set by kd_client_options_init */
  uint32_t connect_timeout_ms;   /* connecting, and the session's first message (5000) */
  uint32_t control_timeout_ms;   /* session and buffer calls (10000) */
  uint32_t op_timeout_ms;        /* ops and Submit, queueing plus kernel time for SYNC (60000) */
  int32_t unlink_after_register; /* unlink a shm name once the daemon registered it (0) */
  int32_t channel_tag;           /* clients with different tags never share a connection (0) */
} kd_client_options;

/* Fills `options` with the defaults above. Thread-safety: any. */
KD_API void kd_client_options_init(kd_client_options* options);

/* Connects to the daemon at `target` (a socket path, "unix:/path", or any gRPC target; NULL or
 * "" the default /run/kerneld/kerneld.sock) and stores a new client in *out. `options` may be
 * NULL (defaults). KD_UNAVAILABLE or KD_DEADLINE_EXCEEDED naming the target when no daemon
 * answers; KD_INVALID_ARGUMENT for a NULL `out` or an options struct_size of 0.
 * Thread-safety: any. */
KD_API int kd_connect(const char* target, const kd_client_options* options, kd_client** out);

/* Ends the session if one is open (the daemon releases everything it held) and frees the
 * client. NULL is a no-op. Thread-safety: no other call on `client` may overlap or follow. */
KD_API void kd_close(kd_client* client);

/* The normalized target ("unix:/path"), valid while the client lives. Thread-safety: any. */
KD_API const char* kd_client_target(const kd_client* client);

/* Opens the client's session (one at a time). lease_seconds 0: it lives as long as this client;
 * > 0: it also ends after that many seconds without a call naming it. KD_FAILED_PRECONDITION
 * if one is open; the daemon's status otherwise (KD_UNAVAILABLE while it drains).
 * Thread-safety: must not overlap any other call on `client`. */
KD_API int kd_session_open(kd_client* client, const char* client_name, uint32_t lease_seconds);

/* Closes the session; *buffers_released (may be NULL) gets how many buffers the daemon
 * released. The session is gone locally even when this fails. KD_FAILED_PRECONDITION without
 * a session. Thread-safety: must not overlap any other call on `client`. */
KD_API int kd_session_close(kd_client* client, uint32_t* buffers_released);

/* KD_OK while the session stream is open; KD_NOT_FOUND once the daemon ended the session
 * (lease expiry), the stream's code (e.g. KD_UNAVAILABLE) once it broke (daemon exit);
 * KD_FAILED_PRECONDITION without a session. The reason is in kd_last_error().
 * Thread-safety: any, between open and close. */
KD_API int kd_session_status(const kd_client* client);

/* The session id, the daemon's default backend ("cpu", "cuda") and the lease granted: ""
 * (0) without a session. The strings stay valid until the session closes.
 * Thread-safety: any, between open and close. */
KD_API const char* kd_session_id(const kd_client* client);
KD_API const char* kd_session_backend(const kd_client* client);
KD_API uint32_t kd_session_lease_seconds(const kd_client* client);

/* ------------------------------------------------------------------------------------------ */
/* Submit ring: op calls through shared memory instead of gRPC round trips (same statuses and
 * semantics; AttachSubmitRing in kerneld.proto). */

typedef struct kd_ring_options {
  uint32_t struct_size; /* set by kd_ring_options_init */
  uint32_t slots;       /* calls in flight at once (8); a call finding none free uses gRPC */
  uint32_t slot_bytes;  /* largest request per slot (65536); a larger one uses gRPC */
  uint32_t spin_us;     /* how long a caller polls before it sleeps on its slot (100) */
} kd_ring_options;

/* Thread-safety: any. */
KD_API void kd_ring_options_init(kd_ring_options* options);

/* Attaches a submit ring to the session (NULL options: defaults); it lasts as long as the
 * session. KD_FAILED_PRECONDITION without a session, with a ring already attached, or when the
 * daemon runs with --submit_rings=false. Thread-safety: must not overlap any other call on
 * `client`. */
KD_API int kd_submit_ring_attach(kd_client* client, const kd_ring_options* options);

/* 1 when a ring is attached, else 0; the counts of calls answered through it and of calls
 * that went over gRPC (no free slot, too large) into the non-NULL pointers.
 * Thread-safety: any, between open and close. */
KD_API int kd_submit_ring_info(const kd_client* client, uint64_t* ring_calls, uint64_t* fallbacks);

/* ------------------------------------------------------------------------------------------ */
/* Buffers. */

/* Mapped shared memory (the memory the CPU backend reads and writes) and its descriptor: either
 * created here (a sealed memfd with no name, so nothing is left behind if the process dies) or
 * a daemon allocation. Registering it sends the descriptor over the daemon's fd socket (the
 * data socket's path + ".fd"). Not synchronised: one thread at a time per kd_shm; the memory
 * itself from any. Each kd_shm holds one open descriptor until destroyed. */
typedef struct kd_shm kd_shm;

/* Creates `size` zero-filled bytes of shared memory (a memfd sealed at its size) and maps it
 * read-write into *out. `mode` and `group` are not used: the memory has no name and reaches the
 * daemon as a descriptor, whatever user the daemon runs as. KD_INVALID_ARGUMENT for size 0; the
 * errno's code otherwise (KD_RESOURCE_EXHAUSTED...). Thread-safety: any. */
KD_API int kd_shm_create(uint64_t size, uint32_t mode, int64_t group, kd_shm** out);
/* Unmaps and frees `shm` and closes its descriptor. A registered buffer stays
 * registered: the daemon has its own mapping; release it with kd_release_shm or let the
 * session end. NULL is a no-op. */
KD_API void kd_shm_destroy(kd_shm* shm);
/* Its mapping (page aligned), size, name ("": memfds and allocations have none), and the
 * daemon's buffer id once registered or allocated (0 before). */
KD_API void* kd_shm_data(const kd_shm* shm);
KD_API uint64_t kd_shm_size(const kd_shm* shm);
KD_API const char* kd_shm_name(const kd_shm* shm);
KD_API uint64_t kd_shm_buffer_id(const kd_shm* shm);

/* Registers `shm` with the session; its id goes to *buffer_id (may be NULL) and into the
 * kd_shm. KD_FAILED_PRECONDITION without a session or when `shm` is already registered.
 * Thread-safety: any, between open and close (but one thread at a time per `shm`). */
KD_API int kd_register_shm(kd_client* client, kd_shm* shm, uint64_t* buffer_id);

/* Registers `size` bytes of GPU memory exported with cudaIpcGetMemHandle / hipIpcGetMemHandle:
 * `handle` (KD_IPC_HANDLE_BYTES bytes) of the exporter's allocation, `offset` where the buffer
 * starts inside it, `device` the ordinal as the daemon sees it. The daemon opens the handle
 * once per registration: register an allocation once and name tensors in it by byte offset.
 * KD_FAILED_PRECONDITION when the daemon has no backend of `kind`; KD_INVALID_ARGUMENT for a
 * bad kind, device or size. Thread-safety: any, between open and close. */
KD_API int kd_register_ipc(kd_client* client, int32_t kind, const uint8_t* handle, uint64_t offset,
                           uint64_t size, int32_t device, uint64_t* buffer_id);

/* What the daemon allocated (kd_allocate): device memory by IPC handle (kind != 0), or host
 * memory (kind 0), which this call does not map: host pool memory is handed out only as a
 * descriptor (kd_allocate_shm maps it), so here it is usable by its id in ops. */
typedef struct kd_allocation {
  uint64_t buffer_id;
  uint64_t size;
  char shm_name[256]; /* "": the daemon's pool has no names */
  int32_t ipc_kind;   /* kd_ipc_kind; 0 for host memory */
  int32_t device;
  uint64_t ipc_offset;
  uint8_t ipc_handle[KD_IPC_HANDLE_BYTES];
} kd_allocation;

/* Allocates `size` bytes from the daemon's pool on `backend` (NULL or "": its default) and
 * `device`. The buffer belongs to the session; release it with kd_release. KD_INVALID_ARGUMENT
 * for size 0, an unknown backend or device. Thread-safety: any, between open and close. */
KD_API int kd_allocate(kd_client* client, uint64_t size, const char* backend, int32_t device,
                       kd_allocation* out);
/* The same for host memory, mapped: *out is a kd_shm of the descriptor the daemon sent (over
 * its fd socket), reachable by no other session. KD_UNIMPLEMENTED (and nothing held) when the
 * daemon allocated device memory. */
KD_API int kd_allocate_shm(kd_client* client, uint64_t size, const char* backend, int32_t device,
                           kd_shm** out);

/* Releases one buffer of the session. KD_NOT_FOUND if the session holds no such buffer.
 * Thread-safety: any, between open and close. */
KD_API int kd_release(kd_client* client, uint64_t buffer_id);
/* The same for `shm`, whose buffer id is reset to 0 on success. KD_FAILED_PRECONDITION when it
 * is not registered. */
KD_API int kd_release_shm(kd_client* client, kd_shm* shm);

/* ------------------------------------------------------------------------------------------ */
/* Ops. Each runs through the submit ring when one is attached (else a gRPC call). `completion`
 * NULL means SYNC; *kernel_seconds (may be NULL) gets the device time when the daemon knows it
 * (SYNC), else 0. A batch (kd_submit) runs in order; every op is validated before the first
 * runs, and an error names the op ("ops[2].gemm.a.shape[1]=..."). An empty batch is a round
 * trip. KD_INVALID_ARGUMENT naming the field, before anything is sent, for a NULL op, an
 * unknown op kind or a rank outside 0..KD_MAX_RANK; the daemon's status otherwise.
 * Thread-safety: any, between open and close; calls from several threads run concurrently. */
/* One per op of KD_OPS: kd_quantize, kd_gemm, kd_pad, kd_unpad; each runs its op as a batch
 * of one, so its errors are named as in kd_submit ("ops[0].quantize.input..."). */
#define KD_C_X_(name, Name, UPPER, number)                          \
  KD_API int kd_##name(kd_client* client, const kd_##name##_op* op, \
                       const kd_completion* completion, double* kernel_seconds);
KD_OPS(KD_C_X_)
#undef KD_C_X_
KD_API int kd_submit(kd_client* client, const kd_op* ops, size_t count,
                     const kd_completion* completion, double* kernel_seconds);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KERNELD_C_KERNELD_H_ */
