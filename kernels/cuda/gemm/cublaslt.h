// cuBLASLt's block-scaled FP8 matmul, the one place kerneld talks to cuBLASLt (NVIDIA only):
// the GEMM's cuBLASLt family (cublaslt_gemm.h) runs through it, and bench/gpu_gemm times it as
// the peer of kerneld's kernel.
//
// The library is loaded at run time with dlopen, never linked: the daemon links the CUDA runtime
// statically and no libcuda so that it starts on any machine, and a missing cuBLASLt only means
// that the family is not offered (CublasLtGemmLoaded in gemm_fp8_heuristic.h).
#ifndef KERNELD_KERNELS_CUDA_GEMM_CUBLASLT_H_
#define KERNELD_KERNELS_CUDA_GEMM_CUBLASLT_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kerneld/kernels/dtype.h"

namespace kd {
namespace cuda_gemm {

// The cuBLASLt entry points kerneld uses, resolved from the loaded library.
struct CublasLtApi {
  std::string path;    // what dlopen loaded
  size_t version = 0;  // cublasLtGetVersion(): major * 10000 + minor * 100 + patch
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;  // may be null
};

// The process's cuBLASLt, loaded on the first call: $KERNELD_CUBLASLT when set (the library, or
// a folder holding libcublasLt.so.13 or .12, such as a pip wheel's nvidia/cu13/lib), else
// libcublasLt.so.13, libcublasLt.so.12 through the loader's search, then both under
// /usr/local/cuda/lib64. Thread-safe; the
// answer never changes once given. On success also SetCublasLtGemmLoaded(true). UNIMPLEMENTED,
// naming what was tried, when none loads, lacks an entry point, or predates block-scaled FP8
// (cuBLASLt 12.9).
absl::StatusOr<const CublasLtApi*> LoadCublasLt();

// Creates the current device's handle now (cublasLtCreate, which the device's first plan would
// otherwise call). OK, doing nothing, when cuBLASLt is not loaded; INTERNAL naming the error.
absl::Status OpenCublasLtHandle();

// Scratch for cuBLASLt's algorithms (split-K partials and the like): every plan's heuristic is
// asked for algorithms within it, and every Run gets this much.
constexpr size_t kCublasLtWorkspaceBytes = size_t{32} << 20;

// One blockwise-scaled FP8 product in kerneld's terms: D (m, n) = A (m, k) · B (n, k)ᵀ with fp32
// accumulation, A and B e4m3fn and contiguous along k. Scales are fp32: A's one per 1x128 block
// along k (cuBLASLt's VEC128); B's per 1x128 block too, or per 128x128 tile (`b_tiles`,
// BLK128x128). cuBLASLt reads VEC128 scales of a matrix of R rows as (k/128, R) contiguous (each
// K block's R scales adjacent: kerneld's K-block-major layout with ld = R), BLK128x128 scales of B
// as (ceil(n/128), k/128) contiguous.
struct BlockScaledProblem {
  int64_t m = 0, n = 0, k = 0;  // k a multiple of 128
  int64_t lda = 0, ldb = 0;     // row strides of A and B in bytes, multiples of 16
  int64_t ldd = 0;              // row stride of D (Dᵀ when d_transposed) in elements
  bool b_tiles = false;
  DType d_dtype = DType::kBF16;  // kBF16 or kF32
  bool accumulate = false;       // D += A·Bᵀ (beta = 1); f32 D only
  // Write Dᵀ, (n, m) row-major, instead of D: cuBLASLt's own orientation for A (m, k) (its
  // column-major output); otherwise the operands are swapped so that D comes out row-major.
  bool d_transposed = false;
  // Alignment in bytes (a power of two, at most 256) of the addresses the plan will be run with:
  // cuBLASLt's heuristic returns only algorithms that can read them (its default assumes 256).
  int align_a = 256, align_b = 256, align_d = 256;

  bool operator==(const BlockScaledProblem& o) const;
};

// The largest power of two, at most 256, that divides `p`'s address.
int AddressAlignment(const void* p);

// A problem's cuBLASLt descriptors and the algorithms its heuristic ranked for it, built once per
// (device, problem) and shared. Thread-safe.
class CublasLtPlan {
 public:
  // The plan for `p` on the current device, from the process's cache (built on first use: the
  // descriptors and one heuristic query; later calls only look it up). UNIMPLEMENTED when cuBLASLt
  // is not loaded or has no algorithm for the problem; INVALID_ARGUMENT for a problem that breaks
  // BlockScaledProblem's rules; INTERNAL for another cuBLASLt or CUDA error.
  static absl::StatusOr<std::shared_ptr<CublasLtPlan>> Get(const BlockScaledProblem& p);

  CublasLtPlan(const CublasLtPlan&) = delete;
  CublasLtPlan& operator=(const CublasLtPlan&) = delete;
  ~CublasLtPlan();

  // How many algorithms the heuristic returned (1..kCublasLtGemmAlgos).
  int algos() const { return static_cast<int>(algos_.size()); }

  // Enqueues the product with algorithm `algo` (0: the heuristic's first choice) on `stream`:
  // device pointers with the plan's problem's layouts and alignments; `workspace` holds
  // kCublasLtWorkspaceBytes, unused by anything else until this work has run (stream order
  // suffices); scale pointers 16-byte aligned. INVALID_ARGUMENT for an algo out of range,
  // INTERNAL for a cuBLASLt error (named).
  absl::Status Run(int algo, const void* a, const float* a_scales, const void* b,
                   const float* b_scales, void* d, void* workspace, cudaStream_t stream);

 private:
  CublasLtPlan() = default;
  absl::Status Build(const CublasLtApi& api, cublasLtHandle_t handle, const BlockScaledProblem& p);

  const CublasLtApi* api_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  BlockScaledProblem problem_;
  absl::Mutex mu_;  // the scale pointers are attributes of desc_, set per run
  cublasLtMatmulDesc_t desc_ ABSL_GUARDED_BY(mu_) = nullptr;
  cublasLtMatrixLayout_t lt_a_ = nullptr, lt_b_ = nullptr, lt_d_ = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos_;
};

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_CUBLASLT_H_
