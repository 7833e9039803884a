// The C ABI (include/kerneld/c/kerneld.h) over the C++ client: every call converts its plain C
// arguments to the client's types, calls the public kd::client::Client method, and turns the
// absl::Status into a code plus the calling thread's last-error message.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "kerneld/c/kerneld.h"
#include "kerneld/client/client.h"
#include "kerneld/client/shm_buffer.h"

struct kd_client {
  std::unique_ptr<kd::client::Client> client;
};

struct kd_shm {
  kd::client::ShmBuffer buffer;
};

namespace {

namespace v1 = ::kerneld::v1;

struct LastError {
  int code = KD_OK;
  std::string message;
};

LastError& ThreadError() {
  thread_local LastError error;
  return error;
}

int Ok() {
  LastError& e = ThreadError();
  e.code = KD_OK;
  e.message.clear();
  return KD_OK;
}

int Fail(const absl::Status& status) {
  if (status.ok()) return Ok();
  LastError& e = ThreadError();
  e.code = static_cast<int>(status.code());
  e.message.assign(status.message().data(), status.message().size());
  return e.code;
}

int Invalid(const std::string& message) { return Fail(absl::InvalidArgumentError(message)); }

absl::Duration Millis(uint32_t ms) { return absl::Milliseconds(ms); }

// Field-wise conversion of a kd_tensor into `ref`. A rank of 0 leaves the message unset.
absl::Status ToRef(const kd_tensor& t, const char* field, v1::TensorRef* ref) {
  if (t.rank < 0 || t.rank > KD_MAX_RANK) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".rank=", t.rank, " must be in 0..", KD_MAX_RANK, " (0: absent)"));
  }
  ref->set_buffer_id(t.buffer_id);
  ref->set_byte_offset(t.byte_offset);
  ref->set_dtype(static_cast<v1::DType>(t.dtype));
  bool strided = false;
  for (int i = 0; i < t.rank; ++i) {
    ref->add_shape(t.shape[i]);
    strided = strided || t.strides[i] != 0;
  }
  if (strided) {
    for (int i = 0; i < t.rank; ++i) ref->add_strides(t.strides[i]);
  }
  return absl::OkStatus();
}

// Sets the optional message field only for a present tensor (rank > 0).
template <typename Mutable>
absl::Status ToOptionalRef(const kd_tensor& t, const char* field, Mutable mutable_ref) {
  if (t.rank == 0) return absl::OkStatus();
  return ToRef(t, field, mutable_ref());
}

#define KD_C_RETURN_IF_ERROR(expr)               \
  do {                                           \
    absl::Status kd_c_status_ = (expr);          \
    if (!kd_c_status_.ok()) return kd_c_status_; \
  } while (0)

// One conversion per op struct, generated from its row of kerneld/op_table.h: a tensor of rank
// 0 is left unset (absent), an enum is passed as its number (the daemon range-checks it), a
// flag becomes a bool.
#define KD_C_TENSOR_(field, dir, req) \
  KD_C_RETURN_IF_ERROR(ToOptionalRef(c.field, #field, [op] { return op->mutable_##field(); }));
#define KD_C_ENUM_(field, Enum) op->set_##field(static_cast<v1::Enum>(c.field));
#define KD_C_FLAG_(field) op->set_##field(c.field != 0);
#define KD_C_INT_(field) op->set_##field(c.field);
#define KD_C_FLOAT_(field) op->set_##field(c.field);
#define KD_C_X_(name, Name, UPPER, number)                               \
  absl::Status ToProto(const kd_##name##_op& c, v1::Name##Op* op) {      \
    KD_OP_FIELDS_##name(KD_C_TENSOR_, KD_C_ENUM_, KD_C_FLAG_, KD_C_INT_, \
                        KD_C_FLOAT_) return absl::OkStatus();            \
  }
KD_OPS(KD_C_X_)
#undef KD_C_X_

// "quantize" for KD_OP_QUANTIZE...; nullptr for a number that is no op.
const char* OpKindName(int32_t kind) {
  switch (kind) {
#define KD_C_X_(name, Name, UPPER, number) \
  case KD_OP_##UPPER:                      \
    return #name;
    KD_OPS(KD_C_X_)
#undef KD_C_X_
    default:
      return nullptr;
  }
}

absl::Status ToProto(const kd_op& c, v1::Op* op) {
  switch (c.kind) {
#define KD_C_X_(name, Name, UPPER, number) \
  case KD_OP_##UPPER:                      \
    return ToProto(c.u.name, op->mutable_##name());
    KD_OPS(KD_C_X_)
#undef KD_C_X_
    default:
      break;
  }
  static const std::string* const kKinds = [] {
    std::string kinds;
#define KD_C_X_(name, Name, UPPER, number) \
  absl::StrAppend(&kinds, kinds.empty() ? "" : ", ", number, " " #name);
    KD_OPS(KD_C_X_)
#undef KD_C_X_
    return new std::string(kinds);
  }();
  return absl::InvalidArgumentError(
      absl::StrCat("kind=", c.kind, " is not an op kind (", *kKinds, ")"));
}

absl::Status ToProto(const kd_completion* c, v1::Completion* completion) {
  if (c == nullptr) return absl::OkStatus();
  if (c->wait_event_size > KD_IPC_HANDLE_BYTES || c->signal_event_size > KD_IPC_HANDLE_BYTES) {
    return absl::InvalidArgumentError(absl::StrCat(
        "completion.wait_event_size=", c->wait_event_size,
        " and signal_event_size=", c->signal_event_size, " must be at most ", KD_IPC_HANDLE_BYTES));
  }
  completion->set_mode(static_cast<v1::Completion::Mode>(c->mode));
  if (c->wait_event_size > 0) {
    completion->set_wait_event(c->wait_event, c->wait_event_size);
  }
  if (c->signal_event_size > 0) {
    completion->set_signal_event(c->signal_event, c->signal_event_size);
  }
  return absl::OkStatus();
}

int Finish(const absl::StatusOr<kd::client::OpResult>& result, double* kernel_seconds) {
  if (kernel_seconds != nullptr) *kernel_seconds = result.ok() ? result->kernel_seconds : 0.0;
  if (!result.ok()) return Fail(result.status());
  return Ok();
}

// A batch of ops converted and submitted; an error of the conversion names the op.
int SubmitOps(kd_client* client, const kd_op* ops, size_t count, const kd_completion* completion,
              double* kernel_seconds) {
  if (kernel_seconds != nullptr) *kernel_seconds = 0.0;
  if (client == nullptr) return Invalid("client is NULL");
  if (ops == nullptr && count > 0) return Invalid(absl::StrCat("ops is NULL with count=", count));
  std::vector<v1::Op> batch(count);
  for (size_t i = 0; i < count; ++i) {
    if (absl::Status s = ToProto(ops[i], &batch[i]); !s.ok()) {
      const char* kind = OpKindName(ops[i].kind);
      return Fail(absl::Status(s.code(), absl::StrCat("ops[", i, "].", kind == nullptr ? "" : kind,
                                                      kind == nullptr ? "" : ".", s.message())));
    }
  }
  v1::Completion c;
  if (absl::Status s = ToProto(completion, &c); !s.ok()) return Fail(s);
  return Finish(client->client->Submit(batch, c), kernel_seconds);
}

// The table as data (kd_enum_value_at, kd_op_info_at): every enum's values, enum by enum in
// the order of KD_ENUMS, and every op with its fields.
#define KD_C_ROW_(Enum, suffix, value, label, bytes) {#Enum, #suffix, label, value, bytes},
#define KD_C_DTYPE_(suffix, cpp, value, label, bytes) KD_C_ROW_(DType, suffix, value, label, bytes)
#define KD_C_GRANULARITY_(suffix, cpp, value, label) \
  KD_C_ROW_(QuantGranularity, suffix, value, label, 0)
#define KD_C_SCALE_FORMAT_(suffix, cpp, value, label) \
  KD_C_ROW_(ScaleFormat, suffix, value, label, 0)
#define KD_C_SCALE_LAYOUT_(suffix, cpp, value, label) \
  KD_C_ROW_(ScaleLayout, suffix, value, label, 0)
#define KD_C_MX_ROUNDING_(suffix, cpp, value, label) KD_C_ROW_(MxRounding, suffix, value, label, 0)
#define KD_C_GEMM_VARIANT_(suffix, cpp, value, label) \
  KD_C_ROW_(GemmVariant, suffix, value, label, 0)
#define KD_C_COMPLETION_MODE_(suffix, cpp, value, label) \
  KD_C_ROW_(CompletionMode, suffix, value, label, 0)
#define KD_C_IPC_KIND_(suffix, cpp, value, label) KD_C_ROW_(IpcKind, suffix, value, label, 0)
// clang-format off
constexpr kd_enum_value_info kEnumValues[] = {
    KD_ENUM_VALUES_DType(KD_C_DTYPE_)
    KD_ENUM_VALUES_QuantGranularity(KD_C_GRANULARITY_)
    KD_ENUM_VALUES_ScaleFormat(KD_C_SCALE_FORMAT_)
    KD_ENUM_VALUES_ScaleLayout(KD_C_SCALE_LAYOUT_)
    KD_ENUM_VALUES_MxRounding(KD_C_MX_ROUNDING_)
    KD_ENUM_VALUES_GemmVariant(KD_C_GEMM_VARIANT_)
    KD_ENUM_VALUES_CompletionMode(KD_C_COMPLETION_MODE_)
    KD_ENUM_VALUES_IpcKind(KD_C_IPC_KIND_)
};
// clang-format on
constexpr bool SameName(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}
constexpr bool HasRows(const char* enum_name) {
  for (const kd_enum_value_info& v : kEnumValues) {
    if (SameName(v.enum_name, enum_name)) return true;
  }
  return false;
}
#define KD_C_X_(Enum, c_prefix, proto_enum, proto_prefix) \
  static_assert(HasRows(#Enum), #Enum " of KD_ENUMS needs its rows in kEnumValues");
KD_ENUMS(KD_C_X_)
#undef KD_C_X_

#define KD_C_OUTPUT_IN 0
#define KD_C_OUTPUT_OUT 1
#define KD_C_REQUIRED_REQUIRED 1
#define KD_C_REQUIRED_OPTIONAL 0
#define KD_C_FIELD_(field, kind, output, required, enum_name) \
  {#field, kind, output, required, static_cast<uint32_t>(offsetof(Struct, field)), enum_name},
#define KD_C_TENSOR_INFO_(field, dir, req) \
  KD_C_FIELD_(field, "tensor", KD_C_OUTPUT_##dir, KD_C_REQUIRED_##req, "")
#define KD_C_ENUM_INFO_(field, Enum) KD_C_FIELD_(field, "enum", 0, 0, #Enum)
#define KD_C_FLAG_INFO_(field) KD_C_FIELD_(field, "flag", 0, 0, "")
#define KD_C_INT_INFO_(field) KD_C_FIELD_(field, "int", 0, 0, "")
#define KD_C_FLOAT_INFO_(field) KD_C_FIELD_(field, "float", 0, 0, "")
#define KD_C_X_(name, Name, UPPER, number)                                                       \
  struct Name##Fields {                                                                          \
    using Struct = kd_##name##_op;                                                               \
    static constexpr kd_field_info kFields[] = {KD_OP_FIELDS_##name(                             \
        KD_C_TENSOR_INFO_, KD_C_ENUM_INFO_, KD_C_FLAG_INFO_, KD_C_INT_INFO_, KD_C_FLOAT_INFO_)}; \
  };
KD_OPS(KD_C_X_)
#undef KD_C_X_
#define KD_C_X_(name, Name, UPPER, number)                  \
  {#name,                                                   \
   #Name,                                                   \
   KD_OP_##UPPER,                                           \
   static_cast<uint32_t>(sizeof(kd_##name##_op)),           \
   static_cast<uint32_t>(std::size(Name##Fields::kFields)), \
   Name##Fields::kFields},
const kd_op_info kOps[] = {KD_OPS(KD_C_X_)};
#undef KD_C_X_

const char* const kCodeNames[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

}  // namespace

extern "C" {

uint32_t kd_api_version(void) { return KD_API_VERSION; }

const char* kd_version_string(void) { return KD_C_VERSION_STRING; }

const char* kd_last_error(void) { return ThreadError().message.c_str(); }

int kd_last_error_code(void) { return ThreadError().code; }

const char* kd_status_code_name(int code) {
  if (code < 0 || code > KD_UNAUTHENTICATED) return "UNKNOWN";
  return kCodeNames[code];
}

uint32_t kd_sizeof(const char* type_name) {
  if (type_name == nullptr) return 0;
  static const struct {
    const char* name;
    uint32_t size;
  } kSizes[] = {{"kd_tensor", sizeof(kd_tensor)},
#define KD_C_X_(name, Name, UPPER, number) {"kd_" #name "_op", sizeof(kd_##name##_op)},
                KD_OPS(KD_C_X_)
#undef KD_C_X_
                    {"kd_op", sizeof(kd_op)},
                {"kd_completion", sizeof(kd_completion)},
                {"kd_allocation", sizeof(kd_allocation)},
                {"kd_client_options", sizeof(kd_client_options)},
                {"kd_ring_options", sizeof(kd_ring_options)}};
  for (const auto& entry : kSizes) {
    if (std::strcmp(entry.name, type_name) == 0) return entry.size;
  }
  return 0;
}

const kd_enum_value_info* kd_enum_value_at(uint32_t index) {
  return index < std::size(kEnumValues) ? &kEnumValues[index] : nullptr;
}

const kd_op_info* kd_op_info_at(uint32_t index) {
  return index < std::size(kOps) ? &kOps[index] : nullptr;
}

void kd_client_options_init(kd_client_options* options) {
  if (options == nullptr) return;
  const kd::client::ClientOptions defaults;
  *options = kd_client_options{};
  options->struct_size = sizeof(kd_client_options);
  options->connect_timeout_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(defaults.connect_timeout));
  options->control_timeout_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(defaults.control_timeout));
  options->op_timeout_ms = static_cast<uint32_t>(absl::ToInt64Milliseconds(defaults.op_timeout));
  options->unlink_after_register = defaults.unlink_after_register ? 1 : 0;
  options->channel_tag = defaults.channel_tag;
}

int kd_connect(const char* target, const kd_client_options* options, kd_client** out) {
  if (out == nullptr) return Invalid("out is NULL");
  *out = nullptr;
  kd_client_options o;
  kd_client_options_init(&o);
  if (options != nullptr) {
    if (options->struct_size == 0) {
      return Invalid("options.struct_size=0: initialise options with kd_client_options_init");
    }
    // Fields past the caller's struct_size keep their defaults (an older caller).
    std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof(o)));
  }
  kd::client::ClientOptions copts;
  copts.connect_timeout = Millis(o.connect_timeout_ms);
  copts.control_timeout = Millis(o.control_timeout_ms);
  copts.op_timeout = Millis(o.op_timeout_ms);
  copts.unlink_after_register = o.unlink_after_register != 0;
  copts.channel_tag = o.channel_tag;
  absl::StatusOr<std::unique_ptr<kd::client::Client>> client =
      kd::client::Client::Connect(target == nullptr ? "" : target, copts);
  if (!client.ok()) return Fail(client.status());
  kd_client* c = new (std::nothrow) kd_client;
  if (c == nullptr) return Fail(absl::ResourceExhaustedError("out of memory for a kd_client"));
  c->client = *std::move(client);
  *out = c;
  return Ok();
}

void kd_close(kd_client* client) { delete client; }

const char* kd_client_target(const kd_client* client) {
  return client == nullptr ? "" : client->client->target().c_str();
}

int kd_session_open(kd_client* client, const char* client_name, uint32_t lease_seconds) {
  if (client == nullptr) return Invalid("client is NULL");
  return Fail(
      client->client->OpenSession(client_name == nullptr ? "" : client_name, lease_seconds));
}

int kd_session_close(kd_client* client, uint32_t* buffers_released) {
  if (buffers_released != nullptr) *buffers_released = 0;
  if (client == nullptr) return Invalid("client is NULL");
  absl::StatusOr<uint32_t> released = client->client->CloseSession();
  if (!released.ok()) return Fail(released.status());
  if (buffers_released != nullptr) *buffers_released = *released;
  return Ok();
}

int kd_session_status(const kd_client* client) {
  if (client == nullptr) return Invalid("client is NULL");
  return Fail(client->client->SessionStatus());
}

const char* kd_session_id(const kd_client* client) {
  return client == nullptr ? "" : client->client->session_id().c_str();
}

const char* kd_session_backend(const kd_client* client) {
  return client == nullptr ? "" : client->client->backend().c_str();
}

uint32_t kd_session_lease_seconds(const kd_client* client) {
  return client == nullptr ? 0 : client->client->lease_seconds();
}

void kd_ring_options_init(kd_ring_options* options) {
  if (options == nullptr) return;
  const kd::client::SubmitRingOptions defaults;
  *options = kd_ring_options{};
  options->struct_size = sizeof(kd_ring_options);
  options->slots = defaults.slots;
  options->slot_bytes = defaults.slot_bytes;
  options->spin_us = static_cast<uint32_t>(absl::ToInt64Microseconds(defaults.spin));
}

int kd_submit_ring_attach(kd_client* client, const kd_ring_options* options) {
  if (client == nullptr) return Invalid("client is NULL");
  kd_ring_options o;
  kd_ring_options_init(&o);
  if (options != nullptr) {
    if (options->struct_size == 0) {
      return Invalid("options.struct_size=0: initialise options with kd_ring_options_init");
    }
    std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof(o)));
  }
  kd::client::SubmitRingOptions ropts;
  ropts.slots = o.slots;
  ropts.slot_bytes = o.slot_bytes;
  ropts.spin = absl::Microseconds(o.spin_us);
  return Fail(client->client->AttachSubmitRing(ropts));
}

int kd_submit_ring_info(const kd_client* client, uint64_t* ring_calls, uint64_t* fallbacks) {
  if (client == nullptr) return 0;
  const kd::client::Client::SubmitRingCounts counts = client->client->submit_ring_counts();
  if (ring_calls != nullptr) *ring_calls = counts.ring_calls;
  if (fallbacks != nullptr) *fallbacks = counts.fallbacks;
  return client->client->has_submit_ring() ? 1 : 0;
}

int kd_shm_create(uint64_t size, uint32_t mode, int64_t group, kd_shm** out) {
  if (out == nullptr) return Invalid("out is NULL");
  *out = nullptr;
  kd::client::ShmOptions options;
  if (mode != 0) options.mode = static_cast<mode_t>(mode);
  if (group >= 0) options.group = static_cast<gid_t>(group);
  absl::StatusOr<kd::client::ShmBuffer> buffer = kd::client::ShmBuffer::Create(size, options);
  if (!buffer.ok()) return Fail(buffer.status());
  *out = new kd_shm{*std::move(buffer)};
  return Ok();
}

void kd_shm_destroy(kd_shm* shm) { delete shm; }

void* kd_shm_data(const kd_shm* shm) { return shm == nullptr ? nullptr : shm->buffer.data(); }

uint64_t kd_shm_size(const kd_shm* shm) { return shm == nullptr ? 0 : shm->buffer.size(); }

const char* kd_shm_name(const kd_shm* shm) {
  return shm == nullptr ? "" : shm->buffer.name().c_str();
}

uint64_t kd_shm_buffer_id(const kd_shm* shm) {
  return shm == nullptr ? 0 : shm->buffer.buffer_id();
}

int kd_register_shm(kd_client* client, kd_shm* shm, uint64_t* buffer_id) {
  if (buffer_id != nullptr) *buffer_id = 0;
  if (client == nullptr) return Invalid("client is NULL");
  if (shm == nullptr) return Invalid("shm is NULL");
  absl::StatusOr<uint64_t> id = client->client->RegisterBuffer(shm->buffer);
  if (!id.ok()) return Fail(id.status());
  if (buffer_id != nullptr) *buffer_id = *id;
  return Ok();
}

int kd_register_ipc(kd_client* client, int32_t kind, const uint8_t* handle, uint64_t offset,
                    uint64_t size, int32_t device, uint64_t* buffer_id) {
  if (buffer_id != nullptr) *buffer_id = 0;
  if (client == nullptr) return Invalid("client is NULL");
  if (handle == nullptr) return Invalid("handle is NULL");
  v1::IpcMemHandle ipc;
  ipc.set_kind(static_cast<v1::IpcMemHandle::Kind>(kind));
  ipc.set_handle(handle, KD_IPC_HANDLE_BYTES);
  ipc.set_offset(offset);
  ipc.set_device(device);
  absl::StatusOr<v1::RegisterBufferResponse> response = client->client->RegisterIpc(ipc, size);
  if (!response.ok()) return Fail(response.status());
  if (buffer_id != nullptr) *buffer_id = response->buffer_id();
  return Ok();
}

int kd_allocate(kd_client* client, uint64_t size, const char* backend, int32_t device,
                kd_allocation* out) {
  if (client == nullptr) return Invalid("client is NULL");
  if (out == nullptr) return Invalid("out is NULL");
  *out = kd_allocation{};
  absl::StatusOr<v1::AllocateBufferResponse> response =
      client->client->AllocateBufferRaw(size, backend == nullptr ? "" : backend, device);
  if (!response.ok()) return Fail(response.status());
  out->buffer_id = response->buffer_id();
  out->size = response->size();
  if (response->handle_case() == v1::AllocateBufferResponse::kShmName) {
    if (response->shm_name().size() >= sizeof(out->shm_name)) {
      client->client->ReleaseBuffer(response->buffer_id()).IgnoreError();
      *out = kd_allocation{};
      return Fail(absl::InternalError(absl::StrCat("the daemon's shm name \"", response->shm_name(),
                                                   "\" is longer than ", sizeof(out->shm_name) - 1,
                                                   " bytes")));
    }
    std::memcpy(out->shm_name, response->shm_name().data(), response->shm_name().size());
  } else {
    const v1::IpcMemHandle& ipc = response->ipc();
    out->ipc_kind = static_cast<int32_t>(ipc.kind());
    out->device = ipc.device();
    out->ipc_offset = ipc.offset();
    std::memcpy(out->ipc_handle, ipc.handle().data(),
                std::min<size_t>(ipc.handle().size(), KD_IPC_HANDLE_BYTES));
  }
  return Ok();
}

int kd_allocate_shm(kd_client* client, uint64_t size, const char* backend, int32_t device,
                    kd_shm** out) {
  if (client == nullptr) return Invalid("client is NULL");
  if (out == nullptr) return Invalid("out is NULL");
  *out = nullptr;
  absl::StatusOr<kd::client::ShmBuffer> buffer =
      client->client->AllocateBuffer(size, backend == nullptr ? "" : backend, device);
  if (!buffer.ok()) return Fail(buffer.status());
  *out = new kd_shm{*std::move(buffer)};
  return Ok();
}

int kd_release(kd_client* client, uint64_t buffer_id) {
  if (client == nullptr) return Invalid("client is NULL");
  return Fail(client->client->ReleaseBuffer(buffer_id));
}

int kd_release_shm(kd_client* client, kd_shm* shm) {
  if (client == nullptr) return Invalid("client is NULL");
  if (shm == nullptr) return Invalid("shm is NULL");
  return Fail(client->client->ReleaseBuffer(shm->buffer));
}

// kd_<name> of every op: the op as a batch of one.
#define KD_C_X_(name, Name, UPPER, number)                                                    \
  int kd_##name(kd_client* client, const kd_##name##_op* op, const kd_completion* completion, \
                double* kernel_seconds) {                                                     \
    if (op == nullptr) {                                                                      \
      if (kernel_seconds != nullptr) *kernel_seconds = 0.0;                                   \
      return Invalid(#name " op is NULL");                                                    \
    }                                                                                         \
    kd_op one = {};                                                                           \
    one.kind = KD_OP_##UPPER;                                                                 \
    one.u.name = *op;                                                                         \
    return SubmitOps(client, &one, 1, completion, kernel_seconds);                            \
  }
KD_OPS(KD_C_X_)
#undef KD_C_X_

int kd_submit(kd_client* client, const kd_op* ops, size_t count, const kd_completion* completion,
              double* kernel_seconds) {
  return SubmitOps(client, ops, count, completion, kernel_seconds);
}

}  // extern "C"
