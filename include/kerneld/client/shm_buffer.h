// Host buffers in POSIX shared memory, the memory the daemon's CPU backend reads and writes.
#ifndef KERNELD_CLIENT_SHM_BUFFER_H_
#define KERNELD_CLIENT_SHM_BUFFER_H_

#include <sys/types.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kd {
namespace client {

struct ShmOptions {
  // Permission bits of the new object, applied with fchmod so that the umask does not narrow
  // them. 0600 lets only this user (and root) open it: right when the daemon runs as this user
  // or as root. When the daemon runs as its own user, use 0660 and `group` = the daemon's group
  // (the group that may reach the data socket, "kerneld" in deploy/).
  mode_t mode = 0600;
  // Group owner to set with fchown; this process must be a member. Unset keeps the creator's.
  std::optional<gid_t> group;
  // Names are "<prefix>-<pid>-<sequence>-<random>"; the prefix must start with '/' and contain
  // no other '/'.
  std::string name_prefix = "/kerneld-client";
};

// A mapped POSIX shared-memory object: either one this process created (Create), which it owns
// and unlinks when the ShmBuffer is destroyed, or an existing one it only maps (Map), such as a
// buffer the daemon allocated. The mapping is MAP_SHARED and read-write, page aligned, and lives
// exactly as long as the ShmBuffer. Move-only. Not thread-safe for mutation; the memory itself
// may be used from any thread.
//
// Registering a buffer with the daemon (Client::RegisterBuffer) records the id it was given
// here; the daemon keeps its own mapping, so unlinking the name (Unlink, or destruction) does not
// take the memory away from a registered buffer, and destroying the ShmBuffer does not release
// the registration (the session's end or Client::ReleaseBuffer does).
class ShmBuffer {
 public:
  // Creates a new object of `size` bytes (zero-filled) with a unique name (O_CREAT | O_EXCL,
  // retried on a name collision), sizes it and maps it.
  // INVALID_ARGUMENT for size 0 or a bad prefix; the errno of shm_open/ftruncate/mmap otherwise
  // (PERMISSION_DENIED, RESOURCE_EXHAUSTED for ENOSPC/ENOMEM/EMFILE, ...).
  static absl::StatusOr<ShmBuffer> Create(uint64_t size, const ShmOptions& options = {});

  // Maps the existing object `name` ("/name"), at least `size` bytes of it; does not own the
  // name. NOT_FOUND if it does not exist, OUT_OF_RANGE if it is smaller than `size`,
  // INVALID_ARGUMENT for size 0 or a malformed name.
  static absl::StatusOr<ShmBuffer> Map(absl::string_view name, uint64_t size);

  ShmBuffer() = default;
  ShmBuffer(ShmBuffer&& other) noexcept;
  ShmBuffer& operator=(ShmBuffer&& other) noexcept;
  ShmBuffer(const ShmBuffer&) = delete;
  ShmBuffer& operator=(const ShmBuffer&) = delete;
  // Unmaps, closes, and unlinks the name if this buffer owns it and it was not unlinked yet.
  ~ShmBuffer();

  // Removes the name now (the mapping stays valid). Later calls, and calls on a buffer that
  // does not own its name, do nothing and return OK. On failure the buffer still owns the name
  // and destruction tries again.
  absl::Status Unlink();

  bool valid() const { return data_ != nullptr; }
  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  bool owns_name() const { return owns_name_; }
  void* data() const { return data_; }

  // Typed views of the mapping. `byte_offset` must be a multiple of alignof(T); `count`
  // elements must fit in the buffer (checked by an assert() only: these are
  // accessors for code that already sized the buffer).
  template <typename T>
  T* As(uint64_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + byte_offset);
  }
  template <typename T>
  absl::Span<T> Span(uint64_t byte_offset, size_t count) const {
    assert(byte_offset <= size_ && count <= (size_ - byte_offset) / sizeof(T));
    return absl::Span<T>(As<T>(byte_offset), count);
  }
  // All of the buffer as T, size() / sizeof(T) elements.
  template <typename T>
  absl::Span<T> Span() const {
    return absl::Span<T>(As<T>(), size_ / sizeof(T));
  }

  // The daemon's id for this buffer once registered or allocated; 0 before (the daemon never
  // hands out 0).
  uint64_t buffer_id() const { return buffer_id_; }
  void set_buffer_id(uint64_t id) { buffer_id_ = id; }

 private:
  ShmBuffer(std::string name, void* data, uint64_t size, bool owns_name)
      : name_(std::move(name)), data_(data), size_(size), owns_name_(owns_name) {}
  void Reset();

  std::string name_;
  void* data_ = nullptr;
  uint64_t size_ = 0;
  bool owns_name_ = false;
  uint64_t buffer_id_ = 0;
};

}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_SHM_BUFFER_H_
