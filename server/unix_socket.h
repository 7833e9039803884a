// The daemon's Unix socket paths: one daemon per path, and a daemon removes only what it bound.
//
// Before anything at a socket path is touched, the daemon takes an exclusive flock on
// "<path>.lock" and holds it for its life (the kernel drops it when the process dies, SIGKILL
// included). A second daemon on the same path finds the lock taken and refuses to start,
// naming the holder's pid, without touching the first one's sockets. Holding the lock, a socket
// file already at the path can only be a dead daemon's, and is replaced; anything else there is
// refused and left alone.
#ifndef KERNELD_SERVER_UNIX_SOCKET_H_
#define KERNELD_SERVER_UNIX_SOCKET_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/unique_fd.h"

namespace kd {

// The lock of one socket path. The lock file stays on disk (removing it would let a third
// daemon lock a new file while a second one waits on the old).
class PathLock {
 public:
  // Creates the path's directory if needed (0755) and takes the lock, then writes this
  // process's pid into the lock file. FAILED_PRECONDITION naming the path and the holder's pid
  // when another process holds it; the errno's code when the lock file cannot be opened.
  static absl::StatusOr<std::unique_ptr<PathLock>> Acquire(const std::string& socket_path);
  ~PathLock() = default;  // closing the descriptor releases the lock

  const std::string& lock_path() const { return lock_path_; }

 private:
  PathLock(std::string lock_path, UniqueFd fd)
      : lock_path_(std::move(lock_path)), fd_(std::move(fd)) {}
  std::string lock_path_;
  UniqueFd fd_;
};

// A listening Unix socket this process bound. The caller holds the path's PathLock.
class UnixListener {
 public:
  // Binds `path` with socket `type` (SOCK_STREAM, SOCK_SEQPACKET), non-blocking and
  // close-on-exec, created with `mode` (under a matching umask, so that it is never reachable
  // with wider rights) and group `group` (empty: unchanged), and listens. A socket file already
  // at `path` is removed first; FAILED_PRECONDITION if something other than a socket is there.
  // INVALID_ARGUMENT for an unknown group or a path longer than sun_path.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Bind(const std::string& path, int type,
                                                            mode_t mode, const std::string& group);
  // Closes the socket and removes the path if it still is the socket this bound.
  ~UnixListener();

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  UnixListener(std::string path, UniqueFd fd, dev_t dev, ino_t ino)
      : path_(std::move(path)), fd_(std::move(fd)), dev_(dev), ino_(ino) {}
  std::string path_;
  UniqueFd fd_;
  dev_t dev_;
  ino_t ino_;
};

}  // namespace kd

#endif  // KERNELD_SERVER_UNIX_SOCKET_H_
