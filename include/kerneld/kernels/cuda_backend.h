// The CUDA backend (kerneld_cuda, built when KD_CUDA finds nvcc from the GPU backend's one source,
// kernels/gpu): a memory pool per GPU, CUDA IPC import/export, non-blocking streams and IPC events,
// the quantize and pad kernels and the FP8 GEMM, every launch asynchronous. The GEMM is the sm_90a
// wgmma kernel on sm_90 and the portable tile GEMM (mma.sync FP8) on the other NVIDIA devices from
// sm_89 on, and on sm_90 for a GemmArgs carrying a TileGemmConfig or operands other than e4m3fn
// (e5m2); a device without FP8 matrix instructions (sm_80, sm_86) answers UNIMPLEMENTED for it
// (kernels/gpu/gemm_dispatch.h), an operand format its matrix cores do not read
// FAILED_PRECONDITION (kernels/gpu/device_caps.h). Only a target that links kerneld_cuda may call
// it; the daemon reaches it through BackendRegistry.
#ifndef KERNELD_KERNELS_CUDA_BACKEND_H_
#define KERNELD_KERNELS_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kerneld/kernels/backend.h"

namespace kd {

// The CUDA backend over every device found, each pool capped at `pool_cap_bytes` (0: no cap
// beyond the device); nullptr when there is no driver or no device. Sets
// CUDA_MODULE_LOADING=EAGER (unless the environment sets it) before the driver initialises, so
// that every kernel is loaded with the context and no request pays a first-launch load.
std::unique_ptr<Backend> CreateCudaBackend(uint64_t pool_cap_bytes);
// The same, or FAILED_PRECONDITION saying why there is no CUDA device (the runtime's error).
absl::StatusOr<std::unique_ptr<Backend>> OpenCudaBackend(uint64_t pool_cap_bytes);

}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_BACKEND_H_
