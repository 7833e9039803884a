// Bookkeeping shared by the unary handlers: the reactor to finish and the metrics to record.
#ifndef KERNELD_SERVER_RPC_CALL_H_
#define KERNELD_SERVER_RPC_CALL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/proto_convert.h"

namespace kd {

// Copyable, so a completion callback can finish the call from another thread.
class RpcCall {
 public:
  RpcCall(Metrics* metrics, const char* method, grpc::CallbackServerContext* ctx)
      : metrics_(metrics), method_(method), reactor_(ctx->DefaultReactor()), start_(absl::Now()) {}

  // The session the request names, for the log line of a refused or failed call. `session`
  // must outlive the call (a field of the request does).
  void set_session(const std::string* session) { session_ = session; }

  // Records kerneld_rpc_*, logs a refusal or failure (LogRequestOutcome) and finishes the RPC.
  // Call exactly once.
  grpc::ServerUnaryReactor* Finish(const absl::Status& status) const {
    metrics_->ObserveRpc(method_, absl::StatusCodeToString(status.code()),
                         absl::ToDoubleSeconds(absl::Now() - start_));
    LogRequestOutcome(method_, session_ == nullptr ? "" : *session_, "", status);
    reactor_->Finish(ToGrpcStatus(status));
    return reactor_;
  }
  grpc::ServerUnaryReactor* reactor() const { return reactor_; }
  absl::Time start() const { return start_; }

 private:
  Metrics* metrics_;
  const char* method_;
  const std::string* session_ = nullptr;
  grpc::ServerUnaryReactor* reactor_;
  absl::Time start_;
};

}  // namespace kd

#endif  // KERNELD_SERVER_RPC_CALL_H_
