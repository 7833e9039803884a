// The HIP backend (kerneld_hip, built when KD_HIP finds hipcc and libamdhip64): the GPU backend's
// one source (kernels/gpu) compiled by hipcc for AMD GPUs. A memory pool per GPU, HIP IPC
// import/export, non-blocking streams and IPC events, the quantize and pad kernels, every launch
// asynchronous; FP8 GEMMs follow the device-capability rule (e4m3fnuz operands on gfx940-gfx942,
// UNIMPLEMENTED on gfx90a) and no AMD GEMM kernel is wired in yet. Only a target that links
// kerneld_hip may call it; the daemon reaches it through BackendRegistry.
#ifndef KERNELD_KERNELS_HIP_BACKEND_H_
#define KERNELD_KERNELS_HIP_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kerneld/kernels/backend.h"

namespace kd {

// The HIP backend over every AMD device the HIP runtime finds, each pool capped at
// `pool_cap_bytes` (0: no cap beyond the device). FAILED_PRECONDITION naming the runtime's error
// when there is none (no AMD GPU, no amdgpu driver, or no access to /dev/kfd and /dev/dri).
absl::StatusOr<std::unique_ptr<Backend>> OpenHipBackend(uint64_t pool_cap_bytes);

}  // namespace kd

#endif  // KERNELD_KERNELS_HIP_BACKEND_H_
