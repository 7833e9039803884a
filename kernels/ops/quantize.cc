// The quantize op: its rules and metric labels (OpTraits<QuantizeArgs>). Validation is one rule
// per check, each failing with INVALID_ARGUMENT naming the field and the rule. The rules, tail
// rules included, are those of QuantizeOp and QuantGranularity in proto/kerneld/v1/kerneld.proto.
// Checks happen in a fixed order (tensors and enums first, then shapes), so a request that breaks
// several rules always reads the same. Group ends are data: they are checked by the backend when it
// reads them (CheckGroupEnds).
#include <cmath>
#include <limits>

#include "kerneld/kernels/status_macros.h"
#include "kernels/ops/checks.h"

namespace kd {
namespace {

using internal::CeilDiv;
using internal::CheckShape;
using internal::CheckTensor;
using internal::Invalid;

bool IsJagged(QuantGranularity g) {
  return g == QuantGranularity::kJaggedRowwise || g == QuantGranularity::kJaggedColwise;
}

absl::Status CheckMultiple(int64_t value, absl::string_view field, int64_t block,
                           absl::string_view dim) {
  if (value % block == 0) return absl::OkStatus();
  return Invalid(field, "=", value, " is not a multiple of block ", block, " (", dim, ")");
}

// The 1x128 scale shape of a matrix (rows, cols) in `layout`.
absl::Status Check1x128Scales(const Tensor& scales, absl::string_view field, int64_t rows,
                              int64_t cols, ScaleLayout layout) {
  KD_RETURN_IF_ERROR(CheckTensor(scales, field, 2, {DType::kF32}));
  if (layout == ScaleLayout::kKBlockMajor) {
    return CheckShape(scales, field, {cols / kQuantBlock, rows});
  }
  return CheckShape(scales, field, {rows, cols / kQuantBlock});
}

}  // namespace

std::string OpTraits<QuantizeArgs>::VariantLabel(const QuantizeArgs& q) {
  std::string label(GranularityName(q.granularity));
  if (q.output_t.present())
    label += "_dual";
  else if (q.transpose_output)
    label += "_t";
  return label;
}

uint32_t OpTraits<QuantizeArgs>::VariantKey(const QuantizeArgs& q) {
  const uint32_t form = q.output_t.present() ? 2 : q.transpose_output ? 1 : 0;
  return static_cast<uint32_t>(q.granularity) << 2 | form;
}

absl::Status OpTraits<QuantizeArgs>::Validate(const QuantizeArgs& a) {
  const QuantGranularity g = a.granularity;
  KD_RETURN_IF_ERROR(CheckTensor(a.input, "input", 2, {DType::kF32, DType::kBF16, DType::kF16}));
  KD_RETURN_IF_ERROR(
      CheckTensor(a.output, "output", 2, {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2}));
  if (!IsKnown(g)) {
    return Invalid("granularity=", static_cast<int>(g), " is unspecified or not a known value");
  }
  if (!IsKnown(a.scale_format)) {
    return Invalid("scale_format=", static_cast<int>(a.scale_format), " is not a known value");
  }
  if (!IsKnown(a.scale_layout)) {
    return Invalid("scale_layout=", static_cast<int>(a.scale_layout), " is not a known value");
  }
  if (a.mx_rounding != MxRounding::kFloor && a.mx_rounding != MxRounding::kRceil) {
    return Invalid("mx_rounding=", static_cast<int>(a.mx_rounding), " is not a known value");
  }
  if (!(a.eps > 0.0f) || !std::isfinite(a.eps)) {
    return Invalid("eps=", a.eps, " must be finite and > 0");
  }
  const float fp8_max = Fp8Max(a.output.dtype);
  if (!std::isfinite(fp8_max / a.eps)) {
    return Invalid("eps=", a.eps, " is too small: FP8_MAX/eps = ", fp8_max, "/eps overflows fp32");
  }

  // Which options the granularity allows.
  if (g == QuantGranularity::kJaggedRowwise && a.transpose_output) {
    return Invalid("transpose_output must be false for jagged_rowwise");
  }
  if (g == QuantGranularity::kJaggedColwise && !a.transpose_output) {
    return Invalid("transpose_output must be true for jagged_colwise (its output is Xᵀ (K,M))");
  }
  if (a.scale_layout == ScaleLayout::kKBlockMajor && g != QuantGranularity::k1x128 &&
      g != QuantGranularity::kJaggedRowwise) {
    return Invalid("scale_layout=k_block_major is only defined for 1x128 and jagged_rowwise, not ",
                   GranularityName(g));
  }
  if (g == QuantGranularity::kMx1x32) {
    if (a.scale_format == ScaleFormat::kPow2) {
      return Invalid("scale_format=pow2 is not defined for mx1x32 (e8m0 scales are powers of two)");
    }
    if (a.output.dtype == DType::kE4M3FNUZ) {
      return Invalid("output.dtype=e4m3fnuz is not an MX element format (e4m3fn or e5m2)");
    }
  }
  if (IsJagged(g)) {
    KD_RETURN_IF_ERROR(CheckTensor(a.group_ends, "group_ends", 1, {DType::kI32, DType::kI64}));
  } else if (a.group_ends.present()) {
    return Invalid("group_ends is only defined for jagged_rowwise and jagged_colwise, not ",
                   GranularityName(g));
  }
  const bool dual = a.output_t.present() || a.scales_t.present();
  if (dual) {
    if (g != QuantGranularity::k1x128 && g != QuantGranularity::k128x128) {
      return Invalid(
          "output_t/scales_t (the fused dual pass) are only defined for 1x128 and 128x128, not ",
          GranularityName(g));
    }
    if (a.transpose_output) {
      return Invalid(
          "transpose_output must be false with output_t/scales_t (the dual pass "
          "writes X to output and Xᵀ to output_t)");
    }
    if (!a.output_t.present()) return Invalid("output_t is required when scales_t is set");
    if (!a.scales_t.present()) return Invalid("scales_t is required when output_t is set");
  }

  // Shapes, in terms of Y = X or Xᵀ.
  const int64_t m = a.input.shape[0], k = a.input.shape[1];
  const int64_t rows = a.transpose_output ? k : m;
  const int64_t cols = a.transpose_output ? m : k;
  KD_RETURN_IF_ERROR(CheckShape(a.output, "output", {rows, cols}));
  const absl::string_view cols_field = a.transpose_output ? "input.shape[0]" : "input.shape[1]";
  const absl::string_view cols_dim = a.transpose_output ? "M, the columns of Xᵀ" : "K";
  switch (g) {
    case QuantGranularity::k1x128:
    case QuantGranularity::kJaggedRowwise:
      KD_RETURN_IF_ERROR(CheckMultiple(cols, cols_field, kQuantBlock, cols_dim));
      KD_RETURN_IF_ERROR(Check1x128Scales(a.scales, "scales", rows, cols, a.scale_layout));
      break;
    case QuantGranularity::k128x1:
      KD_RETURN_IF_ERROR(CheckTensor(a.scales, "scales", 2, {DType::kF32}));
      KD_RETURN_IF_ERROR(CheckShape(a.scales, "scales", {CeilDiv(rows, kQuantBlock), cols}));
      break;
    case QuantGranularity::k128x128:
      KD_RETURN_IF_ERROR(CheckMultiple(cols, cols_field, kQuantBlock, cols_dim));
      KD_RETURN_IF_ERROR(CheckTensor(a.scales, "scales", 2, {DType::kF32}));
      KD_RETURN_IF_ERROR(
          CheckShape(a.scales, "scales", {CeilDiv(rows, kQuantBlock), cols / kQuantBlock}));
      break;
    case QuantGranularity::kPerRow:
      KD_RETURN_IF_ERROR(CheckTensor(a.scales, "scales", 2, {DType::kF32}));
      KD_RETURN_IF_ERROR(CheckShape(a.scales, "scales", {rows, 1}));
      break;
    case QuantGranularity::kPerTensor:
      KD_RETURN_IF_ERROR(CheckTensor(a.scales, "scales", 1, {DType::kF32}));
      KD_RETURN_IF_ERROR(CheckShape(a.scales, "scales", {1}));
      break;
    case QuantGranularity::kMx1x32:
      KD_RETURN_IF_ERROR(CheckMultiple(cols, cols_field, kMxBlock, cols_dim));
      KD_RETURN_IF_ERROR(CheckTensor(a.scales, "scales", 2, {DType::kE8M0, DType::kU8}));
      KD_RETURN_IF_ERROR(CheckShape(a.scales, "scales", {rows, cols / kMxBlock}));
      break;
    case QuantGranularity::kJaggedColwise:
      KD_RETURN_IF_ERROR(CheckTensor(a.scales, "scales", 2, {DType::kF32}));
      KD_RETURN_IF_ERROR(CheckShape(a.scales, "scales", {a.group_ends.shape[0], k}));
      break;
    case QuantGranularity::kInvalid:
      break;
  }
  if (dual) {
    KD_RETURN_IF_ERROR(CheckMultiple(m, "input.shape[0]", kQuantBlock, "M, for output_t"));
    KD_RETURN_IF_ERROR(CheckTensor(a.output_t, "output_t", 2, {a.output.dtype}));
    KD_RETURN_IF_ERROR(CheckShape(a.output_t, "output_t", {k, m}));
    if (g == QuantGranularity::k128x128) {
      // 128x128 of Xᵀ (K,M): one scale per tile, the transpose of `scales` (a tile and its
      // transpose have the same amax).
      KD_RETURN_IF_ERROR(CheckTensor(a.scales_t, "scales_t", 2, {DType::kF32}));
      KD_RETURN_IF_ERROR(CheckShape(a.scales_t, "scales_t", {k / kQuantBlock, m / kQuantBlock}));
    } else {
      KD_RETURN_IF_ERROR(Check1x128Scales(a.scales_t, "scales_t", k, m, a.scale_layout));
    }
  }
  return absl::OkStatus();
}

}  // namespace kd
