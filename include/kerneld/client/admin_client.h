// The client of kerneld's Admin service (what kctl calls) and of the standard gRPC health
// service.
#ifndef KERNELD_CLIENT_ADMIN_CLIENT_H_
#define KERNELD_CLIENT_ADMIN_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "kerneld/v1/kerneld.pb.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace kd {
namespace client {

namespace v1 = ::kerneld::v1;

// The admin socket the packaged daemon listens on (deploy/).
inline constexpr char kDefaultAdminSocket[] = "/run/kerneld/admin.sock";

// A connection to the Admin service. Admin methods answer PERMISSION_DENIED on the data socket.
// Thread-safe.
class AdminClient {
 public:
  // `target` as for Client::Connect (a path or a gRPC target). Waits up to `timeout` for the
  // channel to connect: UNAVAILABLE (or DEADLINE_EXCEEDED) naming the target otherwise.
  // `timeout` is also the deadline of every unary call made through this class.
  static absl::StatusOr<std::unique_ptr<AdminClient>> Connect(
      absl::string_view target, absl::Duration timeout = absl::Seconds(5));

  absl::StatusOr<v1::StatusResponse> Status() const;

  const std::string& target() const { return target_; }
  absl::Duration timeout() const { return timeout_; }
  // For the admin methods this class does not wrap yet (Tune streams, cache calls). Thread-safe.
  v1::Admin::Stub* stub() const { return stub_.get(); }

 private:
  AdminClient(std::string target, absl::Duration timeout, std::shared_ptr<grpc::Channel> channel);

  std::string target_;
  absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Admin::Stub> stub_;
};

// grpc.health.v1 serving status, numbered as in that protocol.
enum class HealthState { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };
absl::string_view HealthStateName(HealthState state);

// Calls grpc.health.v1.Health/Check for `service` ("" = the whole server) at `target` within
// `timeout`. The RPC's status when it fails (NOT_FOUND for a service the server does not know,
// UNAVAILABLE when nothing listens); the serving state otherwise.
absl::StatusOr<HealthState> CheckHealth(absl::string_view target, absl::string_view service = "",
                                        absl::Duration timeout = absl::Seconds(5));

}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_ADMIN_CLIENT_H_
