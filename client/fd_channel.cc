#include "client/fd_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kd {
namespace client {
namespace internal {
namespace {

// As the daemon's limit (server/connection_acceptor.h).
constexpr size_t kMaxMessageBytes = 64 << 10;

}  // namespace

std::string FdSocketPathFor(const std::string& target) {
  absl::string_view path = target;
  if (!absl::ConsumePrefix(&path, "unix://") && !absl::ConsumePrefix(&path, "unix:")) return "";
  if (path.empty()) return "";
  return absl::StrCat(path, ".fd");
}

FdChannel::~FdChannel() {
  absl::MutexLock lock(&mu_);
  CloseLocked();
}

void FdChannel::CloseLocked() {
  if (socket_ >= 0) close(socket_);
  socket_ = -1;
}

absl::Status FdChannel::ConnectLocked() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the fd socket path ", path_, " is longer than a Unix socket path may be"));
  }
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  if (connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(s);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to kerneld's fd socket ", path_, ": ", std::strerror(err)));
  }
  socket_ = s;
  return absl::OkStatus();
}

absl::StatusOr<FdChannel::Result> FdChannel::Call(const v1::FdRequest& request, int fd,
                                                  absl::Duration timeout) {
  if (path_.empty()) {
    return absl::FailedPreconditionError(
        "host memory needs the daemon's Unix socket (its descriptors travel over <socket>.fd); "
        "this client's target is not a Unix socket path");
  }
  const std::string bytes = request.SerializeAsString();
  if (bytes.size() > kMaxMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the request has ", bytes.size(),
                                                   " bytes; the fd socket takes at most ",
                                                   kMaxMessageBytes));
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  // A kept connection may have been closed by a daemon that restarted since: a failed send
  // reached nobody, so it is tried once more on a new connection.
  for (int attempt = 0;; ++attempt) {
    const bool reused = socket_ >= 0;
    if (!reused) {
      if (absl::Status s = ConnectLocked(); !s.ok()) return s;
    }
    iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    if (sendmsg(socket_, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) break;
    const int err = errno;
    CloseLocked();
    if (!reused || attempt > 0) {
      return absl::UnavailableError(
          absl::StrCat("sending to kerneld's fd socket ", path_, ": ", std::strerror(err)));
    }
  }
  auto broken = [&](const std::string& why) {
    CloseLocked();  // a late reply must not answer the next call
    return absl::UnavailableError(absl::StrCat("kerneld's fd socket ", path_, ": ", why));
  };
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      CloseLocked();
      return absl::DeadlineExceededError(absl::StrCat(
          "kerneld's fd socket ", path_, " did not answer within ", absl::FormatDuration(timeout)));
    }
    pollfd p{socket_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (ready < 0 && errno != EINTR) return broken(std::strerror(errno));
    if (ready > 0) break;
  }
  std::vector<char> buffer(kMaxMessageBytes);
  iovec iov{buffer.data(), buffer.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(socket_, &msg, MSG_CMSG_CLOEXEC);
  Result result;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (result.fd < 0) {
        result.fd = received;
      } else {
        close(received);
      }
    }
  }
  auto drop_fd = [&result] {
    if (result.fd >= 0) close(result.fd);
    result.fd = -1;
  };
  if (n < 0) return broken(std::strerror(errno));
  if (n == 0) return broken("the daemon closed the connection");
  if (!result.reply.ParseFromArray(buffer.data(), static_cast<int>(n))) {
    drop_fd();
    return broken("the reply is not an FdReply");
  }
  if (result.reply.code() != 0) {
    drop_fd();
    return absl::Status(static_cast<absl::StatusCode>(result.reply.code()), result.reply.message());
  }
  return result;
}

}  // namespace internal
}  // namespace client
}  // namespace kd
