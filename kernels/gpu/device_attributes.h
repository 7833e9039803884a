// Attributes of a CUDA device that launch paths read on every launch (the SM count), and per
// kernel the CTAs that fit on an SM, each read from the runtime once per device and cached: a
// cudaDeviceGetAttribute or occupancy query is a driver call that a launch should not repeat.
// Header-only, so that the CUDA backend and the GEMM library (built alone by its benchmark) share
// it. Thread-safe: concurrent first calls may each query, and store the same value.
#ifndef KERNELD_KERNELS_GPU_DEVICE_ATTRIBUTES_H_
#define KERNELD_KERNELS_GPU_DEVICE_ATTRIBUTES_H_

#include <atomic>

#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {

// Devices whose values are cached; values of devices past this are queried on every call.
constexpr int kMaxCachedDevices = 64;

// One cached int per device; 0 means not read yet (every cached value is positive).
class PerDeviceValue {
 public:
  // The value for `device`, computing it with `read(int* value)` (a cudaError_t) on a miss.
  template <typename Read>
  cudaError_t Get(int device, int* value, Read read) {
    if (device >= 0 && device < kMaxCachedDevices) {
      *value = values_[device].load(std::memory_order_acquire);
      if (*value > 0) return cudaSuccess;
    }
    const cudaError_t err = read(value);
    if (err == cudaSuccess && *value > 0 && device >= 0 && device < kMaxCachedDevices) {
      values_[device].store(*value, std::memory_order_release);
    }
    return err;
  }

 private:
  std::atomic<int> values_[kMaxCachedDevices] = {};
};

// The SM count of the current device.
inline cudaError_t CurrentSmCount(int* sms) {
  static PerDeviceValue cache;
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  return cache.Get(device, sms, [device](int* v) {
    return cudaDeviceGetAttribute(v, cudaDevAttrMultiProcessorCount, device);
  });
}

// CTAs of `kKernel` with `threads` threads (and no dynamic shared memory) that fit on one SM of
// the current device at once; cached per kernel and device, so each instantiation is queried with
// one thread count only.
template <auto kKernel>
cudaError_t CtasPerSm(int threads, int* ctas) {
  static PerDeviceValue cache;
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  return cache.Get(device, ctas, [threads](int* v) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(v, kKernel, threads, 0);
  });
}

// Opts `kKernel` in to `bytes` of dynamic shared memory
// (cudaFuncAttributeMaxDynamicSharedMemorySize) on the current device, once per device: the
// attribute belongs to the device, not the process. Each instantiation is opted in with one size
// only.
template <auto kKernel>
cudaError_t OptInSharedMemory(int bytes) {
  static PerDeviceValue done;
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int unused = 0;
  return done.Get(device, &unused, [bytes](int* v) {
    *v = 1;
    return cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  });
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_DEVICE_ATTRIBUTES_H_
