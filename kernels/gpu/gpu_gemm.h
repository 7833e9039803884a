// The FP8 GEMM as the vendor-neutral GPU backend (gpu_backend.cc) reaches it: its one call site.
// Each vendor's build links one implementation, which asks ChooseGemmKernel (gemm_dispatch.h)
// which kernel runs on the device:
//   NVIDIA  kernels/cuda/gpu_gemm_cuda.cc  the sm_90a wgmma GEMM (kernels/cuda/gemm, TN through
//                                          cuBLASLt) or the portable tile GEMM, and the tuning
//                                          harness
//   AMD     kernels/gpu/gpu_gemm_hip.cc    the portable tile GEMM (MFMA FP8 on gfx94x), no
//                                          tuning harness
// Before either is asked, the backend checks the device-capability rule (device_caps.h): an
// operand format the device's matrix cores do not take is FAILED_PRECONDITION, a device without
// FP8 matrix instructions UNIMPLEMENTED. What is asked here is what the kernels implement.
#ifndef KERNELD_KERNELS_GPU_GPU_GEMM_H_
#define KERNELD_KERNELS_GPU_GPU_GEMM_H_

#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/autotune_key.h"
#include "kerneld/kernels/backend.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/kernels/tune_harness.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {

// Stream-ordered device scratch of at least the bytes asked for, lent by the stream.
using GemmScratchFn = absl::FunctionRef<absl::StatusOr<void*>(uint64_t bytes)>;

// OK when a GEMM kernel of this build runs `g` on `device` (whose matrix cores take g's operand
// formats: the caller checked), else UNIMPLEMENTED saying what is missing.
absl::Status GpuGemmSupports(const GemmArgs& g, const DeviceProperties& device);

// Enqueues `g` on `stream` (of the current device, `device`); g passed GpuGemmSupports.
absl::Status LaunchGpuGemm(const GemmArgs& g, const DeviceProperties& device, cudaStream_t stream,
                           GemmScratchFn scratch);

// Called once when the backend opens, before any GEMM: loads what the kernels need at run time.
void PrepareGpuGemm();

// Called for each device when the backend opens, with `device` current: does there the one-time
// work that the first GEMM launch would otherwise pay (driver entry points, every kernel
// instantiation's shared-memory opt-in and occupancy, library handles). OK where there is none.
absl::Status WarmGpuGemm(const DeviceProperties& device);

// Scratch a stream of `device` (current) reserves when it is created, in bytes: what every GEMM
// there takes whatever its shape (the wgmma kernel's split-tail workspace), so that the first
// GEMM on a stream does not grow the memory pool; 0 where there is none.
uint64_t GpuGemmStreamScratchBytes(const DeviceProperties& device);

// Whether this build can tune a GEMM (Backend::CanTune), and the harness for `key`.
bool GpuGemmCanTune();
absl::StatusOr<std::unique_ptr<TuneHarness>> CreateGpuGemmTuneHarness(
    const TuneKey& key, absl::string_view reference_config, int device);

}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_GPU_GEMM_H_
