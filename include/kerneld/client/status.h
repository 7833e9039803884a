// Mapping of gRPC statuses into absl::Status, for everything the client library returns.
#ifndef KERNELD_CLIENT_STATUS_H_
#define KERNELD_CLIENT_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace kd {
namespace client {

// The absl::Status with the same canonical code and message as `status`, so that callers test
// errors with absl::IsNotFound(), absl::IsInvalidArgument()... The daemon's messages name the
// field and the rule ("ops[2].gemm.a.shape[1]=100 ..."); they pass through unchanged. A code
// outside the canonical range (never sent by a conforming peer) becomes UNKNOWN with the
// original number in the message. The error details payload, if any, is attached under the
// type URL "type.googleapis.com/grpc.status.details".
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_STATUS_H_
