// Validation of QuantizeArgs. Tail rule: K (the last input dimension) must be a multiple of the
// block along it; rows (M) need not be a multiple of 128 for 128x128 (the last row block is
// partial and its scale covers the rows that exist).
#include <cmath>

#include "kerneld/kernels/status_macros.h"
#include "kernels/ops_internal.h"

namespace kd {
namespace internal {

absl::Status ValidateQuantize(const QuantizeArgs& a) {
  KD_RETURN_IF_ERROR(CheckTensor(a.input, "input", 2, {DType::kF32, DType::kBF16, DType::kF16}));
  KD_RETURN_IF_ERROR(
      CheckTensor(a.output, "output", 2, {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2}));
  if (!(a.eps > 0.0f) || !std::isfinite(a.eps)) {
    return Invalid("eps=", a.eps, " must be finite and > 0");
  }
  if (a.scale_format != ScaleFormat::kFp32 && a.scale_format != ScaleFormat::kPow2) {
    return Invalid("scale_format=", static_cast<int>(a.scale_format), " is not a known value");
  }
  if (a.scale_layout != ScaleLayout::kRowMajor && a.scale_layout != ScaleLayout::kKBlockMajor) {
    return Invalid("scale_layout=", static_cast<int>(a.scale_layout), " is not a known value");
  }
  const int64_t m = a.input.shape[0], k = a.input.shape[1];
  if (a.transpose_output) {
    KD_RETURN_IF_ERROR(CheckShape(a.output, "output", {k, m}));
  } else {
    KD_RETURN_IF_ERROR(CheckShape(a.output, "output", {m, k}));
  }
  switch (a.granularity) {
    case QuantGranularity::k1x128: {
      if (k % kQuantBlock != 0) {
        return Invalid("input.shape[1]=", k, " is not a multiple of block ", kQuantBlock);
      }
      KD_RETURN_IF_ERROR(CheckTensor(a.scales, "scales", 2, {DType::kF32}));
      if (a.scale_layout == ScaleLayout::kKBlockMajor) {
        KD_RETURN_IF_ERROR(CheckShape(a.scales, "scales", {k / kQuantBlock, m}));
      } else {
        KD_RETURN_IF_ERROR(CheckShape(a.scales, "scales", {m, k / kQuantBlock}));
      }
      break;
    }
    case QuantGranularity::k128x128: {
      if (k % kQuantBlock != 0) {
        return Invalid("input.shape[1]=", k, " is not a multiple of block ", kQuantBlock);
      }
      KD_RETURN_IF_ERROR(CheckTensor(a.scales, "scales", 2, {DType::kF32}));
      KD_RETURN_IF_ERROR(CheckShape(a.scales, "scales", {CeilDiv(m, kQuantBlock), k / kQuantBlock}));
      break;
    }
    case QuantGranularity::k128x1:
    case QuantGranularity::kPerRow:
    case QuantGranularity::kPerTensor:
    case QuantGranularity::kMx1x32:
    case QuantGranularity::kJaggedRowwise:
    case QuantGranularity::kJaggedColwise:
      // Checked by the backends that implement them (Supports says UNIMPLEMENTED otherwise).
      if (!a.scales.present()) return Invalid("scales is required");
      break;
    case QuantGranularity::kInvalid:
    default:
      return Invalid("granularity=", static_cast<int>(a.granularity),
                     " is unspecified or not a known value");
  }
  if (a.transpose_output && a.granularity != QuantGranularity::k1x128 &&
      a.granularity != QuantGranularity::k128x128) {
    return Invalid("transpose_output is not defined for granularity ",
                   GranularityName(a.granularity));
  }
  if (a.output_t.present() || a.scales_t.present()) {
    return absl::UnimplementedError("output_t/scales_t (the fused dual pass) is not implemented yet");
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace kd
