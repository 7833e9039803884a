// Device helpers of the GEMM tuning harness (gemm_harness.cc): random inputs and the output
// comparison, so that nothing large crosses to the host.
#ifndef KERNELD_KERNELS_CUDA_GEMM_HARNESS_KERNELS_H_
#define KERNELD_KERNELS_CUDA_GEMM_HARNESS_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kd {
namespace cuda {

// Pseudo-random e4m3fn codes from `seed` (a counter hash, so the same seed gives the same bytes);
// the two NaN codes are replaced by their neighbours.
cudaError_t LaunchFillRandomE4M3(uint8_t* p, size_t n, uint64_t seed, cudaStream_t stream);
// Pseudo-random fp32 scales in [0.25, 2).
cudaError_t LaunchFillRandomScales(float* p, size_t n, uint64_t seed, cudaStream_t stream);

// What CompareOutputs found. Zero-initialise before the launch.
struct CompareRecord {
  unsigned long long nonfinite_ref;   // NaN/Inf elements of ref
  unsigned long long mismatches;      // elements of d outside the tolerance (NaN/Inf included)
  unsigned long long first_mismatch;  // lowest index of a mismatch (UINT64_MAX: none)
  unsigned int ref_absmax_bits;       // max |ref| as float bits
};

// Writes max |ref| and the count of non-finite ref elements into `record` (device memory).
cudaError_t LaunchRefStats(const void* ref, bool f32, size_t n, CompareRecord* record,
                           cudaStream_t stream);
// Counts elements with |d - ref| > rel * |ref| + abs_tol, or d non-finite.
cudaError_t LaunchCompareOutputs(const void* d, const void* ref, bool f32, size_t n, float rel,
                                 float abs_tol, CompareRecord* record, cudaStream_t stream);

}  // namespace cuda
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_HARNESS_KERNELS_H_
