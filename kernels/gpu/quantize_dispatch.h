// The CUDA quantize op in one place: which kernel family runs a validated kd::QuantizeArgs, the
// op's QuantizeParams filled once, its scratch, and the launch. The backend lends the scratch and
// the error record (for jagged group ends) between MakeQuantizeParams and LaunchQuantize.
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_DISPATCH_H_
#define KERNELD_KERNELS_GPU_QUANTIZE_DISPATCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kerneld/kernels/ops.h"
#include "kernels/gpu/quantize_params.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {

// The params of `args` (passed kd::Validate; its tensors are device pointers) with the family and
// form that run it: kBlockwise for 1x128 and 128x128 of Y = X; kTiled for 1x128, 128x1 and
// 128x128 of Y = Xᵀ, 128x1 of Y = X and the dual passes (1x128, 128x128); kRowCol for per_row,
// per_tensor, mx1x32 and the jagged granularities. UNIMPLEMENTED for a granularity no CUDA kernel
// runs (the message names it). `error` and `scratch` are left null: see QuantizeNeedsErrorRecord
// and QuantizeScratchBytes.
absl::StatusOr<QuantizeParams> MakeQuantizeParams(const QuantizeArgs& args);

// Whether the op reads group ends on the device and reports a violation to params.error
// (host-mapped memory the caller reads once the stream's work completed).
bool QuantizeNeedsErrorRecord(const QuantizeParams& params);

// Device scratch the op needs in params.scratch, in bytes (0: none), 256-byte aligned.
uint64_t QuantizeScratchBytes(const QuantizeParams& params);

// Enqueues the op on `stream` (no host synchronisation): the family's launcher
// (quantize_params.h). Returns the launch's cudaError_t.
cudaError_t LaunchQuantize(const QuantizeParams& params, cudaStream_t stream);

// Does on the current device the one-time work of the first launch of every quantize kernel (the
// shared-memory opt-ins and occupancy queries that the families cache per device), so that no
// request pays it. Driver calls only: no allocation, no launch. The first error.
cudaError_t WarmQuantize();

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_DISPATCH_H_
