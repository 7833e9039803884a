// The data plane: sessions, buffers and ops, as trainer processes call them.
#include <functional>
#include <memory>
#include <mutex>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "kerneld/kernels/client_string.h"
#include "kerneld/kernels/status_macros.h"
#include "server/host_memory.h"
#include "server/log.h"
#include "server/proto_convert.h"
#include "server/rpc_call.h"
#include "server/services.h"
#include "server/submit_ring_server.h"

namespace kd {
namespace {

// The OpenSession stream. It carries the session id in its first message and then stays open:
// when it ends for any reason (client cancel, client death, daemon shutdown) the session is
// closed, and when the session ends first (CloseSession, lease expiry) the stream is finished.
class SessionStream : public grpc::ServerWriteReactor<v1::SessionEvent> {
 public:
  SessionStream(Daemon* daemon, std::shared_ptr<Session> session, std::string backend)
      : daemon_(daemon), session_id_(session->id()), state_(std::make_shared<State>()) {
    state_->reactor = this;
    first_.set_session_id(session->id());
    first_.set_backend(std::move(backend));
    first_.set_lease_seconds(session->lease_seconds());
    session->SetEndHook(
        [state = state_](const std::string& reason) { End(state, reason, /*client_gone=*/false); });
    state_->write_in_flight = true;
    StartWrite(&first_);
  }

  void OnWriteDone(bool ok) override {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->write_in_flight = false;
      if (state_->finish_pending) {
        state_->finish_pending = false;
        finish = true;
      }
    }
    if (finish) {
      FinishWithReason();
    } else if (!ok) {
      End(state_, "the stream could not be written", /*client_gone=*/true);
    }
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->cancelled = true;
    }
    daemon_->sessions().Close(session_id_, "the client went away").IgnoreError();
    End(state_, "cancelled", /*client_gone=*/true);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->reactor = nullptr;
    }
    daemon_->sessions().Close(session_id_, "the session stream ended").IgnoreError();
    delete this;
  }

 private:
  struct State {
    std::mutex mu;
    SessionStream* reactor = nullptr;  // null once OnDone ran
    bool finished = false;
    bool cancelled = false;
    bool write_in_flight = false;
    bool finish_pending = false;
    std::string reason;  // why the daemon ended the session, sent in the last message
  };

  // Finishes the stream once, whichever side ends first. When the daemon ended the session
  // (CloseSession, lease expiry, shutdown) a last message carries the reason. OnDone cannot run
  // before Finish is called, and only the caller that flips `finished` calls it, so `r` stays
  // valid.
  static void End(const std::shared_ptr<State>& state, const std::string& reason,
                  bool client_gone) {
    SessionStream* r;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->reactor == nullptr || state->finished) return;
      state->finished = true;
      if (!client_gone && !state->cancelled) state->reason = reason;
      if (state->write_in_flight) {
        state->finish_pending = true;
        return;
      }
      r = state->reactor;
    }
    r->FinishWithReason();
  }

  void FinishWithReason() {
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      reason = state_->reason;
    }
    if (reason.empty()) {
      Finish(grpc::Status::OK);
      return;
    }
    last_.set_session_id(session_id_);
    last_.set_reason(std::move(reason));
    StartWriteAndFinish(&last_, grpc::WriteOptions(), grpc::Status::OK);
  }

  Daemon* const daemon_;
  const std::string session_id_;
  std::shared_ptr<State> state_;
  v1::SessionEvent first_;
  v1::SessionEvent last_;
};

// Who a buffer or ring request acts for, and the descriptor that came with it.
struct Caller {
  // The peer of the connection the request came on: exact on the fd socket; from the daemon's
  // PeerTable over gRPC (nullopt over TCP).
  std::optional<PeerCredentials> connection;
  bool fd_socket = false;
  UniqueFd fd;  // fd socket: the descriptor sent with the request
};

class DataPlaneService final : public v1::DataPlane::CallbackService {
 public:
  explicit DataPlaneService(Daemon* daemon) : daemon_(daemon) {}

  // One message of the fd socket (FdRequest), answered as the matching RPC would answer it.
  ConnectionAcceptor::FdReply HandleFd(const PeerCredentials& peer, absl::string_view bytes,
                                       UniqueFd fd, const absl::Status& unusable) {
    const absl::Time start = absl::Now();
    const char* method = "fd.Unknown";
    Caller caller;
    caller.connection = peer;
    caller.fd_socket = true;
    caller.fd = std::move(fd);
    v1::FdReply reply;
    ConnectionAcceptor::FdReply out;
    absl::Status status = unusable;
    v1::FdRequest request;
    if (status.ok() && !request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      status = absl::InvalidArgumentError(
          absl::StrCat("the ", bytes.size(), "-byte fd-socket message is not an FdRequest"));
    }
    if (status.ok()) {
      switch (request.call_case()) {
        case v1::FdRequest::kRegisterBuffer:
          method = "fd.RegisterBuffer";
          status = DoRegister(request.register_buffer(), reply.mutable_register_buffer(), caller);
          break;
        case v1::FdRequest::kAllocateBuffer:
          method = "fd.AllocateBuffer";
          status = DoAllocate(request.allocate_buffer(), reply.mutable_allocate_buffer(), caller,
                              &out.fd);
          break;
        case v1::FdRequest::kAttachSubmitRing:
          method = "fd.AttachSubmitRing";
          status = DoAttachRing(request.attach_submit_ring(), reply.mutable_attach_submit_ring(),
                                caller);
          break;
        case v1::FdRequest::CALL_NOT_SET:
          status = absl::InvalidArgumentError(
              "call is not set (one of register_buffer, allocate_buffer, attach_submit_ring)");
          break;
      }
    }
    if (!status.ok()) {
      reply.clear_response();
      out.fd.reset();
    }
    reply.set_code(static_cast<int>(status.code()));
    reply.set_message(std::string(status.message()));
    out.bytes = reply.SerializeAsString();
    daemon_->metrics().ObserveRpc(method, absl::StatusCodeToString(status.code()),
                                  absl::ToDoubleSeconds(absl::Now() - start));
    return out;
  }

  grpc::ServerWriteReactor<v1::SessionEvent>* OpenSession(
      grpc::CallbackServerContext* ctx, const v1::OpenSessionRequest* req) override {
    const auto start = absl::Now();
    auto fail = [&](const absl::Status& s) {
      daemon_->metrics().ObserveRpc("OpenSession", absl::StatusCodeToString(s.code()),
                                    absl::ToDoubleSeconds(absl::Now() - start));
      LogRequestOutcome("OpenSession", "", "", s);
      class Failed : public grpc::ServerWriteReactor<v1::SessionEvent> {
       public:
        explicit Failed(const absl::Status& s) { Finish(ToGrpcStatus(s)); }
        void OnDone() override { delete this; }
      };
      return new Failed(s);
    };
    if (daemon_->draining()) return fail(absl::UnavailableError("the daemon is draining"));
    absl::StatusOr<std::shared_ptr<Session>> session = daemon_->sessions().Open(
        req->client_name(), req->lease_seconds(), daemon_->peers().Find(ctx->peer()));
    if (!session.ok()) return fail(session.status());
    daemon_->metrics().ObserveRpc("OpenSession", "OK", absl::ToDoubleSeconds(absl::Now() - start));
    const absl::string_view tag = SessionTag((*session)->id());
    Log("session %.*s opened: %s client=\"%s\" lease=%us", static_cast<int>(tag.size()), tag.data(),
        PeerText((*session)->peer()).c_str(), OneLine((*session)->client_name()).c_str(),
        (*session)->lease_seconds());
    return new SessionStream(daemon_, *std::move(session),
                             std::string(daemon_->backends().Default()->name()));
  }

  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* ctx,
                                         const v1::CloseSessionRequest* req,
                                         v1::CloseSessionResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "CloseSession", ctx);
    call.set_session(&req->session_id());
    absl::StatusOr<uint32_t> released =
        daemon_->sessions().Close(req->session_id(), "closed by the client");
    if (!released.ok()) return call.Finish(released.status());
    resp->set_buffers_released(*released);
    return call.Finish(absl::OkStatus());
  }

  grpc::ServerUnaryReactor* RegisterBuffer(grpc::CallbackServerContext* ctx,
                                           const v1::RegisterBufferRequest* req,
                                           v1::RegisterBufferResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "RegisterBuffer", ctx);
    call.set_session(&req->session_id());
    Caller caller;
    caller.connection = daemon_->peers().Find(ctx->peer());
    return call.Finish(DoRegister(*req, resp, caller));
  }

  grpc::ServerUnaryReactor* AllocateBuffer(grpc::CallbackServerContext* ctx,
                                           const v1::AllocateBufferRequest* req,
                                           v1::AllocateBufferResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "AllocateBuffer", ctx);
    call.set_session(&req->session_id());
    Caller caller;
    return call.Finish(DoAllocate(*req, resp, caller, nullptr));
  }

  grpc::ServerUnaryReactor* ReleaseBuffer(grpc::CallbackServerContext* ctx,
                                          const v1::ReleaseBufferRequest* req,
                                          v1::ReleaseBufferResponse*) override {
    RpcCall call(&daemon_->metrics(), "ReleaseBuffer", ctx);
    call.set_session(&req->session_id());
    absl::StatusOr<std::shared_ptr<Session>> session = daemon_->sessions().Find(req->session_id());
    if (!session.ok()) return call.Finish(session.status());
    return call.Finish(daemon_->sessions().Release(**session, req->buffer_id()));
  }

  // The unary op RPCs: each is its op as a batch of one, unprefixed errors.
  grpc::ServerUnaryReactor* Quantize(grpc::CallbackServerContext* ctx,
                                     const v1::QuantizeRequest* req,
                                     v1::OpResponse* resp) override {
    return UnaryOp("Quantize", ctx, req, resp);
  }
  grpc::ServerUnaryReactor* Gemm(grpc::CallbackServerContext* ctx, const v1::GemmRequest* req,
                                 v1::OpResponse* resp) override {
    return UnaryOp("Gemm", ctx, req, resp);
  }
  grpc::ServerUnaryReactor* Pad(grpc::CallbackServerContext* ctx, const v1::PadRequest* req,
                                v1::OpResponse* resp) override {
    return UnaryOp("Pad", ctx, req, resp);
  }
  grpc::ServerUnaryReactor* Unpad(grpc::CallbackServerContext* ctx, const v1::UnpadRequest* req,
                                  v1::OpResponse* resp) override {
    return UnaryOp("Unpad", ctx, req, resp);
  }

  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* ctx, const v1::SubmitRequest* req,
                                   v1::SubmitResponse* resp) override {
    return RunOps(RpcCall(&daemon_->metrics(), "Submit", ctx), req->session_id(), req->completion(),
                  req->ops_size(), /*batched=*/true, BuildBatch(req),
                  [resp](double s) { resp->set_kernel_seconds(s); });
  }

  grpc::ServerUnaryReactor* AttachSubmitRing(grpc::CallbackServerContext* ctx,
                                             const v1::AttachSubmitRingRequest* req,
                                             v1::AttachSubmitRingResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "AttachSubmitRing", ctx);
    call.set_session(&req->session_id());
    Caller caller;
    caller.connection = daemon_->peers().Find(ctx->peer());
    return call.Finish(DoAttachRing(*req, resp, caller));
  }

 private:
  template <typename Request>
  grpc::ServerUnaryReactor* UnaryOp(const char* method, grpc::CallbackServerContext* ctx,
                                    const Request* req, v1::OpResponse* resp) {
    return RunOps(RpcCall(&daemon_->metrics(), method, ctx), req->session_id(), req->completion(),
                  1, /*batched=*/false,
                  BuildOne([req](OpBinder& b) { return b.BindOp(req->op()); }),
                  [resp](double s) { resp->set_kernel_seconds(s); });
  }

  using BuildFn = std::function<absl::Status(OpBinder&, std::vector<Op>&)>;
  using BuildRef = absl::FunctionRef<absl::Status(OpBinder&, std::vector<Op>&)>;

  // The build of a one-op request; `bind` runs before the call that made it returns.
  static BuildFn BuildOne(std::function<absl::StatusOr<Op>(OpBinder&)> bind) {
    return [bind = std::move(bind)](OpBinder& b, std::vector<Op>& ops) -> absl::Status {
      KD_ASSIGN_OR_RETURN(Op op, bind(b));
      ops.push_back(std::move(op));
      return absl::OkStatus();
    };
  }

  static BuildFn BuildBatch(const v1::SubmitRequest* req) {
    return [req](OpBinder& b, std::vector<Op>& ops) { return BindBatch(*req, b, ops); };
  }

  static absl::Status BindBatch(const v1::SubmitRequest& req, OpBinder& b, std::vector<Op>& ops) {
    for (int i = 0; i < req.ops_size(); ++i) {
      absl::StatusOr<Op> op = b.Any(req.ops(i));
      if (!op.ok()) return PrefixStatus(OpPrefix(i, req.ops(i)), op.status());
      ops.push_back(*std::move(op));
    }
    return absl::OkStatus();
  }

  static absl::Status BindOne(absl::StatusOr<Op> op, std::vector<Op>& ops) {
    if (!op.ok()) return op.status();
    ops.push_back(*std::move(op));
    return absl::OkStatus();
  }

  // The ops of a ring request, bound as the matching unary RPC binds them.
  static absl::Status BindRing(const v1::RingRequest& r, OpBinder& b, std::vector<Op>& ops) {
    switch (r.call_case()) {
      case v1::RingRequest::kQuantize:
        return BindOne(b.BindOp(r.quantize().op()), ops);
      case v1::RingRequest::kGemm:
        return BindOne(b.BindOp(r.gemm().op()), ops);
      case v1::RingRequest::kPad:
        return BindOne(b.BindOp(r.pad().op()), ops);
      case v1::RingRequest::kUnpad:
        return BindOne(b.BindOp(r.unpad().op()), ops);
      case v1::RingRequest::kSubmit:
        return BindBatch(r.submit(), b, ops);
      case v1::RingRequest::CALL_NOT_SET:
        break;
    }
    return absl::OkStatus();  // not reached: RunRing answers CALL_NOT_SET itself
  }

  // The session a buffer or ring request names: on the fd socket only one opened by a peer of
  // the same user (any other is NOT_FOUND, as an unknown session is).
  absl::StatusOr<std::shared_ptr<Session>> FindSession(const std::string& session_id,
                                                       const Caller& caller) {
    if (caller.fd_socket) return daemon_->sessions().FindForUid(session_id, caller.connection->uid);
    return daemon_->sessions().Find(session_id);
  }

  // Host memory for `session` as `handle` (its fd set): the descriptor that came with an
  // fd-socket request (`attached_fd`), or the shm object `shm_name` when both the session's
  // peer and the calling connection's could open it. `opened` keeps a descriptor opened here.
  absl::Status HostMemory(const Session& session, const Caller& caller, bool attached_fd,
                          const std::string& shm_name, MemoryHandle& handle, UniqueFd& opened) {
    if (attached_fd) {
      if (!caller.fd_socket) {
        return absl::InvalidArgumentError(
            "attached_fd is set, but a descriptor can come only with a request on the fd socket "
            "(the data socket's path + \".fd\")");
      }
      if (!caller.fd.valid()) {
        return absl::InvalidArgumentError(
            "attached_fd is set but no descriptor came with the request");
      }
      handle.fd = caller.fd.get();
      return absl::OkStatus();
    }
    const std::optional<PeerCredentials>* peers[] = {&session.peer(), &caller.connection};
    KD_ASSIGN_OR_RETURN(opened, OpenShmForPeers(shm_name, peers));
    handle.fd = opened.get();
    handle.shm_name = shm_name;
    return absl::OkStatus();
  }

  absl::Status DoAttachRing(const v1::AttachSubmitRingRequest& req,
                            v1::AttachSubmitRingResponse* resp, const Caller& caller) {
    if (daemon_->draining()) return absl::UnavailableError("the daemon is draining");
    if (!daemon_->options().submit_rings) {
      return absl::FailedPreconditionError(
          "submit rings are disabled on this daemon (--submit_rings=false); use the unary calls");
    }
    KD_ASSIGN_OR_RETURN(std::shared_ptr<Session> session, FindSession(req.session_id(), caller));
    if (session->HasAttachment(kSubmitRingAttachment)) {
      return absl::AlreadyExistsError(absl::StrCat("session_id=\"", EchoClientString(session->id()),
                                                   "\" already has a submit ring"));
    }
    // The ring is client memory like a registered buffer: the CPU backend (always present) maps
    // it, checks its size, and watches it for truncation.
    MemoryHandle handle;
    handle.size = req.size();
    UniqueFd opened;
    KD_RETURN_IF_ERROR(
        HostMemory(*session, caller, req.attached_fd(), req.shm_name(), handle, opened));
    KD_ASSIGN_OR_RETURN(std::unique_ptr<Region> region,
                        daemon_->backends().Get(BackendKind::kCpu)->Import(handle));
    KD_ASSIGN_OR_RETURN(
        std::unique_ptr<SubmitRingServer> ring,
        SubmitRingServer::Open(
            std::move(region), daemon_->options().ring_spin,
            [this, id = session->id()](const v1::RingRequest& r, SubmitRingServer::ReplyFn reply) {
              RunRing(id, r, std::move(reply));
            }));
    resp->set_slots(ring->slots());
    resp->set_slot_bytes(ring->slot_bytes());
    return session->Attach(kSubmitRingAttachment, std::move(ring));
  }

  // One request taken from a session's submit ring, run as the matching unary RPC runs it. The
  // ring's thread may block on it: a SYNC batch that finds its queue idle runs right here.
  void RunRing(const std::string& session_id, const v1::RingRequest& r,
               SubmitRingServer::ReplyFn reply) {
    const absl::Time start = absl::Now();
    const char* method = nullptr;
    const v1::Completion* completion = nullptr;
    int op_count = 1;
    bool batched = false;
    switch (r.call_case()) {
      case v1::RingRequest::kQuantize:
        method = "ring.Quantize";
        completion = &r.quantize().completion();
        break;
      case v1::RingRequest::kGemm:
        method = "ring.Gemm";
        completion = &r.gemm().completion();
        break;
      case v1::RingRequest::kPad:
        method = "ring.Pad";
        completion = &r.pad().completion();
        break;
      case v1::RingRequest::kUnpad:
        method = "ring.Unpad";
        completion = &r.unpad().completion();
        break;
      case v1::RingRequest::kSubmit:
        method = "ring.Submit";
        completion = &r.submit().completion();
        op_count = r.submit().ops_size();
        batched = true;
        break;
      case v1::RingRequest::CALL_NOT_SET:
        reply(absl::InvalidArgumentError(
                  "call is not set (one of quantize, gemm, pad, unpad, submit)"),
              0.0);
        return;
    }
    StartOps(
        start, session_id, *completion, op_count, batched, /*caller_may_block=*/true,
        [&r](OpBinder& b, std::vector<Op>& ops) { return BindRing(r, b, ops); },
        [metrics = &daemon_->metrics(), method, start, session = session_id,
         reply = std::move(reply)](const absl::Status& status, double seconds) {
          metrics->ObserveRpc(method, absl::StatusCodeToString(status.code()),
                              absl::ToDoubleSeconds(absl::Now() - start));
          LogRequestOutcome(method, session, "", status);
          reply(status, seconds);
        });
  }

  // "ops[i].<op>." for errors, the op named by its case of kerneld.v1.Op's `kind` (the name of
  // its OpTraits, proto_convert_test checks); "ops[i]." when no case is set.
  static std::string OpPrefix(int i, const v1::Op& op) {
    static const google::protobuf::OneofDescriptor* const kKind =
        v1::Op::descriptor()->FindOneofByName("kind");
    const google::protobuf::FieldDescriptor* kind =
        op.GetReflection()->GetOneofFieldDescriptor(op, kKind);
    return kind != nullptr ? absl::StrCat("ops[", i, "].", kind->name(), ".")
                           : absl::StrCat("ops[", i, "].");
  }

  absl::Status DoRegister(const v1::RegisterBufferRequest& req, v1::RegisterBufferResponse* resp,
                          const Caller& caller) {
    if (daemon_->draining()) return absl::UnavailableError("the daemon is draining");
    KD_ASSIGN_OR_RETURN(std::shared_ptr<Session> session, FindSession(req.session_id(), caller));
    MemoryHandle handle;
    handle.size = req.size();
    UniqueFd opened;
    Backend* backend = nullptr;
    switch (req.source_case()) {
      case v1::RegisterBufferRequest::kShmName:
      case v1::RegisterBufferRequest::kAttachedFd:
        backend = daemon_->backends().Get(BackendKind::kCpu);
        KD_RETURN_IF_ERROR(
            HostMemory(*session, caller, req.has_attached_fd(), req.shm_name(), handle, opened));
        break;
      case v1::RegisterBufferRequest::kIpc: {
        const v1::IpcMemHandle& ipc = req.ipc();
        if (ipc.kind() != v1::IpcMemHandle::CUDA && ipc.kind() != v1::IpcMemHandle::HIP) {
          return absl::InvalidArgumentError(
              absl::StrCat("ipc.kind=", ipc.kind(), " must be CUDA or HIP"));
        }
        const BackendKind kind =
            ipc.kind() == v1::IpcMemHandle::CUDA ? BackendKind::kCuda : BackendKind::kHip;
        backend = daemon_->backends().Get(kind);
        if (backend == nullptr) {
          return absl::FailedPreconditionError(absl::StrCat("ipc.kind=", BackendName(kind),
                                                            " but this daemon has no ",
                                                            BackendName(kind), " backend"));
        }
        if (ipc.device() < 0 || ipc.device() >= backend->DeviceCount()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ipc.device=", ipc.device(), " must be in [0, ", backend->DeviceCount(), ")"));
        }
        handle.ipc_handle = ipc.handle();
        handle.offset = ipc.offset();
        handle.device = ipc.device();
        break;
      }
      case v1::RegisterBufferRequest::SOURCE_NOT_SET:
        return absl::InvalidArgumentError(
            "source is not set (one of shm_name, ipc, attached_fd on the fd socket)");
    }
    KD_ASSIGN_OR_RETURN(BufferEntry entry,
                        daemon_->sessions().Register(*session, *backend, handle));
    resp->set_buffer_id(entry.id);
    resp->set_size(entry.region->size());
    resp->set_backend(std::string(backend->name()));
    resp->set_device(entry.region->loc().device);
    return absl::OkStatus();
  }

  // `fd_out`: where the descriptor of host pool memory goes (the fd socket); null over gRPC,
  // where nobody can be handed one and the buffer is usable by id only.
  absl::Status DoAllocate(const v1::AllocateBufferRequest& req, v1::AllocateBufferResponse* resp,
                          const Caller& caller, UniqueFd* fd_out) {
    if (daemon_->draining()) return absl::UnavailableError("the daemon is draining");
    KD_ASSIGN_OR_RETURN(std::shared_ptr<Session> session, FindSession(req.session_id(), caller));
    Backend* backend = req.backend().empty() ? daemon_->backends().Default()
                                             : daemon_->backends().GetByName(req.backend());
    if (backend == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("backend=\"", EchoClientString(req.backend()),
                                                     "\" is not a backend of this daemon"));
    }
    if (req.device() < 0 || req.device() >= backend->DeviceCount()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device=", req.device(), " must be in [0, ", backend->DeviceCount(), ")"));
    }
    if (req.size() == 0) return absl::InvalidArgumentError("size=0 must be > 0");
    KD_ASSIGN_OR_RETURN(Allocation allocation,
                        daemon_->sessions().Allocate(*session, *backend, req.device(), req.size()));
    resp->set_buffer_id(allocation.entry.id);
    resp->set_size(allocation.entry.region->size());
    if (!allocation.handle.ipc_handle.empty()) {
      v1::IpcMemHandle* ipc = resp->mutable_ipc();
      ipc->set_kind(backend->kind() == BackendKind::kHip ? v1::IpcMemHandle::HIP
                                                         : v1::IpcMemHandle::CUDA);
      ipc->set_handle(allocation.handle.ipc_handle);
      ipc->set_offset(allocation.handle.offset);
      ipc->set_device(allocation.handle.device);
    } else if (allocation.fd.valid() && fd_out != nullptr) {
      *fd_out = std::move(allocation.fd);
      resp->set_attached_fd(true);
    }
    return absl::OkStatus();
  }

  // Opens (or reuses) an IPC event handle for the session.
  absl::StatusOr<std::shared_ptr<Event>> SessionEvent(Session& session, Backend& backend,
                                                      int device, const std::string& handle,
                                                      absl::string_view field) {
    if (std::shared_ptr<Event> cached = session.CachedEvent(handle)) return cached;
    absl::StatusOr<std::unique_ptr<Event>> event = backend.OpenEvent(device, handle);
    if (absl::IsUnimplemented(event.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat(field, " is set but the tensors are on the ", backend.name(),
                       " backend, which has no IPC events: ", event.status().message()));
    }
    if (!event.ok()) return PrefixStatus(absl::StrCat(field, ": "), event.status());
    std::shared_ptr<Event> shared = *std::move(event);
    session.CacheEvent(handle, shared);
    return shared;
  }

  grpc::ServerUnaryReactor* RunOps(RpcCall call, const std::string& session_id,
                                   const v1::Completion& completion, int op_count, bool batched,
                                   BuildFn build, std::function<void(double)> set_seconds) {
    call.set_session(&session_id);
    StartOps(
        call.start(), session_id, completion, op_count, batched, /*caller_may_block=*/false, build,
        [call, set_seconds = std::move(set_seconds)](const absl::Status& status, double seconds) {
          if (status.ok()) set_seconds(seconds);
          call.Finish(status);
        });
    return call.reactor();
  }

  // Validates and builds the ops of one request and hands them to the executor; `finish` is
  // called exactly once, with the request's status and kernel time, on this thread (an error
  // found before anything runs) or on the thread that completes the batch.
  using FinishFn = std::function<void(const absl::Status& status, double kernel_seconds)>;
  // `start` is when the request arrived: the admit phase runs from it to the hand-off.
  void StartOps(absl::Time start, const std::string& session_id, const v1::Completion& completion,
                int op_count, bool batched, bool caller_may_block, BuildRef build,
                FinishFn finish) {
    auto fail = [&finish](const absl::Status& s) { finish(s, 0.0); };
    if (daemon_->draining()) return fail(absl::UnavailableError("the daemon is draining"));
    if (op_count > static_cast<int>(daemon_->options().max_batch_ops)) {
      return fail(absl::ResourceExhaustedError(absl::StrCat(
          "ops has ", op_count,
          " entries; the limit is --max_batch_ops=", daemon_->options().max_batch_ops)));
    }
    absl::StatusOr<std::shared_ptr<Session>> session = daemon_->sessions().Find(session_id);
    if (!session.ok()) return fail(session.status());
    OpBinder binder(**session);
    // The bound ops before validation. Kept per thread and cleared here, so that a request
    // allocates only its ExecBatch's list; nothing reads it after the loop below.
    thread_local std::vector<Op> ops;
    ops.clear();
    absl::Status s = build(binder, ops);
    if (!s.ok()) return fail(s);
    ExecBatch batch;
    batch.ops.reserve(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const absl::string_view name = OpName(ops[i]);
      absl::StatusOr<ValidatedOp> op = Validate(std::move(ops[i]));
      s = op.ok() ? binder.backend()->Supports(*op) : op.status();
      if (!s.ok()) {
        if (!batched) return fail(s);
        return fail(PrefixStatus(absl::StrCat("ops[", i, "].", name, "."), s));
      }
      batch.ops.push_back(*std::move(op));
    }
    if (completion.mode() < 0 || completion.mode() > v1::Completion::Mode_MAX) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("completion.mode=", completion.mode(), " is not a known value")));
    }
    if (batch.ops.empty()) return finish(absl::OkStatus(), 0.0);  // a round trip
    batch.batched = batched;
    batch.backend = binder.backend();
    batch.device = binder.device();
    batch.async = completion.mode() == v1::Completion::ASYNC;
    batch.session_id = session_id;
    if (batch.async && completion.signal_event().empty()) {
      return fail(
          absl::InvalidArgumentError("completion.signal_event is required with ASYNC completion"));
    }
    if (!completion.wait_event().empty()) {
      absl::StatusOr<std::shared_ptr<Event>> e =
          SessionEvent(**session, *batch.backend, batch.device, completion.wait_event(),
                       "completion.wait_event");
      if (!e.ok()) return fail(e.status());
      batch.wait_event = *std::move(e);
    }
    if (!completion.signal_event().empty()) {
      absl::StatusOr<std::shared_ptr<Event>> e =
          SessionEvent(**session, *batch.backend, batch.device, completion.signal_event(),
                       "completion.signal_event");
      if (!e.ok()) return fail(e.status());
      batch.signal_event = *std::move(e);
    }
    batch.keep_alive = binder.TakeRegions();
    batch.caller_may_block = caller_may_block;
    batch.done = std::move(finish);
    batch.received = start;  // the executor records the admit phase after the launch
    daemon_->executor().Submit(std::move(batch));
  }

  Daemon* const daemon_;
};

}  // namespace

DataPlane MakeDataPlane(Daemon* daemon) {
  auto service = std::make_unique<DataPlaneService>(daemon);
  DataPlane plane;
  plane.fd_handler = [s = service.get()](const PeerCredentials& peer, absl::string_view bytes,
                                         UniqueFd fd, const absl::Status& unusable) {
    return s->HandleFd(peer, bytes, std::move(fd), unusable);
  };
  plane.service = std::move(service);
  return plane;
}

}  // namespace kd
