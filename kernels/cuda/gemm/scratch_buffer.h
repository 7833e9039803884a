// Device scratch a GEMM launch allocates itself when its caller gave none (internal to
// kernels/cuda/gemm).
#ifndef KERNELD_KERNELS_CUDA_GEMM_SCRATCH_BUFFER_H_
#define KERNELD_KERNELS_CUDA_GEMM_SCRATCH_BUFFER_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kd {
namespace cuda_gemm {

// cudaMallocAsync on the launch's stream, freed on it when the launch's work has been enqueued
// (stream order keeps it alive for that work).
class ScratchBuffer {
 public:
  explicit ScratchBuffer(cudaStream_t stream) : stream_(stream) {}
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  // RESOURCE_EXHAUSTED when the memory cannot be had, INTERNAL for another CUDA error.
  absl::Status Allocate(uint64_t bytes, absl::string_view what) {
    const cudaError_t err = cudaMallocAsync(&ptr_, bytes, stream_);
    if (err == cudaSuccess) return absl::OkStatus();
    ptr_ = nullptr;
    cudaGetLastError();
    const std::string message =
        absl::StrCat("gemm: scratch for ", what, " (", bytes, " bytes): ", cudaGetErrorString(err));
    if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
    return absl::InternalError(message);
  }
  void* get() const { return ptr_; }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_SCRATCH_BUFFER_H_
