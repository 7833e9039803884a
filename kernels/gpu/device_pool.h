// A pool of device memory for one GPU. Blocks are cudaMalloc allocations of a size class
// (powers of two from 4 KiB up to 2 MiB, then multiples of 2 MiB); a released block stays in the
// pool and serves the next request of its class, so steady-state allocation never calls
// cudaMalloc or cudaFree (cudaFree synchronizes the device). The pool holds at most `cap_bytes`
// (used + pooled; 0: no cap beyond the device): over it, free blocks are given back first, then
// the request is refused. Thread-safe.
#ifndef KERNELD_KERNELS_GPU_DEVICE_POOL_H_
#define KERNELD_KERNELS_GPU_DEVICE_POOL_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {

class DevicePool {
 public:
  struct Block {
    void* ptr = nullptr;
    uint64_t size = 0;  // the size class, >= the bytes asked for
  };

  DevicePool(int device, uint64_t cap_bytes);
  // Frees the pooled blocks. Every block handed out must have been released.
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // The size class that serves `bytes`.
  static uint64_t SizeClass(uint64_t bytes);

  // A block of at least `bytes`. RESOURCE_EXHAUSTED over the cap or when the device is out of
  // memory (after giving pooled blocks back).
  absl::StatusOr<Block> Acquire(uint64_t bytes);
  // Returns a block to the pool. The caller guarantees no queued work still uses it.
  void Release(const Block& block);
  // The IPC handle of a block handed out by this pool (cached: cudaIpcGetMemHandle costs µs).
  absl::StatusOr<cudaIpcMemHandle_t> Export(void* ptr);
  // True when `handle` (raw bytes) was exported by this pool, i.e. names this process's memory.
  bool Exported(const std::string& handle) const;
  // Gives every pooled (free) block back to the device.
  void Trim();

  uint64_t used() const;
  uint64_t pooled() const;

 private:
  void FreeBlockLocked(void* ptr, uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  const uint64_t cap_bytes_;
  mutable absl::Mutex mu_;
  std::multimap<uint64_t, void*> free_ ABSL_GUARDED_BY(mu_);    // size class -> block
  std::map<void*, std::string> exported_ ABSL_GUARDED_BY(mu_);  // block -> handle bytes
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pooled_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_DEVICE_POOL_H_
