// Fuzzes what a submit ring slot carries, the way the daemon handles it: the payload bytes parsed
// as a RingRequest, its ops bound to a session's buffers (OpBinder), validated, checked by the
// CPU backend's Supports, and run on the CPU backend. A session holds four 64 KiB pool buffers
// (ids 1 to 4), so that ops the fuzzer builds can pass binding and reach the kernels.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/v1/kerneld.pb.h"
#include "server/proto_convert.h"
#include "server/session_manager.h"

namespace kd {
namespace {

namespace v1 = ::kerneld::v1;

constexpr uint64_t kBufferBytes = 64 << 10;
constexpr int kBuffers = 4;
constexpr int kMaxOps = 16;

struct Fixture {
  Fixture() : cpu(CreateCpuBackend(1)), sessions(SessionLimits()) {
    session = sessions.Open("fuzz", 0).value();
    for (int i = 0; i < kBuffers; ++i) sessions.Allocate(*session, *cpu, 0, kBufferBytes).value();
    stream = cpu->CreateStream(0).value();
  }
  std::unique_ptr<Backend> cpu;
  SessionManager sessions;
  std::shared_ptr<Session> session;
  std::unique_ptr<Stream> stream;
};

absl::Status Bind(const v1::RingRequest& r, OpBinder& b, std::vector<Op>& ops) {
  auto one = [&ops](absl::StatusOr<Op> op) {
    if (!op.ok()) return op.status();
    ops.push_back(*std::move(op));
    return absl::OkStatus();
  };
  switch (r.call_case()) {
    case v1::RingRequest::kQuantize:
      return one(b.BindOp(r.quantize().op()));
    case v1::RingRequest::kGemm:
      return one(b.BindOp(r.gemm().op()));
    case v1::RingRequest::kPad:
      return one(b.BindOp(r.pad().op()));
    case v1::RingRequest::kUnpad:
      return one(b.BindOp(r.unpad().op()));
    case v1::RingRequest::kSubmit:
      if (r.submit().ops_size() > kMaxOps) return absl::ResourceExhaustedError("too many ops");
      for (const v1::Op& op : r.submit().ops()) {
        const absl::Status s = one(b.Any(op));
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    case v1::RingRequest::CALL_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("call is not set");
}

}  // namespace
}  // namespace kd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kd;
  static Fixture* f = new Fixture();
  v1::RingRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  OpBinder binder(*f->session);
  std::vector<Op> ops;
  if (!Bind(request, binder, ops).ok() || ops.empty()) return 0;
  std::vector<ValidatedOp> validated;
  for (Op& op : ops) {
    absl::StatusOr<ValidatedOp> v = Validate(std::move(op));
    if (!v.ok() || !binder.backend()->Supports(*v).ok()) return 0;
    validated.push_back(*std::move(v));
  }
  for (const ValidatedOp& op : validated) {
    if (!binder.backend()->Run(op, *f->stream, nullptr).ok()) break;
  }
  binder.backend()->Synchronize(*f->stream).IgnoreError();
  return 0;
}
