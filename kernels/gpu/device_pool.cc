#include "kernels/gpu/device_pool.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/gpu/gpu_check.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace {

constexpr uint64_t kMinClass = 4096;
constexpr uint64_t kLargeGranule = uint64_t{2} << 20;

}  // namespace

DevicePool::DevicePool(int device, uint64_t cap_bytes) : device_(device), cap_bytes_(cap_bytes) {}

DevicePool::~DevicePool() { Trim(); }

uint64_t DevicePool::SizeClass(uint64_t bytes) {
  if (bytes > kLargeGranule) {
    return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
  }
  uint64_t size = kMinClass;
  while (size < bytes) size *= 2;
  return size;
}

absl::StatusOr<DevicePool::Block> DevicePool::Acquire(uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("size=0 must be > 0");
  if (bytes > (uint64_t{1} << 50)) {
    return absl::ResourceExhaustedError(absl::StrCat("size=", bytes, " is larger than any device"));
  }
  const uint64_t size = SizeClass(bytes);
  absl::MutexLock lock(&mu_);
  auto it = free_.find(size);
  if (it != free_.end()) {
    Block block{it->second, size};
    free_.erase(it);
    pooled_ -= size;
    used_ += size;
    return block;
  }
  if (cap_bytes_ > 0 && used_ + pooled_ + size > cap_bytes_) {
    while (!free_.empty() && used_ + pooled_ + size > cap_bytes_) {
      auto largest = std::prev(free_.end());
      FreeBlockLocked(largest->second, largest->first);
      pooled_ -= largest->first;
      free_.erase(largest);
    }
    if (used_ + pooled_ + size > cap_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "size=", bytes, " (class ", size, ") does not fit under the device pool cap of ",
          cap_bytes_, " bytes on ", gpu::kBackendName, ":", device_, " (", used_, " in use)"));
    }
  }
  KD_GPU_RETURN_IF_ERROR(cudaSetDevice(device_));
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, size);
  if (err == cudaErrorMemoryAllocation && !free_.empty()) {
    cudaGetLastError();
    for (const auto& [s, p] : free_) FreeBlockLocked(p, s);
    free_.clear();
    pooled_ = 0;
    err = cudaMalloc(&ptr, size);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();  // out-of-memory is not sticky; clear it
    if (err == cudaErrorMemoryAllocation) {
      return absl::ResourceExhaustedError(
          absl::StrCat(gpu::kBackendName, ":", device_, " is out of memory for size=", bytes));
    }
    return CudaStatus(err, "cudaMalloc");
  }
  used_ += size;
  return Block{ptr, size};
}

void DevicePool::Release(const Block& block) {
  absl::MutexLock lock(&mu_);
  used_ -= block.size;
  free_.emplace(block.size, block.ptr);
  pooled_ += block.size;
}

absl::StatusOr<cudaIpcMemHandle_t> DevicePool::Export(void* ptr) {
  absl::MutexLock lock(&mu_);
  cudaIpcMemHandle_t handle;
  auto it = exported_.find(ptr);
  if (it != exported_.end()) {
    std::memcpy(&handle, it->second.data(), sizeof(handle));
    return handle;
  }
  KD_GPU_RETURN_IF_ERROR(cudaSetDevice(device_));
  KD_GPU_RETURN_IF_ERROR(cudaIpcGetMemHandle(&handle, ptr));
  exported_.emplace(ptr, std::string(reinterpret_cast<const char*>(&handle), sizeof(handle)));
  return handle;
}

bool DevicePool::Exported(const std::string& handle) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [ptr, bytes] : exported_) {
    if (bytes == handle) return true;
  }
  return false;
}

void DevicePool::Trim() {
  absl::MutexLock lock(&mu_);
  for (const auto& [size, ptr] : free_) FreeBlockLocked(ptr, size);
  free_.clear();
  pooled_ = 0;
}

void DevicePool::FreeBlockLocked(void* ptr, uint64_t) {
  exported_.erase(ptr);
  cudaSetDevice(device_);
  cudaFree(ptr);
}

uint64_t DevicePool::used() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

uint64_t DevicePool::pooled() const {
  absl::MutexLock lock(&mu_);
  return pooled_;
}

}  // namespace KD_GPU_NS
}  // namespace kd
