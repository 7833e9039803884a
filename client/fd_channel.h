// The client's side of the daemon's fd socket (FdRequest in kerneld.proto): host memory travels
// as descriptors (SCM_RIGHTS) over a SOCK_SEQPACKET Unix socket next to the data socket, since
// gRPC cannot carry them. Internal to libkerneld_client.
#ifndef KERNELD_CLIENT_FD_CHANNEL_H_
#define KERNELD_CLIENT_FD_CHANNEL_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kd {
namespace client {
namespace internal {

namespace v1 = ::kerneld::v1;

// The fd socket of the daemon at `target` (normalized: "unix:<path>" or "unix://<path>"):
// "<path>.fd"; empty for a target that is not a Unix socket path (TCP, abstract).
std::string FdSocketPathFor(const std::string& target);

// One connection, opened at the first call and again after a failure. Thread-safe: calls take
// turns (replies come in order).
class FdChannel {
 public:
  explicit FdChannel(std::string path) : path_(std::move(path)) {}
  ~FdChannel();
  FdChannel(const FdChannel&) = delete;
  FdChannel& operator=(const FdChannel&) = delete;

  struct Result {
    v1::FdReply reply;
    int fd = -1;  // the descriptor that came with the reply; the caller owns it
  };
  // Sends `request` with `fd` attached (none when negative) and waits up to `timeout` for the
  // reply. The daemon's status when its reply says one (the reply's descriptor is closed then);
  // FAILED_PRECONDITION when the target has no fd socket; UNAVAILABLE naming the socket when it
  // cannot be reached or the connection broke; DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<Result> Call(const v1::FdRequest& request, int fd, absl::Duration timeout);

  const std::string& path() const { return path_; }

 private:
  absl::Status ConnectLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  int socket_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace internal
}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_FD_CHANNEL_H_
