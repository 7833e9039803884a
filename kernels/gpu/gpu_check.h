// CUDA (and HIP, through vendor.h) errors become absl::Status values here, at the backend's edge,
// and nowhere else.
#ifndef KERNELD_KERNELS_GPU_GPU_CHECK_H_
#define KERNELD_KERNELS_GPU_GPU_CHECK_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {

// True for errors after which the CUDA context is unusable (illegal address, a kernel fault...):
// the backend marks itself unhealthy when it sees one.
inline bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
#if KD_GPU_AMD
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorAssert:
    case hipErrorECCNotCorrectable:
    case hipErrorUnknown:
      return true;
#else
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorUnknown:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
      return true;
#endif
    default:
      return false;
  }
}

// The Status for a failed CUDA call: RESOURCE_EXHAUSTED for out-of-memory, INTERNAL otherwise.
inline absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace KD_GPU_NS
}  // namespace kd

// Returns a Status from the enclosing function when the CUDA call `expr` fails.
#define KD_GPU_RETURN_IF_ERROR(expr)                                               \
  do {                                                                             \
    const cudaError_t kd_cuda_err_ = (expr);                                       \
    if (kd_cuda_err_ != cudaSuccess) return ::kd::CudaStatus(kd_cuda_err_, #expr); \
  } while (0)

#endif  // KERNELD_KERNELS_GPU_GPU_CHECK_H_
