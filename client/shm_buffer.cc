#include "kerneld/client/shm_buffer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kd {
namespace client {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EFBIG:
      return absl::ResourceExhaustedError(message);
    case EINVAL:
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

// A POSIX shm name is "/" followed by a non-empty file name without '/'.
absl::Status CheckName(absl::string_view name, absl::string_view field) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "=\"", name, "\" must be '/' followed by a name without '/'"));
  }
  return absl::OkStatus();
}

std::string UniqueName(absl::string_view prefix) {
  static std::atomic<uint64_t> sequence{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%s-%d-%d-%016x", prefix, static_cast<int>(getpid()),
                         sequence.fetch_add(1, std::memory_order_relaxed), rng());
}

}  // namespace

absl::StatusOr<ShmBuffer> ShmBuffer::Create(uint64_t size, const ShmOptions& options) {
  if (size == 0) return absl::InvalidArgumentError("size=0: a shm buffer needs at least 1 byte");
  if (absl::Status s = CheckName(options.name_prefix, "name_prefix"); !s.ok()) return s;
  if (size > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return ErrnoStatus(EFBIG, absl::StrCat("ftruncate to ", size, " bytes"));
  }
  std::string name;
  int fd = -1;
  if (!options.named) {
    const std::string label = UniqueName(options.name_prefix).substr(1);
    fd = memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("memfd_create ", label));
    auto fail = [&](absl::string_view what) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, absl::StrCat(what, " ", label));
    };
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) return fail("ftruncate");
    // Nobody (this process included) can shrink it under the daemon's mapping.
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) return fail("sealing");
    void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) return fail("mmap");
    return ShmBuffer(std::string(), fd, data, size, /*owns_name=*/false);
  }
  constexpr int kAttempts = 8;
  for (int attempt = 0; attempt < kAttempts && fd < 0; ++attempt) {
    name = UniqueName(options.name_prefix);
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, options.mode & 07777);
    if (fd < 0 && errno != EEXIST) return ErrnoStatus(errno, absl::StrCat("shm_open ", name));
  }
  if (fd < 0) return ErrnoStatus(EEXIST, absl::StrCat("shm_open ", name));
  // From here the name exists: every failure unlinks it again.
  auto fail = [&](absl::string_view what) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return ErrnoStatus(err, absl::StrCat(what, " ", name));
  };
  if (fchmod(fd, options.mode & 07777) != 0) return fail("fchmod");
  if (options.group.has_value() && fchown(fd, static_cast<uid_t>(-1), *options.group) != 0) {
    return fail("fchown");
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) return fail("ftruncate");
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return fail("mmap");
  return ShmBuffer(std::move(name), fd, data, size, /*owns_name=*/true);
}

absl::StatusOr<ShmBuffer> ShmBuffer::Map(absl::string_view name, uint64_t size) {
  if (size == 0) return absl::InvalidArgumentError("size=0: a shm buffer needs at least 1 byte");
  if (absl::Status s = CheckName(name, "shm_name"); !s.ok()) return s;
  std::string owned_name(name);
  const int fd = shm_open(owned_name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("shm_open ", owned_name));
  absl::StatusOr<ShmBuffer> mapped = Adopt(fd, size);
  if (!mapped.ok()) {
    return absl::Status(mapped.status().code(),
                        absl::StrCat("shm object ", owned_name, ": ", mapped.status().message()));
  }
  mapped->name_ = std::move(owned_name);
  return mapped;
}

absl::StatusOr<ShmBuffer> ShmBuffer::Adopt(int fd, uint64_t size) {
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("fd=", fd, " is not a descriptor"));
  if (size == 0) {
    close(fd);
    return absl::InvalidArgumentError("size=0: a shm buffer needs at least 1 byte");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, "fstat");
  }
  if (static_cast<uint64_t>(st.st_size) < size) {
    close(fd);
    return absl::OutOfRangeError(
        absl::StrCat("the memory has ", st.st_size, " bytes, fewer than the ", size, " requested"));
  }
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, "mmap");
  }
  return ShmBuffer(std::string(), fd, data, size, /*owns_name=*/false);
}

ShmBuffer::ShmBuffer(ShmBuffer&& other) noexcept
    : name_(std::move(other.name_)),
      fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owns_name_(std::exchange(other.owns_name_, false)),
      buffer_id_(std::exchange(other.buffer_id_, 0)) {
  other.name_.clear();
}

ShmBuffer& ShmBuffer::operator=(ShmBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    other.name_.clear();
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owns_name_ = std::exchange(other.owns_name_, false);
    buffer_id_ = std::exchange(other.buffer_id_, 0);
  }
  return *this;
}

ShmBuffer::~ShmBuffer() { Reset(); }

absl::Status ShmBuffer::Unlink() {
  if (!owns_name_) return absl::OkStatus();
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("shm_unlink ", name_));  // still owned: retried later
  }
  owns_name_ = false;
  return absl::OkStatus();
}

void ShmBuffer::Reset() {
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  if (owns_name_) shm_unlink(name_.c_str());
  name_.clear();
  fd_ = -1;
  data_ = nullptr;
  size_ = 0;
  owns_name_ = false;
  buffer_id_ = 0;
}

}  // namespace client
}  // namespace kd
