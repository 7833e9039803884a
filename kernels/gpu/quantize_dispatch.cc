#include "kernels/gpu/quantize_dispatch.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {
template <typename F>
cudaError_t LaunchBlockwiseFormat(const QuantizeParams& params, cudaStream_t stream);
extern template cudaError_t LaunchBlockwiseFormat<fp8::E4M3FN>(const QuantizeParams&, cudaStream_t);
extern template cudaError_t LaunchBlockwiseFormat<fp8::E4M3FNUZ>(const QuantizeParams&,
                                                                 cudaStream_t);
extern template cudaError_t LaunchBlockwiseFormat<fp8::E5M2>(const QuantizeParams&, cudaStream_t);
}  // namespace quant

namespace {

InputType InputTypeOf(DType d) {
  switch (d) {
    case DType::kF32:
      return InputType::kF32;
    case DType::kF16:
      return InputType::kF16;
    default:
      return InputType::kBF16;
  }
}

Fp8Format FormatOf(DType d) {
  switch (d) {
    case DType::kE4M3FNUZ:
      return Fp8Format::kE4M3FNUZ;
    case DType::kE5M2:
      return Fp8Format::kE5M2;
    default:
      return Fp8Format::kE4M3FN;
  }
}

// The family and form of `q`; false for a granularity no CUDA kernel runs.
bool ChooseFamily(const QuantizeArgs& q, QuantizeParams& p) {
  const bool t = q.transpose_output;
  switch (q.granularity) {
    case QuantGranularity::k1x128:
      if (q.output_t.present()) {
        p.family = QuantizeFamily::kTiled;
        p.tiled_mode = TiledQuantizeMode::kDual;
      } else if (t) {
        p.family = QuantizeFamily::kTiled;
        p.tiled_mode = TiledQuantizeMode::k1x128Transposed;
      } else {
        p.family = QuantizeFamily::kBlockwise;
      }
      return true;
    case QuantGranularity::k128x1:
      p.family = QuantizeFamily::kTiled;
      p.tiled_mode = t ? TiledQuantizeMode::k128x1Transposed : TiledQuantizeMode::k128x1;
      return true;
    case QuantGranularity::k128x128:
      if (q.output_t.present()) {
        p.family = QuantizeFamily::kTiled;
        p.tiled_mode = TiledQuantizeMode::k128x128Dual;
      } else if (t) {
        p.family = QuantizeFamily::kTiled;
        p.tiled_mode = TiledQuantizeMode::k128x128Transposed;
      } else {
        p.family = QuantizeFamily::kBlockwise;
        p.tile_128x128 = true;
      }
      return true;
    case QuantGranularity::kPerRow:
      p.family = QuantizeFamily::kRowCol;
      p.row_kind = t ? RowQuantizeKind::kPerRowTransposed : RowQuantizeKind::kPerRow;
      return true;
    case QuantGranularity::kPerTensor:
      p.family = QuantizeFamily::kRowCol;
      p.row_kind = t ? RowQuantizeKind::kPerTensorTransposed : RowQuantizeKind::kPerTensor;
      return true;
    case QuantGranularity::kMx1x32:
      p.family = QuantizeFamily::kRowCol;
      p.row_kind = t ? RowQuantizeKind::kMx1x32Transposed : RowQuantizeKind::kMx1x32;
      return true;
    case QuantGranularity::kJaggedRowwise:
      p.family = QuantizeFamily::kRowCol;
      p.row_kind = RowQuantizeKind::kJaggedRowwise;
      return true;
    case QuantGranularity::kJaggedColwise:
      p.family = QuantizeFamily::kRowCol;
      p.row_kind = RowQuantizeKind::kJaggedColwise;
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<QuantizeParams> MakeQuantizeParams(const QuantizeArgs& q) {
  QuantizeParams p;
  if (!ChooseFamily(q, p)) {
    return absl::UnimplementedError(absl::StrCat("quantize ", GranularityName(q.granularity),
                                                 " has no ", gpu::kBackendName, " kernel"));
  }
  p.input = q.input.data;
  p.input_stride = q.input.strides[0];
  p.input_type = InputTypeOf(q.input.dtype);
  p.m = q.input.shape[0];
  p.k = q.input.shape[1];
  p.format = FormatOf(q.output.dtype);
  p.output = q.output.as<uint8_t>();
  p.output_stride = q.output.strides[0];
  p.scales = q.scales.data;
  p.scales_stride = q.scales.rank == 2 ? q.scales.strides[0] : 0;
  if (q.output_t.present()) {
    p.output_t = q.output_t.as<uint8_t>();
    p.output_t_stride = q.output_t.strides[0];
    p.scales_t = q.scales_t.as<float>();
    p.scales_t_stride = q.scales_t.strides[0];
  }
  p.k_block_major_scales = q.scale_layout == ScaleLayout::kKBlockMajor;
  p.pow2_scales = q.scale_format == ScaleFormat::kPow2;
  p.eps = q.eps;
  p.mx_rceil = q.mx_rounding == MxRounding::kRceil;
  if (q.group_ends.present()) {
    p.group_ends = q.group_ends.data;
    p.group_ends_stride = q.group_ends.strides[0];
    p.group_ends_i64 = q.group_ends.dtype == DType::kI64;
    p.groups = q.group_ends.shape[0];
  }
  return p;
}

bool QuantizeNeedsErrorRecord(const QuantizeParams& p) {
  return p.family == QuantizeFamily::kRowCol && p.group_ends != nullptr;
}

uint64_t QuantizeScratchBytes(const QuantizeParams& p) {
  return p.family == QuantizeFamily::kRowCol ? RowColQuantizeScratchBytes(p) : 0;
}

cudaError_t LaunchQuantizeBlockwise(const QuantizeParams& p, cudaStream_t stream) {
  switch (p.format) {
    case Fp8Format::kE4M3FN:
      return quant::LaunchBlockwiseFormat<fp8::E4M3FN>(p, stream);
    case Fp8Format::kE4M3FNUZ:
      return quant::LaunchBlockwiseFormat<fp8::E4M3FNUZ>(p, stream);
    case Fp8Format::kE5M2:
      return quant::LaunchBlockwiseFormat<fp8::E5M2>(p, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t WarmQuantize() {
  const cudaError_t err = WarmQuantizeTiled();
  return err == cudaSuccess ? WarmQuantizeRowCol() : err;
}

cudaError_t LaunchQuantize(const QuantizeParams& p, cudaStream_t stream) {
  switch (p.family) {
    case QuantizeFamily::kBlockwise:
      return LaunchQuantizeBlockwise(p, stream);
    case QuantizeFamily::kTiled:
      return LaunchQuantizeTiled(p, stream);
    case QuantizeFamily::kRowCol:
      return LaunchQuantizeRowCol(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
