// Host buffers in shared memory, the memory the daemon's CPU backend reads and writes.
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
  // false (the default): an anonymous memfd. It has no name, so nothing is left in /dev/shm if
  // this process is killed, and only whoever is given its descriptor reaches it (the daemon, by
  // Client::RegisterBuffer). It is sealed at its size (F_SEAL_SHRINK | F_SEAL_GROW), so nobody
  // can truncate it under the daemon's mapping.
  // true: a named POSIX shm object (shm_open), for memory other processes open by name; the
  // name stays in /dev/shm until unlinked (Unlink, destruction), even if this process dies.
  bool named = false;
  // Named objects: permission bits of the new object, applied with fchmod so that the umask does
  // not narrow them. 0600 lets only this user (and root) open it. The daemon maps a name only if
  // the registering process could open it itself, so these bits never need to admit the daemon.
  mode_t mode = 0600;
  // Named objects: group owner to set with fchown; this process must be a member. Unset keeps
  // the creator's.
  std::optional<gid_t> group;
  // Names are "<prefix>-<pid>-<sequence>-<random>"; the prefix must start with '/' and contain
  // no other '/'. A memfd gets the same string, without the '/', as its label (what
  // /proc/<pid>/fd shows).
  std::string name_prefix = "/kerneld-client";
};

// A mapped shared-memory buffer and its descriptor: a memfd this process created (Create), a
// named POSIX shm object it created (Create with `named`, which it owns and unlinks when the
// ShmBuffer is destroyed) or opened (Map), or memory whose descriptor it was given (Adopt), such
// as a buffer the daemon allocated. The mapping is MAP_SHARED and read-write, page aligned, and
// lives exactly as long as the ShmBuffer; so does the descriptor (one per buffer, closed on
// destruction), which is what Client::RegisterBuffer hands the daemon. Move-only. Not
// thread-safe for mutation; the memory itself may be used from any thread.
//
// Registering a buffer with the daemon (Client::RegisterBuffer) records the id it was given
// here; the daemon keeps its own mapping, so unlinking the name (Unlink, or destruction) does not
// take the memory away from a registered buffer, and destroying the ShmBuffer does not release
// the registration (the session's end or Client::ReleaseBuffer does).
class ShmBuffer {
 public:
  // Creates new memory of `size` bytes (zero-filled) and maps it: a sealed memfd, or with
  // options.named an object with a unique name (O_CREAT | O_EXCL, retried on a name collision).
  // INVALID_ARGUMENT for size 0 or a bad prefix; the errno of memfd_create/shm_open/ftruncate/
  // mmap otherwise (PERMISSION_DENIED, RESOURCE_EXHAUSTED for ENOSPC/ENOMEM/EMFILE, ...).
  static absl::StatusOr<ShmBuffer> Create(uint64_t size, const ShmOptions& options = {});

  // Maps the existing object `name` ("/name"), at least `size` bytes of it; does not own the
  // name. NOT_FOUND if it does not exist, OUT_OF_RANGE if it is smaller than `size`,
  // INVALID_ARGUMENT for size 0 or a malformed name.
  static absl::StatusOr<ShmBuffer> Map(absl::string_view name, uint64_t size);

  // Maps `size` bytes of the memory behind `fd` and takes the descriptor (closed on failure
  // too). OUT_OF_RANGE if the memory is smaller than `size`, INVALID_ARGUMENT for size 0 or a
  // negative fd.
  static absl::StatusOr<ShmBuffer> Adopt(int fd, uint64_t size);

  ShmBuffer() = default;
  ShmBuffer(ShmBuffer&& other) noexcept;
  ShmBuffer& operator=(ShmBuffer&& other) noexcept;
  ShmBuffer(const ShmBuffer&) = delete;
  ShmBuffer& operator=(const ShmBuffer&) = delete;
  // Unmaps, closes the descriptor, and unlinks the name if this buffer owns it and it was not
  // unlinked yet.
  ~ShmBuffer();

  // Removes the name now (the mapping stays valid). Later calls, and calls on a buffer that
  // does not own its name, do nothing and return OK. On failure the buffer still owns the name
  // and destruction tries again.
  absl::Status Unlink();

  bool valid() const { return data_ != nullptr; }
  // The object's name; empty for a memfd and for adopted memory.
  const std::string& name() const { return name_; }
  // The memory's descriptor (close-on-exec), owned by this buffer; -1 when not valid().
  int fd() const { return fd_; }
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
  ShmBuffer(std::string name, int fd, void* data, uint64_t size, bool owns_name)
      : name_(std::move(name)), fd_(fd), data_(data), size_(size), owns_name_(owns_name) {}
  void Reset();

  std::string name_;
  int fd_ = -1;
  void* data_ = nullptr;
  uint64_t size_ = 0;
  bool owns_name_ = false;
  uint64_t buffer_id_ = 0;
};

}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_SHM_BUFFER_H_
