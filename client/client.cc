#include "kerneld/client/client.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <unistd.h>

#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/channel.h"
#include "client/fd_channel.h"
#include "client/submit_ring_client.h"
#include "kerneld/client/status.h"

namespace kd {
namespace client {

std::string NormalizeTarget(absl::string_view target) {
  if (target.empty()) return absl::StrCat("unix:", kDefaultDataSocket);
  for (absl::string_view scheme : {"unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(target, scheme)) return std::string(target);
  }
  if (absl::StrContains(target, "://")) return std::string(target);
  return absl::StrCat("unix:", target);
}

// The open OpenSession stream. A background thread reads it: first the message with the
// session id, then (normally nothing until) the last message with the reason the session
// ended, then the final status.
class Client::SessionStream {
 public:
  SessionStream(v1::DataPlane::Stub* stub, const v1::OpenSessionRequest& request)
      : reader_(stub->OpenSession(&context_, request)), thread_([this] { ReadLoop(); }) {}

  // Cancels the stream (ending the session on the daemon side) and joins the reader.
  ~SessionStream() {
    context_.TryCancel();
    thread_.join();
  }

  // The first message, or the status the stream ended with before sending one.
  absl::StatusOr<v1::SessionEvent> WaitFirst(absl::Duration timeout) {
    if (!first_.WaitForNotificationWithTimeout(timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("kerneld sent no session id within ", absl::FormatDuration(timeout)));
    }
    absl::MutexLock lock(&mu_);
    if (have_first_) return first_event_;
    if (final_status_.ok()) return absl::InternalError("the session stream ended without an id");
    return final_status_;
  }

  // OK while the stream is open. A stream the daemon finished normally (CloseSession, lease
  // expiry) means the session is gone: NOT_FOUND, as the daemon answers for it. Otherwise the
  // stream's own status (UNAVAILABLE when the daemon went away, CANCELLED...).
  absl::Status Status(const std::string& id) const {
    absl::MutexLock lock(&mu_);
    if (!finished_) return absl::OkStatus();
    const std::string reason = end_reason_.empty() ? std::string() : ": " + end_reason_;
    if (final_status_.ok())
      return absl::NotFoundError(absl::StrCat("session ", id, " ended", reason));
    return absl::Status(final_status_.code(), absl::StrCat("session ", id, " ended", reason, " (",
                                                           final_status_.message(), ")"));
  }

  // Filled from the first message by OpenSession.
  std::string id;
  std::string backend;
  uint32_t lease_seconds = 0;

 private:
  void ReadLoop() {
    v1::SessionEvent event;
    const bool got_first = reader_->Read(&event);
    if (got_first) {
      {
        absl::MutexLock lock(&mu_);
        first_event_ = event;
        have_first_ = true;
      }
      first_.Notify();
      while (reader_->Read(&event)) {
        if (!event.reason().empty()) {
          absl::MutexLock lock(&mu_);
          end_reason_ = event.reason();
        }
      }
    }
    absl::Status status = FromGrpcStatus(reader_->Finish());
    {
      absl::MutexLock lock(&mu_);
      final_status_ = std::move(status);
      finished_ = true;
    }
    if (!got_first) first_.Notify();
  }

  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> reader_;
  absl::Notification first_;
  mutable absl::Mutex mu_;
  v1::SessionEvent first_event_ ABSL_GUARDED_BY(mu_);
  bool have_first_ ABSL_GUARDED_BY(mu_) = false;
  std::string end_reason_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  // Last: the reader thread starts once every member it uses is constructed.
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(absl::string_view target,
                                                        const ClientOptions& options) {
  std::string normalized = NormalizeTarget(target);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      internal::ConnectChannel(normalized, options.connect_timeout, options.channel_tag);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<Client>(new Client(std::move(normalized), options, *std::move(channel)));
}

Client::Client(std::string target, const ClientOptions& options,
               std::shared_ptr<grpc::Channel> channel)
    : target_(std::move(target)),
      options_(options),
      channel_(std::move(channel)),
      stub_(v1::DataPlane::NewStub(channel_)),
      fd_channel_(std::make_unique<internal::FdChannel>(internal::FdSocketPathFor(target_))) {}

absl::StatusOr<v1::FdReply> Client::CallFd(const v1::FdRequest& request, int fd, int* fd_out) {
  absl::StatusOr<internal::FdChannel::Result> result =
      fd_channel_->Call(request, fd, options_.control_timeout);
  if (!result.ok()) return result.status();
  if (fd_out != nullptr) {
    *fd_out = result->fd;
  } else if (result->fd >= 0) {
    close(result->fd);
  }
  return std::move(result->reply);
}

Client::~Client() = default;

absl::Status Client::AttachSubmitRing(const SubmitRingOptions& ring_options) {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  if (ring_ != nullptr) return absl::FailedPreconditionError("a submit ring is already attached");
  absl::StatusOr<std::unique_ptr<internal::SubmitRingClient>> ring =
      internal::SubmitRingClient::Create(ring_options);
  if (!ring.ok()) return ring.status();
  v1::FdRequest request;
  v1::AttachSubmitRingRequest* attach = request.mutable_attach_submit_ring();
  attach->set_session_id(session_->id);
  attach->set_attached_fd(true);
  attach->set_size((*ring)->shm().size());
  absl::StatusOr<v1::FdReply> reply = CallFd(request, (*ring)->shm().fd());
  if (!reply.ok()) return reply.status();
  // A named ring's name is not needed any more: none is left behind if this process dies.
  (*ring)->shm().Unlink().IgnoreError();
  ring_ = *std::move(ring);
  return absl::OkStatus();
}

Client::SubmitRingCounts Client::submit_ring_counts() const {
  SubmitRingCounts counts;
  if (ring_ != nullptr) {
    counts.ring_calls = ring_->ring_calls();
    counts.fallbacks = ring_->fallbacks();
  }
  return counts;
}

std::optional<absl::StatusOr<OpResult>> Client::TryRing(const v1::RingRequest& request) {
  if (ring_ == nullptr) return std::nullopt;
  std::optional<absl::StatusOr<double>> r =
      ring_->Call(request, absl::Now() + options_.op_timeout, [this] { return SessionStatus(); });
  if (!r) return std::nullopt;
  if (!r->ok()) return absl::StatusOr<OpResult>(r->status());
  OpResult result;
  result.kernel_seconds = **r;
  return absl::StatusOr<OpResult>(result);
}

absl::Status Client::OpenSession(absl::string_view client_name, uint32_t lease_seconds) {
  if (session_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", session_->id, " is already open; close it first"));
  }
  v1::OpenSessionRequest request;
  request.set_client_name(std::string(client_name));
  request.set_lease_seconds(lease_seconds);
  auto stream = std::make_unique<SessionStream>(stub_.get(), request);
  absl::StatusOr<v1::SessionEvent> first = stream->WaitFirst(options_.connect_timeout);
  if (!first.ok()) return first.status();
  if (first->session_id().empty()) {
    return absl::InternalError("kerneld's first session message carries no session_id");
  }
  stream->id = first->session_id();
  stream->backend = first->backend();
  stream->lease_seconds = first->lease_seconds();
  session_ = std::move(stream);
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Client::CloseSession() {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::CloseSessionRequest request;
  request.set_session_id(session_->id);
  v1::CloseSessionResponse response;
  grpc::ClientContext context;
  internal::SetTimeout(context, options_.control_timeout);
  const grpc::Status status = stub_->CloseSession(&context, request, &response);
  ring_.reset();
  session_.reset();
  if (!status.ok()) return FromGrpcStatus(status);
  return response.buffers_released();
}

const std::string& Client::session_id() const {
  static const std::string* const kEmpty = new std::string;
  return session_ ? session_->id : *kEmpty;
}

const std::string& Client::backend() const {
  static const std::string* const kEmpty = new std::string;
  return session_ ? session_->backend : *kEmpty;
}

uint32_t Client::lease_seconds() const { return session_ ? session_->lease_seconds : 0; }

absl::Status Client::SessionStatus() const {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  return session_->Status(session_->id);
}

absl::Status Client::RequireSession() const {
  if (session_ == nullptr) {
    return absl::FailedPreconditionError("no open session: call OpenSession first");
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RegisterBufferResponse> Client::RegisterShm(absl::string_view shm_name,
                                                               uint64_t size) {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::RegisterBufferRequest request;
  request.set_session_id(session_->id);
  request.set_shm_name(std::string(shm_name));
  request.set_size(size);
  v1::RegisterBufferResponse response;
  grpc::ClientContext context;
  internal::SetTimeout(context, options_.control_timeout);
  const grpc::Status status = stub_->RegisterBuffer(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<uint64_t> Client::RegisterBuffer(ShmBuffer& buffer) {
  if (!buffer.valid()) return absl::InvalidArgumentError("buffer is not mapped");
  if (buffer.buffer_id() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("buffer ", buffer.name().empty() ? "(memfd)" : buffer.name(),
                     " is already registered as id ", buffer.buffer_id()));
  }
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::FdRequest request;
  v1::RegisterBufferRequest* registration = request.mutable_register_buffer();
  registration->set_session_id(session_->id);
  registration->set_attached_fd(true);
  registration->set_size(buffer.size());
  absl::StatusOr<v1::FdReply> reply = CallFd(request, buffer.fd());
  if (!reply.ok()) return reply.status();
  const uint64_t id = reply->register_buffer().buffer_id();
  buffer.set_buffer_id(id);
  if (options_.unlink_after_register) {
    // The registration stands either way; a name that could not be removed is only what
    // unlink_after_register exists to avoid, and destruction tries again.
    buffer.Unlink().IgnoreError();
  }
  return id;
}

absl::StatusOr<v1::AllocateBufferResponse> Client::AllocateBufferRaw(uint64_t size,
                                                                     absl::string_view backend,
                                                                     int device) {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::AllocateBufferRequest request;
  request.set_session_id(session_->id);
  request.set_size(size);
  request.set_backend(std::string(backend));
  request.set_device(device);
  v1::AllocateBufferResponse response;
  grpc::ClientContext context;
  internal::SetTimeout(context, options_.control_timeout);
  const grpc::Status status = stub_->AllocateBuffer(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<ShmBuffer> Client::AllocateBuffer(uint64_t size, absl::string_view backend,
                                                 int device) {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::FdRequest request;
  v1::AllocateBufferRequest* allocation = request.mutable_allocate_buffer();
  allocation->set_session_id(session_->id);
  allocation->set_size(size);
  allocation->set_backend(std::string(backend));
  allocation->set_device(device);
  int fd = -1;
  absl::StatusOr<v1::FdReply> reply = CallFd(request, -1, &fd);
  if (!reply.ok()) return reply.status();
  const v1::AllocateBufferResponse& response = reply->allocate_buffer();
  if (response.handle_case() != v1::AllocateBufferResponse::kAttachedFd || fd < 0) {
    if (fd >= 0) close(fd);
    // The daemon holds the allocation; hand it back rather than leak it until the session ends.
    ReleaseBuffer(response.buffer_id()).IgnoreError();
    if (response.handle_case() == v1::AllocateBufferResponse::kIpc) {
      return absl::UnimplementedError(
          "the daemon allocated device memory (an IPC handle), which is not host-mappable; use "
          "AllocateBufferRaw");
    }
    return absl::InternalError("the daemon's reply carries no descriptor of the memory");
  }
  absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Adopt(fd, response.size());
  if (!buffer.ok()) {
    ReleaseBuffer(response.buffer_id()).IgnoreError();
    return buffer.status();
  }
  buffer->set_buffer_id(response.buffer_id());
  return buffer;
}

absl::StatusOr<v1::RegisterBufferResponse> Client::RegisterIpc(const v1::IpcMemHandle& ipc,
                                                               uint64_t size) {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::RegisterBufferRequest request;
  request.set_session_id(session_->id);
  *request.mutable_ipc() = ipc;
  request.set_size(size);
  v1::RegisterBufferResponse response;
  grpc::ClientContext context;
  internal::SetTimeout(context, options_.control_timeout);
  const grpc::Status status = stub_->RegisterBuffer(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status Client::ReleaseBuffer(uint64_t buffer_id) {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::ReleaseBufferRequest request;
  request.set_session_id(session_->id);
  request.set_buffer_id(buffer_id);
  v1::ReleaseBufferResponse response;
  grpc::ClientContext context;
  internal::SetTimeout(context, options_.control_timeout);
  return FromGrpcStatus(stub_->ReleaseBuffer(&context, request, &response));
}

absl::Status Client::ReleaseBuffer(ShmBuffer& buffer) {
  if (buffer.buffer_id() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", buffer.name().empty() ? "(memfd)" : buffer.name(), " is not registered"));
  }
  absl::Status status = ReleaseBuffer(buffer.buffer_id());
  if (status.ok()) buffer.set_buffer_id(0);
  return status;
}

namespace {

// One unary op call: fills the session and completion, applies the op deadline, maps the reply.
template <typename Request, typename Response, typename Call>
absl::StatusOr<OpResult> CallOp(Request& request, const std::string& session_id,
                                const v1::Completion& completion, absl::Duration timeout,
                                Call call) {
  request.set_session_id(session_id);
  if (completion.ByteSizeLong() != 0) *request.mutable_completion() = completion;
  Response response;
  grpc::ClientContext context;
  internal::SetTimeout(context, timeout);
  const grpc::Status status = call(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  OpResult result;
  result.kernel_seconds = response.kernel_seconds();
  return result;
}

}  // namespace

template <typename Request, typename OpMessage, typename Rpc>
absl::StatusOr<OpResult> Client::CallUnaryOp(const OpMessage& op, const v1::Completion& completion,
                                             Request* (v1::RingRequest::*ring_case)(), Rpc rpc) {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::RingRequest call;  // through the ring, or its request over gRPC when the ring declines
  Request* request = (call.*ring_case)();
  *request->mutable_op() = op;
  if (completion.ByteSizeLong() != 0) *request->mutable_completion() = completion;
  if (auto result = TryRing(call)) return *std::move(result);
  return CallOp<Request, v1::OpResponse>(
      *request, session_->id, completion, options_.op_timeout,
      [this, rpc](grpc::ClientContext* c, const Request& r, v1::OpResponse* o) {
        return (stub_.get()->*rpc)(c, r, o);
      });
}

absl::StatusOr<OpResult> Client::Quantize(const v1::QuantizeOp& op,
                                          const v1::Completion& completion) {
  return CallUnaryOp(op, completion, &v1::RingRequest::mutable_quantize,
                     &v1::DataPlane::Stub::Quantize);
}

absl::StatusOr<OpResult> Client::Gemm(const v1::GemmOp& op, const v1::Completion& completion) {
  return CallUnaryOp(op, completion, &v1::RingRequest::mutable_gemm, &v1::DataPlane::Stub::Gemm);
}

absl::StatusOr<OpResult> Client::Pad(const v1::PadOp& op, const v1::Completion& completion) {
  return CallUnaryOp(op, completion, &v1::RingRequest::mutable_pad, &v1::DataPlane::Stub::Pad);
}

absl::StatusOr<OpResult> Client::Unpad(const v1::UnpadOp& op, const v1::Completion& completion) {
  return CallUnaryOp(op, completion, &v1::RingRequest::mutable_unpad, &v1::DataPlane::Stub::Unpad);
}

absl::StatusOr<OpResult> Client::Submit(absl::Span<const v1::Op> ops,
                                        const v1::Completion& completion) {
  if (absl::Status s = RequireSession(); !s.ok()) return s;
  v1::RingRequest call;  // through the ring, or its request over gRPC when the ring declines
  v1::SubmitRequest* request = call.mutable_submit();
  request->mutable_ops()->Reserve(static_cast<int>(ops.size()));
  for (const v1::Op& op : ops) *request->add_ops() = op;
  if (completion.ByteSizeLong() != 0) *request->mutable_completion() = completion;
  if (auto result = TryRing(call)) return *std::move(result);
  return CallOp<v1::SubmitRequest, v1::SubmitResponse>(
      *request, session_->id, completion, options_.op_timeout,
      [this](grpc::ClientContext* c, const v1::SubmitRequest& r, v1::SubmitResponse* o) {
        return stub_->Submit(c, r, o);
      });
}

v1::QuantizeOp MakeQuantizeOp(const v1::TensorRef& input, const v1::TensorRef& output,
                              const v1::TensorRef& scales, v1::QuantGranularity granularity) {
  v1::QuantizeOp op;
  *op.mutable_input() = input;
  *op.mutable_output() = output;
  *op.mutable_scales() = scales;
  op.set_granularity(granularity);
  return op;
}

v1::GemmOp MakeGemmNT(const v1::TensorRef& a, const v1::TensorRef& a_scales, const v1::TensorRef& b,
                      const v1::TensorRef& b_scales, const v1::TensorRef& d) {
  v1::GemmOp op;
  op.set_variant(v1::GEMM_NT);
  *op.mutable_a() = a;
  *op.mutable_a_scales() = a_scales;
  *op.mutable_b() = b;
  *op.mutable_b_scales() = b_scales;
  *op.mutable_d() = d;
  return op;
}

v1::PadOp MakePadOp(const v1::TensorRef& input, const v1::TensorRef& group_ends,
                    const v1::TensorRef& output, const v1::TensorRef& padded_group_ends,
                    int32_t alignment) {
  v1::PadOp op;
  *op.mutable_input() = input;
  *op.mutable_group_ends() = group_ends;
  *op.mutable_output() = output;
  *op.mutable_padded_group_ends() = padded_group_ends;
  op.set_alignment(alignment);
  return op;
}

v1::UnpadOp MakeUnpadOp(const v1::TensorRef& input, const v1::TensorRef& group_ends,
                        const v1::TensorRef& output, int32_t alignment) {
  v1::UnpadOp op;
  *op.mutable_input() = input;
  *op.mutable_group_ends() = group_ends;
  *op.mutable_output() = output;
  op.set_alignment(alignment);
  return op;
}

#define KD_CLIENT_AS_OP_(name, Name, UPPER, number) \
  v1::Op AsOp(const v1::Name##Op& op) {             \
    v1::Op result;                                  \
    *result.mutable_##name() = op;                  \
    return result;                                  \
  }
KD_OPS(KD_CLIENT_AS_OP_)
#undef KD_CLIENT_AS_OP_

}  // namespace client
}  // namespace kd
