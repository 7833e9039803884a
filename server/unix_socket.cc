#include "server/unix_socket.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "kerneld/kernels/client_string.h"

namespace kd {
namespace {

std::string Errno(int err) { return std::strerror(err); }

absl::Status ErrnoStatus(int err, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", Errno(err));
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOENT:
    case ENOTDIR:
      return absl::FailedPreconditionError(message);
    default:
      return absl::UnavailableError(message);
  }
}

absl::Status MakeParentDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return absl::OkStatus();
  const std::string dir = path.substr(0, slash);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, absl::StrCat("cannot create ", dir));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PathLock>> PathLock::Acquire(const std::string& socket_path) {
  if (absl::Status s = MakeParentDirectory(socket_path); !s.ok()) return s;
  std::string lock_path = absl::StrCat(socket_path, ".lock");
  UniqueFd fd(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot open ", lock_path));
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) return ErrnoStatus(err, absl::StrCat("flock ", lock_path));
    char buf[32] = {};
    const ssize_t n = pread(fd.get(), buf, sizeof(buf) - 1, 0);
    int64_t pid = 0;
    const bool known =
        n > 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buf, n)), &pid);
    return absl::FailedPreconditionError(absl::StrCat(
        "another kerneld", known ? absl::StrCat(" (pid ", pid, ")") : std::string(), " serves ",
        socket_path, ": it holds ", lock_path,
        "; not starting (stop it first, or give this one other --socket/--admin_socket paths)"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd.get(), 0) != 0 ||
      pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return ErrnoStatus(errno, absl::StrCat("cannot write ", lock_path));
  }
  return std::unique_ptr<PathLock>(new PathLock(std::move(lock_path), std::move(fd)));
}

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Bind(const std::string& path, int type,
                                                                 mode_t mode,
                                                                 const std::string& group) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path \"", EchoClientString(path),
                                                   "\" must have 1 to ", sizeof(addr.sun_path) - 1,
                                                   " bytes"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  gid_t gid = static_cast<gid_t>(-1);
  if (!group.empty()) {
    struct group* g = getgrnam(group.c_str());
    if (g == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("socket_group=\"", EchoClientString(group), "\" is not a known group"));
    }
    gid = g->gr_gid;
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " exists and is not a socket; not touching it"));
    }
    // The caller holds the path's lock: a socket here was left by a daemon that died.
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus(errno, absl::StrCat("cannot remove the stale socket ", path));
    }
  }
  UniqueFd fd(socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "socket(AF_UNIX)");
  const mode_t old_umask = umask(0777 & ~mode);
  const int bound = bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  umask(old_umask);
  if (bound != 0) return ErrnoStatus(bind_errno, absl::StrCat("cannot bind ", path));
  // From here the path is ours: failures remove it again.
  auto fail = [&](const absl::Status& s) {
    unlink(path.c_str());
    return s;
  };
  if (gid != static_cast<gid_t>(-1) && chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return fail(ErrnoStatus(errno, absl::StrCat("chown ", path, " to group ", group)));
  }
  if (chmod(path.c_str(), mode) != 0) return fail(ErrnoStatus(errno, absl::StrCat("chmod ", path)));
  if (lstat(path.c_str(), &st) != 0) return fail(ErrnoStatus(errno, absl::StrCat("lstat ", path)));
  if (listen(fd.get(), SOMAXCONN) != 0) {
    return fail(ErrnoStatus(errno, absl::StrCat("listen on ", path)));
  }
  return std::unique_ptr<UnixListener>(new UnixListener(path, std::move(fd), st.st_dev, st.st_ino));
}

UnixListener::~UnixListener() {
  struct stat st;
  if (lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    unlink(path_.c_str());
  }
}

}  // namespace kd
