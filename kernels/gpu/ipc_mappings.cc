#include "kernels/gpu/ipc_mappings.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/gpu/gpu_check.h"
#include "kernels/gpu/vendor.h"
#if KD_GPU_NVIDIA
#include <cuda.h>
#endif

namespace kd {
inline namespace KD_GPU_NS {
namespace {

#if KD_GPU_NVIDIA
using MemGetAddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// cuMemGetAddressRange from the driver, or nullptr. NOTE: resolved at run time so that the
// binary does not link libcuda and starts on machines without a driver.
MemGetAddressRangeFn MemGetAddressRange() {
  static const MemGetAddressRangeFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &ptr, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<MemGetAddressRangeFn>(nullptr);
    }
    return reinterpret_cast<MemGetAddressRangeFn>(ptr);
  }();
  return fn;
}
#endif

// The base and size of the allocation `ptr` points into (the driver's address range).
#if KD_GPU_AMD
constexpr const char* kIpcGetMemHandle = "hipIpcGetMemHandle";
#else
constexpr const char* kIpcGetMemHandle = "cudaIpcGetMemHandle";
#endif

absl::Status AllocationRange(void* ptr, uintptr_t* base, size_t* size) {
#if KD_GPU_NVIDIA
  MemGetAddressRangeFn range = MemGetAddressRange();
  if (range == nullptr) {
    return absl::InternalError("cuMemGetAddressRange is not available from the CUDA driver");
  }
  CUdeviceptr range_base = 0;
  const CUresult res = range(&range_base, size, reinterpret_cast<CUdeviceptr>(ptr));
  if (res != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("cuMemGetAddressRange failed with CUresult ", res));
  }
  *base = static_cast<uintptr_t>(range_base);
#else
  hipDeviceptr_t range_base = nullptr;
  const hipError_t err = hipMemGetAddressRange(&range_base, size, ptr);
  if (err != hipSuccess) return CudaStatus(err, "hipMemGetAddressRange");
  *base = reinterpret_cast<uintptr_t>(range_base);
#endif
  return absl::OkStatus();
}

}  // namespace

IpcMappings::IpcMappings(int device_count) : mapped_bytes_(device_count, 0) {}

IpcMappings::~IpcMappings() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, mapping] : open_) {
    cudaSetDevice(key.first);
    cudaIpcCloseMemHandle(mapping.base);
  }
  open_.clear();
}

absl::StatusOr<void*> IpcMappings::Open(int device, const std::string& handle, uint64_t offset,
                                        uint64_t size) {
  if (handle.size() != sizeof(cudaIpcMemHandle_t)) {
    return absl::InvalidArgumentError(absl::StrCat("ipc_handle has ", handle.size(),
                                                   " bytes; a cudaIpcMemHandle_t has ",
                                                   sizeof(cudaIpcMemHandle_t)));
  }
  if (device < 0 || device >= static_cast<int>(mapped_bytes_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("device=", device, " does not exist"));
  }
  absl::MutexLock lock(&mu_);
  const Key key(device, handle);
  auto it = open_.find(key);
  bool opened_here = false;
  if (it == open_.end()) {
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.data(), sizeof(h));
    void* base = nullptr;
    const cudaError_t err = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::InvalidArgumentError(
          absl::StrCat("ipc_handle cannot be opened on device ", device, ": ",
                       cudaGetErrorName(err), " (", cudaGetErrorString(err),
                       "); it must come from ", kIpcGetMemHandle, " in another process"));
    }
    uintptr_t range_base = 0;
    size_t range_size = 0;
    if (const absl::Status ranged = AllocationRange(base, &range_base, &range_size); !ranged.ok()) {
      cudaIpcCloseMemHandle(base);
      return ranged;
    }
    // The mapping starts at the allocation's base; count from where the mapping starts.
    const uint64_t mapped = range_size - (reinterpret_cast<uintptr_t>(base) - range_base);
    it = open_.emplace(key, Mapping{base, mapped, 0}).first;
    mapped_bytes_[device] += mapped;
    opened_here = true;
  }
  Mapping& m = it->second;
  if (offset > m.size || size > m.size - offset) {
    const uint64_t real = m.size;
    if (opened_here) {
      cudaSetDevice(device);
      cudaIpcCloseMemHandle(m.base);
      mapped_bytes_[device] -= m.size;
      open_.erase(it);
    }
    return absl::InvalidArgumentError(absl::StrCat("offset=", offset, " + size=", size,
                                                   " exceeds the real size ", real,
                                                   " of the allocation ipc_handle names"));
  }
  ++m.refs;
  return static_cast<char*>(m.base) + offset;
}

void IpcMappings::Close(int device, const std::string& handle) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(Key(device, handle));
  if (it == open_.end()) return;
  if (--it->second.refs > 0) return;
  cudaSetDevice(device);
  cudaIpcCloseMemHandle(it->second.base);
  mapped_bytes_[device] -= it->second.size;
  open_.erase(it);
}

uint64_t IpcMappings::mapped_bytes(int device) const {
  absl::MutexLock lock(&mu_);
  if (device < 0 || device >= static_cast<int>(mapped_bytes_.size())) return 0;
  return mapped_bytes_[device];
}

int IpcMappings::open_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(open_.size());
}

}  // namespace KD_GPU_NS
}  // namespace kd
