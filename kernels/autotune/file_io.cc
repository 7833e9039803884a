#include "kernels/autotune/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kerneld/kernels/autotune_cache.h"

namespace kd {
namespace autotune_internal {
namespace {

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, reporting the error close() returns (a delayed write error on some filesystems).
  int Close() {
    const int rc = close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

absl::Status Internal(absl::string_view what, absl::string_view path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", ErrnoText()));
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string ErrnoText() { return std::string(strerror(errno)); }

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& lock_path, absl::Duration timeout) {
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("open", lock_path);
  const bool forever = timeout == absl::InfiniteDuration();
  const absl::Time deadline = absl::Now() + timeout;
  // flock has no timeout of its own: poll the non-blocking form (writers hold it for one
  // write, so a lock held for long belongs to a stuck or foreign process).
  while (true) {
    if (flock(fd, forever ? LOCK_EX : LOCK_EX | LOCK_NB) == 0) return FileLock(fd);
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      const absl::Status s = Internal("flock", lock_path);
      close(fd);
      return s;
    }
    if (absl::Now() >= deadline) {
      close(fd);
      return absl::DeadlineExceededError(
          absl::StrCat("cannot lock ", lock_path, " within ", absl::FormatDuration(timeout),
                       ": another process holds it (another kerneld on the same "
                       "--autotune_cache_dir, or one stuck writing it)"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);  // closing the last descriptor releases the flock
}

absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Internal("open", path);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Internal("fstat", path);
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(out.size() + 4096);  // grew since fstat
    const ssize_t n = read(fd.get(), &out[done], out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal("read", path);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return std::optional<std::string>(std::move(out));
}

}  // namespace autotune_internal

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes,
                                 absl::Duration lock_timeout) {
  using autotune_internal::FileLock;
  absl::StatusOr<FileLock> lock = FileLock::Acquire(path + ".lock", lock_timeout);
  if (!lock.ok()) return lock.status();
  // One writer at a time holds the lock, so a fixed temp name is safe, and a temp file left by
  // a writer that died is simply truncated and reused.
  const std::string tmp = path + ".tmp";
  autotune_internal::Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return autotune_internal::Internal("open", tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return autotune_internal::Internal("write", tmp);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0) return autotune_internal::Internal("fsync", tmp);
  if (fd.Close() != 0) return autotune_internal::Internal("close", tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) return autotune_internal::Internal("rename to", path);
  // The rename is durable only once the directory entry is.
  const std::string dir = autotune_internal::DirectoryOf(path);
  autotune_internal::Fd dfd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0) return autotune_internal::Internal("open directory", dir);
  if (fsync(dfd.get()) != 0) return autotune_internal::Internal("fsync directory", dir);
  return absl::OkStatus();
}

}  // namespace kd
