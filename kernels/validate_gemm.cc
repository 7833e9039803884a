// Validation of GemmArgs. Alignment rules: K (the reduction) must be a multiple of 128, the scale
// block; M and N may be anything (the 128x128 scales of B cover a partial last block).
#include "kerneld/kernels/status_macros.h"
#include "kernels/ops_internal.h"

namespace kd {
namespace internal {

absl::Status ValidateGemm(const GemmArgs& a) {
  const std::initializer_list<DType> kFp8 = {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2};
  switch (a.variant) {
    case GemmVariant::kNT:
      break;
    case GemmVariant::kNN:
    case GemmVariant::kTN:
    case GemmVariant::kMGroupedNT:
    case GemmVariant::kKGroupedTN:
      return absl::UnimplementedError(absl::StrCat("gemm variant ", GemmVariantName(a.variant),
                                                   " is not implemented yet"));
    default:
      return Invalid("variant=", static_cast<int>(a.variant), " is unspecified or not a known value");
  }
  KD_RETURN_IF_ERROR(CheckTensor(a.a, "a", 2, kFp8));
  KD_RETURN_IF_ERROR(CheckTensor(a.b, "b", 2, kFp8));
  KD_RETURN_IF_ERROR(CheckTensor(a.d, "d", 2, {DType::kBF16, DType::kF32}));
  KD_RETURN_IF_ERROR(CheckTensor(a.a_scales, "a_scales", 2, {DType::kF32}));
  KD_RETURN_IF_ERROR(CheckTensor(a.b_scales, "b_scales", 2, {DType::kF32}));
  if ((a.a.dtype == DType::kE4M3FNUZ) != (a.b.dtype == DType::kE4M3FNUZ)) {
    return Invalid("a.dtype=", DTypeName(a.a.dtype), " and b.dtype=", DTypeName(a.b.dtype),
                   " mix an fnuz format with an OCP one");
  }
  const int64_t m = a.a.shape[0], k = a.a.shape[1], n = a.b.shape[0];
  if (a.b.shape[1] != k) {
    return Invalid("b.shape[1]=", a.b.shape[1], " must equal a.shape[1]=", k, " (K)");
  }
  if (k % kQuantBlock != 0) {
    return Invalid("a.shape[1]=", k, " (K) is not a multiple of block ", kQuantBlock);
  }
  KD_RETURN_IF_ERROR(CheckShape(a.a_scales, "a_scales", {m, k / kQuantBlock}));
  KD_RETURN_IF_ERROR(CheckShape(a.b_scales, "b_scales", {CeilDiv(n, kQuantBlock), k / kQuantBlock}));
  KD_RETURN_IF_ERROR(CheckShape(a.d, "d", {m, n}));
  if (a.accumulate && a.d.dtype != DType::kF32) {
    return Invalid("accumulate needs d.dtype=f32, got ", DTypeName(a.d.dtype));
  }
  if (a.group_ends.present()) return Invalid("group_ends is only for the grouped variants");
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace kd
