#include "kerneld/client/status.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace kd {
namespace client {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  // Both enums are the canonical codes with the same numbers; anything outside them is not.
  absl::Status result;
  if (code < static_cast<int>(absl::StatusCode::kCancelled) ||
      code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    result =
        absl::UnknownError(absl::StrCat("gRPC status code ", code, ": ", status.error_message()));
  } else {
    result = absl::Status(static_cast<absl::StatusCode>(code), status.error_message());
  }
  if (!status.error_details().empty()) {
    result.SetPayload("type.googleapis.com/grpc.status.details",
                      absl::Cord(status.error_details()));
  }
  return result;
}

}  // namespace client
}  // namespace kd
