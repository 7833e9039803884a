// The C++ client of kerneld's data plane: one connection, one session, and the calls a trainer
// process makes (register buffers, run ops).
//
//   absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect("/run/kerneld/kerneld.sock");
//   absl::Status s = (*client)->OpenSession("trainer-rank0");
//   absl::StatusOr<ShmBuffer> x = ShmBuffer::Create(bytes);
//   absl::StatusOr<uint64_t> id = (*client)->RegisterBuffer(*x);
//   absl::StatusOr<OpResult> r = (*client)->Quantize(MakeQuantizeOp(...));
//
// (checking each status; client/examples/pipeline_example.cc is a complete program).
//
// Every call returns absl::Status / absl::StatusOr with the daemon's canonical code and message
// (see the error table at the top of kerneld.proto); a deadline that passes gives
// DEADLINE_EXCEEDED, a daemon that is not there UNAVAILABLE.
#ifndef KERNELD_CLIENT_CLIENT_H_
#define KERNELD_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kerneld/client/shm_buffer.h"
#include "kerneld/op_table.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "kerneld/v1/kerneld.pb.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace kd {
namespace client {

namespace v1 = ::kerneld::v1;
namespace internal {
class FdChannel;
class SubmitRingClient;
}  // namespace internal

// The data socket the packaged daemon listens on (deploy/).
inline constexpr char kDefaultDataSocket[] = "/run/kerneld/kerneld.sock";

struct ClientOptions {
  // Connecting the channel, and waiting for the first message of a new session.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Session and buffer calls (CloseSession, RegisterBuffer, AllocateBuffer, ReleaseBuffer).
  absl::Duration control_timeout = absl::Seconds(10);
  // Ops: Quantize, Gemm, Pad, Unpad, Submit. A SYNC op replies after the kernel finished, so
  // this bounds queueing plus kernel time.
  absl::Duration op_timeout = absl::Seconds(60);
  // Unlink a named buffer's shm name as soon as the daemon registered it (RegisterBuffer). The
  // daemon has mapped it by then and both mappings stay valid, but no name is left behind in
  // /dev/shm if this process is killed before it could unlink (a name holds its memory until
  // reboot). The cost: the name can no longer be registered again (by another session or
  // process), and RegisterShm with that name answers as for a missing object. Buffers made by
  // ShmBuffer::Create's default (a memfd) have no name and need none of this.
  bool unlink_after_register = false;
  // Channels with different `channel_tag`s never share a connection; channels with the same
  // tag to the same target may (gRPC's subchannel pool). Benchmarks use it to measure several
  // independent connections from one process.
  int channel_tag = 0;
};

// A submit ring (Client::AttachSubmitRing): op calls through shared memory and futexes
// instead of gRPC round trips.
struct SubmitRingOptions {
  // Calls in flight at once; a call that finds every slot busy goes over gRPC.
  uint32_t slots = 8;
  // Largest serialized request (and reply) per slot; a larger request goes over gRPC.
  uint32_t slot_bytes = 64 << 10;
  // How long a caller polls its slot before it sleeps on it. Polling holds a core while it
  // lasts and saves a futex wake-up (a few µs, more on a busy host) when the reply comes
  // within it; a SYNC op's reply comes after its kernel, so raise it for latency-critical
  // small ops.
  absl::Duration spin = absl::Microseconds(100);
  // The ring's memory (created by the client: a sealed memfd by default, whose descriptor goes
  // to the daemon over its fd socket).
  ShmOptions shm;
};

// The result of one op call or batch.
struct OpResult {
  // Device time of the op(s) when the daemon knows it (SYNC completion), else 0.
  double kernel_seconds = 0;
};

// "unix:/path" for an absolute or relative path; a target that already has a scheme ("unix:",
// "unix-abstract:", "dns:", "ipv4:", "ipv6:" or "scheme://...") unchanged. An empty target
// gives the default data socket.
std::string NormalizeTarget(absl::string_view target);

// A connection to the daemon's DataPlane service holding at most one session at a time.
//
// Thread-safety: OpenSession, CloseSession and destruction must not run concurrently with any
// other call. Between them, every other method may be called from many threads at once.
class Client {
 public:
  // Creates the channel and waits up to options.connect_timeout for it to connect.
  // UNAVAILABLE (or DEADLINE_EXCEEDED) naming the target when no daemon answers there.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(absl::string_view target,
                                                         const ClientOptions& options = {});

  // Cancels the session stream if one is open, which ends the session on the daemon side and
  // releases every buffer it held. Does not block on the daemon.
  ~Client();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Opens the OpenSession stream and waits (connect_timeout) for its first message, which
  // carries the session id. The stream then stays open, read by a background thread, for the
  // life of the session. lease_seconds 0: the session lives exactly as long as the stream;
  // > 0: it also ends after that many seconds without an RPC naming it.
  // FAILED_PRECONDITION if a session is already open; the daemon's status otherwise
  // (e.g. UNAVAILABLE while it drains); DEADLINE_EXCEEDED if no first message came.
  absl::Status OpenSession(absl::string_view client_name, uint32_t lease_seconds = 0);

  // Ends the session: CloseSession on the daemon, then the stream is cancelled and joined.
  // Returns how many buffers the daemon released. The local session is gone afterwards even
  // when the RPC failed (cancelling the stream ends it on the daemon side as well).
  // FAILED_PRECONDITION if no session is open.
  absl::StatusOr<uint32_t> CloseSession();

  bool has_session() const { return session_ != nullptr; }
  // Empty when no session is open.
  const std::string& session_id() const;
  // The daemon's default backend ("cpu", "cuda") and the lease it granted, from the first
  // session message.
  const std::string& backend() const;
  uint32_t lease_seconds() const;
  // OK while the session stream is open. Once the daemon ended the session (lease expiry):
  // NOT_FOUND, the code the daemon gives every call naming it; once the stream broke (daemon
  // exit): the stream's status, e.g. UNAVAILABLE. The message carries the daemon's reason when
  // it sent one. FAILED_PRECONDITION when no session is open.
  absl::Status SessionStatus() const;

  // Registers `buffer` with the session, records the id in `buffer` and returns it. Registers
  // buffer.size() bytes. The buffer's descriptor goes to the daemon over its fd socket (the data
  // socket's path + ".fd"; kerneld.proto, FdRequest): the daemon maps exactly the memory this
  // process holds, whatever its name. With options().unlink_after_register, also unlinks a
  // named buffer's name once registered. FAILED_PRECONDITION without a session, when `buffer`
  // is already registered, or when the target is not a Unix socket path; UNAVAILABLE when the
  // fd socket cannot be reached.
  absl::StatusOr<uint64_t> RegisterBuffer(ShmBuffer& buffer);
  // Registers `size` bytes of the shm object `shm_name` by name, over gRPC. The daemon maps it
  // only if this process could open it read-write itself; any other object is refused as a
  // missing one is (INVALID_ARGUMENT "... cannot be opened: No such file or directory").
  absl::StatusOr<v1::RegisterBufferResponse> RegisterShm(absl::string_view shm_name, uint64_t size);

  // Asks the daemon to allocate `size` bytes from its pool on `backend` (empty: its default)
  // and maps the memory whose descriptor the daemon sends back over its fd socket (a sealed
  // memfd: no name, reachable only by this session). Release it with ReleaseBuffer.
  // UNIMPLEMENTED if the daemon answered with a GPU IPC handle (a GPU buffer is not host
  // memory; use AllocateBufferRaw); the fd socket's codes as RegisterBuffer.
  absl::StatusOr<ShmBuffer> AllocateBuffer(uint64_t size, absl::string_view backend = "",
                                           int device = 0);
  // The gRPC call itself. A GPU backend's answer carries its IPC handle; a CPU allocation
  // carries no handle (host pool memory is handed out as a descriptor only, by AllocateBuffer)
  // and is usable by its id in ops.
  absl::StatusOr<v1::AllocateBufferResponse> AllocateBufferRaw(uint64_t size,
                                                               absl::string_view backend = "",
                                                               int device = 0);

  // Registers `size` bytes of GPU memory another process (or this one) exported: `ipc` carries
  // the CUDA/HIP IPC memory handle of the exporter's allocation, the offset where the buffer
  // starts inside it and the device ordinal as the daemon sees it. The daemon opens the handle
  // once per registration (50-1300 µs), so register an allocation once and name tensors in it
  // by byte offset. INVALID_ARGUMENT for a malformed handle or a size beyond the allocation,
  // FAILED_PRECONDITION when the daemon has no backend of that kind; FAILED_PRECONDITION
  // without a session.
  absl::StatusOr<v1::RegisterBufferResponse> RegisterIpc(const v1::IpcMemHandle& ipc,
                                                         uint64_t size);

  // Releases one buffer of the session (registered or allocated). NOT_FOUND if the session
  // holds no such buffer.
  absl::Status ReleaseBuffer(uint64_t buffer_id);
  // The same for `buffer`, whose id is reset to 0 on success.
  absl::Status ReleaseBuffer(ShmBuffer& buffer);

  // The ops. A default Completion is SYNC: the call returns after the op completed.
  absl::StatusOr<OpResult> Quantize(const v1::QuantizeOp& op,
                                    const v1::Completion& completion = {});
  absl::StatusOr<OpResult> Gemm(const v1::GemmOp& op, const v1::Completion& completion = {});
  absl::StatusOr<OpResult> Pad(const v1::PadOp& op, const v1::Completion& completion = {});
  absl::StatusOr<OpResult> Unpad(const v1::UnpadOp& op, const v1::Completion& completion = {});
  // A batch run in order; every op is validated before the first runs. An empty batch is a
  // round trip.
  absl::StatusOr<OpResult> Submit(absl::Span<const v1::Op> ops,
                                  const v1::Completion& completion = {});

  // Moves the session's op calls (Quantize, Gemm, Pad, Unpad, Submit) onto a submit ring:
  // shared memory this process creates and hands the daemon over its fd socket, served by a
  // daemon thread of its own until the session ends. Calls keep their semantics, statuses and
  // deadlines (options().op_timeout) and save the gRPC round trip (60-130 µs on a Unix socket). A
  // call goes over gRPC instead when every slot is busy or its request is larger than a slot.
  // FAILED_PRECONDITION without a session or with a ring already attached; the daemon's
  // status otherwise (FAILED_PRECONDITION when it runs with --submit_rings=false). Must not
  // run concurrently with other calls. The ring goes with the session.
  absl::Status AttachSubmitRing(const SubmitRingOptions& ring_options = {});
  bool has_submit_ring() const { return ring_ != nullptr; }
  struct SubmitRingCounts {
    uint64_t ring_calls = 0;  // op calls answered through the ring
    uint64_t fallbacks = 0;   // op calls that went over gRPC: every slot busy, or too large
  };
  SubmitRingCounts submit_ring_counts() const;

  const ClientOptions& options() const { return options_; }
  const std::string& target() const { return target_; }
  // For calls this class does not wrap. Thread-safe.
  v1::DataPlane::Stub* stub() const { return stub_.get(); }

 private:
  class SessionStream;

  Client(std::string target, const ClientOptions& options, std::shared_ptr<grpc::Channel> channel);
  absl::Status RequireSession() const;
  // The unary op RPCs (Quantize, Gemm, Pad, Unpad): `op` in the request that `ring_case` makes,
  // through the ring when it takes it, else by `rpc`.
  template <typename Request, typename OpMessage, typename Rpc>
  absl::StatusOr<OpResult> CallUnaryOp(const OpMessage& op, const v1::Completion& completion,
                                       Request* (v1::RingRequest::*ring_case)(), Rpc rpc);
  // The call through the ring; nullopt when there is no ring, no free slot or no room.
  std::optional<absl::StatusOr<OpResult>> TryRing(const v1::RingRequest& request);
  // One call on the daemon's fd socket, with `fd` attached (none when negative).
  absl::StatusOr<v1::FdReply> CallFd(const v1::FdRequest& request, int fd, int* fd_out = nullptr);

  std::string target_;
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DataPlane::Stub> stub_;
  std::unique_ptr<SessionStream> session_;
  std::unique_ptr<internal::FdChannel> fd_channel_;
  std::unique_ptr<internal::SubmitRingClient> ring_;
};

// Small builders of the op messages for the common forms. TensorRefs come from
// TensorRefBuilder / MakeTensorRef (tensor_ref.h).
v1::QuantizeOp MakeQuantizeOp(const v1::TensorRef& input, const v1::TensorRef& output,
                              const v1::TensorRef& scales, v1::QuantGranularity granularity);
// D = A · Bᵀ with 1x128 scales on A and 128x128 scales on B.
v1::GemmOp MakeGemmNT(const v1::TensorRef& a, const v1::TensorRef& a_scales, const v1::TensorRef& b,
                      const v1::TensorRef& b_scales, const v1::TensorRef& d);
v1::PadOp MakePadOp(const v1::TensorRef& input, const v1::TensorRef& group_ends,
                    const v1::TensorRef& output, const v1::TensorRef& padded_group_ends,
                    int32_t alignment);
v1::UnpadOp MakeUnpadOp(const v1::TensorRef& input, const v1::TensorRef& group_ends,
                        const v1::TensorRef& output, int32_t alignment);
// An Op of the batch oneof holding a copy of `op`: one overload per op of kerneld/op_table.h.
#define KD_CLIENT_AS_OP_(name, Name, UPPER, number) v1::Op AsOp(const v1::Name##Op& op);
KD_OPS(KD_CLIENT_AS_OP_)
#undef KD_CLIENT_AS_OP_

}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_CLIENT_H_
