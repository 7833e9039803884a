// Bookkeeping shared by the unary handlers: the reactor to finish and the metrics to record.
#ifndef KERNELD_SERVER_RPC_CALL_H_
#define KERNELD_SERVER_RPC_CALL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "kerneld/server/metrics.h"
#include "kerneld/server/proto_convert.h"

namespace kd {

// Copyable, so a completion callback can finish the call from another thread.
class RpcCall {
 public:
  RpcCall(Metrics* metrics, const char* method, grpc::CallbackServerContext* ctx)
      : metrics_(metrics), method_(method), reactor_(ctx->DefaultReactor()), start_(absl::Now()) {}

  // Records kerneld_rpc_* and finishes the RPC. Call exactly once.
  grpc::ServerUnaryReactor* Finish(const absl::Status& status) const {
    metrics_->ObserveRpc(method_, absl::StatusCodeToString(status.code()),
                         absl::ToDoubleSeconds(absl::Now() - start_));
    reactor_->Finish(ToGrpcStatus(status));
    return reactor_;
  }
  grpc::ServerUnaryReactor* reactor() const { return reactor_; }
  absl::Time start() const { return start_; }

 private:
  Metrics* metrics_;
  const char* method_;
  grpc::ServerUnaryReactor* reactor_;
  absl::Time start_;
};

}  // namespace kd

#endif  // KERNELD_SERVER_RPC_CALL_H_
