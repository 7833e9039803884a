// The CUDA IPC memory mappings a backend holds open, refcounted per (device, handle bytes):
// cudaIpcOpenMemHandle fails when a process opens the same allocation twice, so a second
// registration of one allocation shares the first mapping, and the mapping closes when the last
// user lets go. Each open checks the requested span against the real allocation size
// (cuMemGetAddressRange, reached through cudaGetDriverEntryPointByVersion so that libcuda is
// never linked). Thread-safe.
#ifndef KERNELD_KERNELS_GPU_IPC_MAPPINGS_H_
#define KERNELD_KERNELS_GPU_IPC_MAPPINGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {

class IpcMappings {
 public:
  explicit IpcMappings(int device_count);
  // Closes whatever is still open.
  ~IpcMappings();
  IpcMappings(const IpcMappings&) = delete;
  IpcMappings& operator=(const IpcMappings&) = delete;

  // Opens (or shares) the mapping of `handle` on `device` and returns the address of byte
  // `offset` in it. INVALID_ARGUMENT when the handle cannot be opened (garbage, this process's
  // own memory, another device's) or when offset + size passes the end of the allocation; on
  // failure nothing stays open. The caller balances every success with Close.
  absl::StatusOr<void*> Open(int device, const std::string& handle, uint64_t offset, uint64_t size);
  void Close(int device, const std::string& handle);

  // Bytes of the allocations mapped on `device`, each counted once however often it is shared.
  uint64_t mapped_bytes(int device) const;
  // Number of open mappings over all devices.
  int open_count() const;

 private:
  struct Mapping {
    void* base = nullptr;
    uint64_t size = 0;
    int refs = 0;
  };
  using Key = std::pair<int, std::string>;

  mutable absl::Mutex mu_;
  std::map<Key, Mapping> open_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> mapped_bytes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_IPC_MAPPINGS_H_
