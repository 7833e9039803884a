// POSIX file plumbing of the autotune cache: an advisory lock file and whole-file reads. Not part
// of the public API.
#ifndef KERNELD_KERNELS_AUTOTUNE_FILE_IO_H_
#define KERNELD_KERNELS_AUTOTUNE_FILE_IO_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kd {
namespace autotune_internal {

// An exclusive flock on a lock file, released when destroyed (or when the process dies, which
// is what makes a crash mid-write harmless to the next writer).
class FileLock {
 public:
  // Waits up to `timeout` for the lock on `lock_path` (created if missing). DEADLINE_EXCEEDED
  // naming the file when another holder kept it that long; INTERNAL on other failures.
  static absl::StatusOr<FileLock> Acquire(const std::string& lock_path,
                                          absl::Duration timeout = absl::InfiniteDuration());
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

// The whole file, or nullopt when it does not exist. INTERNAL for other errors.
absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path);

// "<errno text>" of the current errno, for messages.
std::string ErrnoText();

}  // namespace autotune_internal
}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_FILE_IO_H_
