// The gemm op: its rules and metric labels (OpTraits<GemmArgs>). Validation is one rule per
// check. Shapes per variant (R is the reduction, always a
// multiple of the 128-wide scale block; the other dimensions may be anything, the 128x128 weight
// scales cover a partial last block):
//   NT          a (M,R) [a_scales (M,R/128)]  b (N,R) [b_scales (ceil(N/128),R/128)]  d (M,N)
//   NN (dgrad)  a (M,R) [a_scales (M,R/128)]  b (R,N) [b_scales (R/128,ceil(N/128))]  d (M,N)
//   TN (wgrad)  a (M,R) [a_scales (M,R/128)]  b (N,R) [b_scales (N,R/128)]            d (M,N)
//   M-grouped   a (T,R) [a_scales (T,R/128)]  b (E,N,R) [b_scales (E,ceil(N/128),R/128)]
//               group_ends (E)  d (T,N)
//   K-grouped   a (M,T) [a_scales (M,T/128)]  b (N,T) [b_scales (N,T/128)]
//               group_ends (E)  d (E,M,N); T a multiple of 128
// (the proto names these dimensions after the layer: for NN, a = dY (M,N) and b = W (N,K)).
// The 1x128 scales (a_scales of every variant, b_scales of TN and K-grouped) are row-major or
// K-block-major: the (R/128, rows) tensor Quantize writes with SCALE_LAYOUT_K_BLOCK_MAJOR, named as
// the (rows, R/128) view with strides (1, ld), ld >= rows.
// Group end values live in memory a validator may not read (device memory): the backend reads
// them, copies them and checks them with CheckGroupEnds (and, for K-grouped, that each end is a
// multiple of 128) before use.
#include "kerneld/kernels/status_macros.h"
#include "kernels/ops/checks.h"

namespace kd {
namespace {

using internal::CeilDiv;
using internal::CheckShape;
using internal::CheckTensor;
using internal::Invalid;
using internal::Layout;

constexpr std::initializer_list<DType> kFp8 = {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2};

absl::Status CheckReduction(int64_t r, absl::string_view where) {
  if (r % kQuantBlock != 0) {
    return Invalid(where, "=", r, " (the reduction) is not a multiple of block ", kQuantBlock);
  }
  return absl::OkStatus();
}

bool IsGrouped(GemmVariant v) {
  return v == GemmVariant::kMGroupedNT || v == GemmVariant::kKGroupedTN;
}

// Whether b_scales are 1x128 (per row of B) rather than 128x128 blocks.
bool PerRowBScales(GemmVariant v) { return v == GemmVariant::kTN || v == GemmVariant::kKGroupedTN; }

// A 1x128 scale tensor that CheckTensor let through transposed: each K block's row of scales
// must not overlap the next.
absl::Status CheckKBlockMajorScales(const Tensor& t, absl::string_view field) {
  if (t.strides[1] == 1 || t.strides[0] != 1 || t.strides[1] >= t.shape[0]) {
    return absl::OkStatus();
  }
  return Invalid(field, ".strides[1]=", t.strides[1], " must be >= shape[0]=", t.shape[0],
                 " (K-block-major scales: one row of ", t.shape[0], " scales per K block)");
}

}  // namespace

std::string OpTraits<GemmArgs>::VariantLabel(const GemmArgs& g) {
  return std::string(GemmVariantName(g.variant));
}

uint32_t OpTraits<GemmArgs>::VariantKey(const GemmArgs& g) {
  return static_cast<uint32_t>(g.variant);
}

absl::Status OpTraits<GemmArgs>::Validate(const GemmArgs& a) {
  if (!IsKnown(a.variant)) {
    return Invalid("variant=", static_cast<int>(a.variant), " is unspecified or not a known value");
  }
  const GemmVariant v = a.variant;
  const int b_rank = v == GemmVariant::kMGroupedNT ? 3 : 2;
  const int d_rank = v == GemmVariant::kKGroupedTN ? 3 : 2;
  KD_RETURN_IF_ERROR(CheckTensor(a.a, "a", 2, kFp8));
  KD_RETURN_IF_ERROR(CheckTensor(a.b, "b", b_rank, kFp8));
  KD_RETURN_IF_ERROR(CheckTensor(a.d, "d", d_rank, {DType::kBF16, DType::kF32}));
  KD_RETURN_IF_ERROR(
      CheckTensor(a.a_scales, "a_scales", 2, {DType::kF32}, Layout::kOrTransposed2d));
  KD_RETURN_IF_ERROR(CheckKBlockMajorScales(a.a_scales, "a_scales"));
  KD_RETURN_IF_ERROR(
      CheckTensor(a.b_scales, "b_scales", b_rank, {DType::kF32},
                  PerRowBScales(v) ? Layout::kOrTransposed2d : Layout::kInnermostContiguous));
  if (PerRowBScales(v)) KD_RETURN_IF_ERROR(CheckKBlockMajorScales(a.b_scales, "b_scales"));
  if ((a.a.dtype == DType::kE4M3FNUZ) != (a.b.dtype == DType::kE4M3FNUZ)) {
    return Invalid("a.dtype=", DTypeName(a.a.dtype), " and b.dtype=", DTypeName(a.b.dtype),
                   " mix an fnuz format with an OCP one");
  }
  if (a.accumulate && a.d.dtype != DType::kF32) {
    return Invalid("accumulate needs d.dtype=f32, got ", DTypeName(a.d.dtype));
  }
  if (!IsGrouped(v) && a.group_ends.present()) {
    return Invalid("group_ends is only for the grouped variants, not ", GemmVariantName(v));
  }

  const int64_t m = a.a.shape[0], r = a.a.shape[1];
  switch (v) {
    case GemmVariant::kNT:
    case GemmVariant::kTN: {
      const int64_t n = a.b.shape[0];
      if (a.b.shape[1] != r) {
        return Invalid("b.shape[1]=", a.b.shape[1], " must equal a.shape[1]=", r,
                       " (the reduction)");
      }
      KD_RETURN_IF_ERROR(CheckReduction(r, "a.shape[1]"));
      KD_RETURN_IF_ERROR(CheckShape(a.a_scales, "a_scales", {m, r / kQuantBlock}));
      const int64_t b_scale_rows = v == GemmVariant::kNT ? CeilDiv(n, kQuantBlock) : n;
      KD_RETURN_IF_ERROR(CheckShape(a.b_scales, "b_scales", {b_scale_rows, r / kQuantBlock}));
      return CheckShape(a.d, "d", {m, n});
    }
    case GemmVariant::kNN: {
      const int64_t n = a.b.shape[1];
      if (a.b.shape[0] != r) {
        return Invalid("b.shape[0]=", a.b.shape[0], " must equal a.shape[1]=", r,
                       " (the reduction)");
      }
      KD_RETURN_IF_ERROR(CheckReduction(r, "a.shape[1]"));
      KD_RETURN_IF_ERROR(CheckShape(a.a_scales, "a_scales", {m, r / kQuantBlock}));
      KD_RETURN_IF_ERROR(
          CheckShape(a.b_scales, "b_scales", {r / kQuantBlock, CeilDiv(n, kQuantBlock)}));
      return CheckShape(a.d, "d", {m, n});
    }
    case GemmVariant::kMGroupedNT: {
      const int64_t experts = a.b.shape[0], n = a.b.shape[1];
      if (a.b.shape[2] != r) {
        return Invalid("b.shape[2]=", a.b.shape[2], " must equal a.shape[1]=", r,
                       " (the reduction)");
      }
      KD_RETURN_IF_ERROR(CheckReduction(r, "a.shape[1]"));
      KD_RETURN_IF_ERROR(CheckShape(a.a_scales, "a_scales", {m, r / kQuantBlock}));
      KD_RETURN_IF_ERROR(
          CheckShape(a.b_scales, "b_scales", {experts, CeilDiv(n, kQuantBlock), r / kQuantBlock}));
      KD_RETURN_IF_ERROR(CheckTensor(a.group_ends, "group_ends", 1, {DType::kI32, DType::kI64}));
      KD_RETURN_IF_ERROR(CheckShape(a.group_ends, "group_ends", {experts}));
      return CheckShape(a.d, "d", {m, n});
    }
    case GemmVariant::kKGroupedTN: {
      const int64_t n = a.b.shape[0], experts = a.d.shape[0];
      if (a.b.shape[1] != r) {
        return Invalid("b.shape[1]=", a.b.shape[1], " must equal a.shape[1]=", r,
                       " (the reduction, all groups' tokens)");
      }
      KD_RETURN_IF_ERROR(CheckReduction(r, "a.shape[1]"));
      KD_RETURN_IF_ERROR(CheckShape(a.a_scales, "a_scales", {m, r / kQuantBlock}));
      KD_RETURN_IF_ERROR(CheckShape(a.b_scales, "b_scales", {n, r / kQuantBlock}));
      KD_RETURN_IF_ERROR(CheckTensor(a.group_ends, "group_ends", 1, {DType::kI32, DType::kI64}));
      KD_RETURN_IF_ERROR(CheckShape(a.group_ends, "group_ends", {experts}));
      return CheckShape(a.d, "d", {experts, m, n});
    }
    default:
      break;
  }
  return absl::OkStatus();
}

}  // namespace kd
