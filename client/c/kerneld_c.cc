// The C ABI (include/kerneld/c/kerneld.h) over the C++ client: every call converts its plain C
// arguments to the client's types, calls the public kd::client::Client method, and turns the
// absl::Status into a code plus the calling thread's last-error message.
#include <algorithm>
#include <cstring>
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

absl::Status ToProto(const kd_quantize_op& c, v1::QuantizeOp* op) {
  KD_C_RETURN_IF_ERROR(ToRef(c.input, "input", op->mutable_input()));
  KD_C_RETURN_IF_ERROR(ToRef(c.output, "output", op->mutable_output()));
  KD_C_RETURN_IF_ERROR(ToRef(c.scales, "scales", op->mutable_scales()));
  op->set_granularity(static_cast<v1::QuantGranularity>(c.granularity));
  op->set_transpose_output(c.transpose_output != 0);
  op->set_scale_format(static_cast<v1::ScaleFormat>(c.scale_format));
  op->set_scale_layout(static_cast<v1::ScaleLayout>(c.scale_layout));
  op->set_eps(c.eps);
  op->set_mx_rounding(static_cast<v1::MxRounding>(c.mx_rounding));
  KD_C_RETURN_IF_ERROR(
      ToOptionalRef(c.output_t, "output_t", [op] { return op->mutable_output_t(); }));
  KD_C_RETURN_IF_ERROR(
      ToOptionalRef(c.scales_t, "scales_t", [op] { return op->mutable_scales_t(); }));
  return ToOptionalRef(c.group_ends, "group_ends", [op] { return op->mutable_group_ends(); });
}

absl::Status ToProto(const kd_gemm_op& c, v1::GemmOp* op) {
  op->set_variant(static_cast<v1::GemmVariant>(c.variant));
  op->set_accumulate(c.accumulate != 0);
  KD_C_RETURN_IF_ERROR(ToRef(c.a, "a", op->mutable_a()));
  KD_C_RETURN_IF_ERROR(ToRef(c.a_scales, "a_scales", op->mutable_a_scales()));
  KD_C_RETURN_IF_ERROR(ToRef(c.b, "b", op->mutable_b()));
  KD_C_RETURN_IF_ERROR(ToRef(c.b_scales, "b_scales", op->mutable_b_scales()));
  KD_C_RETURN_IF_ERROR(ToRef(c.d, "d", op->mutable_d()));
  return ToOptionalRef(c.group_ends, "group_ends", [op] { return op->mutable_group_ends(); });
}

absl::Status ToProto(const kd_pad_op& c, v1::PadOp* op) {
  KD_C_RETURN_IF_ERROR(ToRef(c.input, "input", op->mutable_input()));
  KD_C_RETURN_IF_ERROR(ToRef(c.group_ends, "group_ends", op->mutable_group_ends()));
  KD_C_RETURN_IF_ERROR(ToRef(c.output, "output", op->mutable_output()));
  KD_C_RETURN_IF_ERROR(
      ToRef(c.padded_group_ends, "padded_group_ends", op->mutable_padded_group_ends()));
  op->set_alignment(c.alignment);
  return absl::OkStatus();
}

absl::Status ToProto(const kd_unpad_op& c, v1::UnpadOp* op) {
  KD_C_RETURN_IF_ERROR(ToRef(c.input, "input", op->mutable_input()));
  KD_C_RETURN_IF_ERROR(ToRef(c.group_ends, "group_ends", op->mutable_group_ends()));
  KD_C_RETURN_IF_ERROR(ToRef(c.output, "output", op->mutable_output()));
  op->set_alignment(c.alignment);
  return absl::OkStatus();
}

absl::Status ToProto(const kd_op& c, v1::Op* op) {
  switch (c.kind) {
    case KD_OP_QUANTIZE:
      return ToProto(c.u.quantize, op->mutable_quantize());
    case KD_OP_GEMM:
      return ToProto(c.u.gemm, op->mutable_gemm());
    case KD_OP_PAD:
      return ToProto(c.u.pad, op->mutable_pad());
    case KD_OP_UNPAD:
      return ToProto(c.u.unpad, op->mutable_unpad());
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("kind=", c.kind, " is not an op kind (1 quantize, 2 gemm, 3 pad, 4 unpad)"));
  }
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

// The single-op calls: checks, conversion, the client call.
template <typename COp, typename ProtoOp, typename Call>
int RunOne(kd_client* client, const COp* op, const char* name, const kd_completion* completion,
           double* kernel_seconds, Call call) {
  if (kernel_seconds != nullptr) *kernel_seconds = 0.0;
  if (client == nullptr) return Invalid("client is NULL");
  if (op == nullptr) return Invalid(absl::StrCat(name, " op is NULL"));
  ProtoOp proto;
  if (absl::Status s = ToProto(*op, &proto); !s.ok()) return Fail(s);
  v1::Completion c;
  if (absl::Status s = ToProto(completion, &c); !s.ok()) return Fail(s);
  return Finish(call(*client->client, proto, c), kernel_seconds);
}

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
                {"kd_quantize_op", sizeof(kd_quantize_op)},
                {"kd_gemm_op", sizeof(kd_gemm_op)},
                {"kd_pad_op", sizeof(kd_pad_op)},
                {"kd_unpad_op", sizeof(kd_unpad_op)},
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

int kd_quantize(kd_client* client, const kd_quantize_op* op, const kd_completion* completion,
                double* kernel_seconds) {
  return RunOne<kd_quantize_op, v1::QuantizeOp>(
      client, op, "quantize", completion, kernel_seconds,
      [](kd::client::Client& c, const v1::QuantizeOp& p, const v1::Completion& done) {
        return c.Quantize(p, done);
      });
}

int kd_gemm(kd_client* client, const kd_gemm_op* op, const kd_completion* completion,
            double* kernel_seconds) {
  return RunOne<kd_gemm_op, v1::GemmOp>(client, op, "gemm", completion, kernel_seconds,
                                        [](kd::client::Client& c, const v1::GemmOp& p,
                                           const v1::Completion& done) { return c.Gemm(p, done); });
}

int kd_pad(kd_client* client, const kd_pad_op* op, const kd_completion* completion,
           double* kernel_seconds) {
  return RunOne<kd_pad_op, v1::PadOp>(client, op, "pad", completion, kernel_seconds,
                                      [](kd::client::Client& c, const v1::PadOp& p,
                                         const v1::Completion& done) { return c.Pad(p, done); });
}

int kd_unpad(kd_client* client, const kd_unpad_op* op, const kd_completion* completion,
             double* kernel_seconds) {
  return RunOne<kd_unpad_op, v1::UnpadOp>(
      client, op, "unpad", completion, kernel_seconds,
      [](kd::client::Client& c, const v1::UnpadOp& p, const v1::Completion& done) {
        return c.Unpad(p, done);
      });
}

int kd_submit(kd_client* client, const kd_op* ops, size_t count, const kd_completion* completion,
              double* kernel_seconds) {
  if (kernel_seconds != nullptr) *kernel_seconds = 0.0;
  if (client == nullptr) return Invalid("client is NULL");
  if (ops == nullptr && count > 0) return Invalid(absl::StrCat("ops is NULL with count=", count));
  std::vector<v1::Op> batch(count);
  for (size_t i = 0; i < count; ++i) {
    if (absl::Status s = ToProto(ops[i], &batch[i]); !s.ok()) {
      const char* kind = ops[i].kind == KD_OP_QUANTIZE ? "quantize."
                         : ops[i].kind == KD_OP_GEMM   ? "gemm."
                         : ops[i].kind == KD_OP_PAD    ? "pad."
                         : ops[i].kind == KD_OP_UNPAD  ? "unpad."
                                                       : "";
      return Fail(absl::Status(s.code(), absl::StrCat("ops[", i, "].", kind, s.message())));
    }
  }
  v1::Completion c;
  if (absl::Status s = ToProto(completion, &c); !s.ok()) return Fail(s);
  return Finish(client->client->Submit(batch, c), kernel_seconds);
}

}  // extern "C"
