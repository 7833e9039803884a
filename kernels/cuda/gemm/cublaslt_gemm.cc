#include "kernels/cuda/gemm/cublaslt_gemm.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/cuda/gemm/cublaslt.h"
#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"
#include "kernels/cuda/gemm/scratch_buffer.h"
#include "kernels/gpu/transpose_scales.h"

namespace kd {
namespace {

// Rows a scale copy can take (LaunchTransposeScales covers at most 65535 tiles of 32 along them).
constexpr int64_t kMaxRows = int64_t{65535} * 32;

uint64_t RoundUp256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

absl::Status Unsupported(absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("the cublaslt gemm does not take this op: ", why));
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether cuBLASLt reads 1x128 scales `t` (rows, blocks) as they are: K-block-major with ld =
// rows (for one block, any column of rows contiguous floats), 16-byte aligned.
bool ReadableAsIs(const Tensor& t) {
  const int64_t rows = t.shape[0], blocks = t.shape[1];
  const bool layout = t.strides[0] == 1 && (blocks == 1 || t.strides[1] == rows);
  return layout && Aligned16(t.data);
}

uint64_t ScaleCopyBytes(const Tensor& t) {
  return RoundUp256(static_cast<uint64_t>(t.shape[0]) * t.shape[1] * sizeof(float));
}

// Copies 1x128 scales `t` (rows, blocks), any layout, into `dst` as (blocks, rows) contiguous.
cudaError_t CopyKBlockMajor(const Tensor& t, float* dst, cudaStream_t stream) {
  const int64_t rows = t.shape[0], blocks = t.shape[1];
  const float* src = t.as<const float>();
  if (t.strides[0] == 1) {  // K-block-major with ld != rows, or unaligned: a strided copy
    const int64_t ld = blocks == 1 ? rows : t.strides[1];
    return cudaMemcpy2DAsync(dst, rows * sizeof(float), src, ld * sizeof(float),
                             rows * sizeof(float), blocks, cudaMemcpyDeviceToDevice, stream);
  }
  // Row-major (row stride t.strides[0] >= blocks): its transpose, (blocks, rows).
  return cuda::LaunchTransposeScales(src, t.strides[0], blocks, rows, dst, stream);
}

}  // namespace

absl::Status CublasLtGemmSupports(const GemmArgs& args) {
  if (args.variant != GemmVariant::kTN) {
    return Unsupported(absl::StrCat("variant ", GemmVariantName(args.variant), " (tn only)"));
  }
  if (args.a.dtype != DType::kE4M3FN || args.b.dtype != DType::kE4M3FN) {
    return Unsupported("a and b must be e4m3fn");
  }
  const int64_t m = args.a.shape[0], n = args.b.shape[0];
  if (!CublasLtGemmTakesShape(m, n)) {
    return Unsupported(absl::StrCat("M=", m, " and N=", n, " must be multiples of 16"));
  }
  if (m > kMaxRows || n > kMaxRows) {
    return Unsupported(absl::StrCat("M=", m, " and N=", n, " must be at most ", kMaxRows));
  }
  const int64_t d_bytes = args.d.strides[0] * static_cast<int64_t>(DTypeSize(args.d.dtype));
  if (!Aligned16(args.a.data) || !Aligned16(args.b.data) || !Aligned16(args.d.data) ||
      args.a.strides[0] % 16 != 0 || args.b.strides[0] % 16 != 0 || d_bytes % 16 != 0) {
    return Unsupported(
        "a, b and d must start 16-byte aligned with row strides of 16-byte multiples");
  }
  absl::StatusOr<const cuda_gemm::CublasLtApi*> api = cuda_gemm::LoadCublasLt();
  if (!api.ok()) return api.status();
  return absl::OkStatus();
}

uint64_t CublasLtGemmScratchBytes(const GemmArgs& args) {
  return RoundUp256(cuda_gemm::kCublasLtWorkspaceBytes) + ScaleCopyBytes(args.a_scales) +
         ScaleCopyBytes(args.b_scales);
}

absl::Status LaunchCublasLtGemm(const GemmArgs& args, const CublasLtGemmConfig& config,
                                cudaStream_t stream, void* scratch) {
  KD_RETURN_IF_ERROR(CublasLtGemmSupports(args));
  cuda_gemm::BlockScaledProblem p;
  p.m = args.a.shape[0];
  p.n = args.b.shape[0];
  p.k = args.a.shape[1];
  p.lda = args.a.strides[0];
  p.ldb = args.b.strides[0];
  p.ldd = args.d.strides[0];
  p.d_dtype = args.d.dtype;
  p.accumulate = args.accumulate;
  p.align_a = cuda_gemm::AddressAlignment(args.a.data);
  p.align_b = cuda_gemm::AddressAlignment(args.b.data);
  p.align_d = cuda_gemm::AddressAlignment(args.d.data);
  KD_ASSIGN_OR_RETURN(std::shared_ptr<cuda_gemm::CublasLtPlan> plan,
                      cuda_gemm::CublasLtPlan::Get(p));
  if (config.algo < 0 || config.algo >= plan->algos()) {
    return absl::InvalidArgumentError(absl::StrCat("config.algo=", config.algo, " is past the ",
                                                   plan->algos(),
                                                   " algorithms cuBLASLt ranks for this problem"));
  }
  cuda_gemm::ScratchBuffer owned(stream);
  if (scratch == nullptr) {
    KD_RETURN_IF_ERROR(owned.Allocate(CublasLtGemmScratchBytes(args), "cublaslt"));
    scratch = owned.get();
  }
  char* base = static_cast<char*>(scratch);
  void* workspace = base;
  float* a_copy = reinterpret_cast<float*>(base + RoundUp256(cuda_gemm::kCublasLtWorkspaceBytes));
  float* b_copy =
      reinterpret_cast<float*>(reinterpret_cast<char*>(a_copy) + ScaleCopyBytes(args.a_scales));
  const float* a_scales = args.a_scales.as<const float>();
  const float* b_scales = args.b_scales.as<const float>();
  cudaError_t err = cudaSuccess;
  if (!ReadableAsIs(args.a_scales)) {
    err = CopyKBlockMajor(args.a_scales, a_copy, stream);
    a_scales = a_copy;
  }
  if (err == cudaSuccess && !ReadableAsIs(args.b_scales)) {
    err = CopyKBlockMajor(args.b_scales, b_copy, stream);
    b_scales = b_copy;
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(
        absl::StrCat("cublaslt gemm: scale copy: ", cudaGetErrorString(err)));
  }
  return plan->Run(config.algo, args.a.data, a_scales, args.b.data, b_scales, args.d.data,
                   workspace, stream);
}

}  // namespace kd
