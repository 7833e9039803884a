// CPU reference quantizer. The recipe, per block (bit-exact on every backend):
//   amax   = max |x| over the block (NaN if any element is NaN)
//   scale  = FP8_MAX / max(amax, eps)            fp32 division, round to nearest even
//   scale  = 2^floor(log2(scale))                SCALE_POW2 only
//   code   = Encode(x * scale)                   saturating, round to nearest even
//   stored = 1 / scale                           fp32 division
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/fp8.h"
#include "kernels/cpu/cpu_kernels.h"

namespace kd {
namespace {

// Loads n elements of row `row` starting at column `col` as float.
void LoadRow(const Tensor& t, int64_t row, int64_t col, int64_t n, float* out) {
  const int64_t base = row * t.strides[0] + col;
  switch (t.dtype) {
    case DType::kF32: {
      const float* p = t.as<const float>() + base;
      std::copy(p, p + n, out);
      break;
    }
    case DType::kBF16: {
      const uint16_t* p = t.as<const uint16_t>() + base;
      for (int64_t i = 0; i < n; ++i) out[i] = fp8::BF16ToFloat(p[i]);
      break;
    }
    case DType::kF16: {
      const uint16_t* p = t.as<const uint16_t>() + base;
      for (int64_t i = 0; i < n; ++i) out[i] = fp8::F16ToFloat(p[i]);
      break;
    }
    default:
      break;
  }
}

// max |x|, NaN-propagating.
float AbsMax(const float* x, int64_t n) {
  float amax = 0.0f;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    nan |= (a != a);
    amax = a > amax ? a : amax;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : amax;
}

float QuantScale(float amax, float fp8_max, const QuantizeArgs& args) {
  const float clamped = amax != amax ? amax : std::max(amax, args.eps);
  float scale = fp8_max / clamped;
  if (args.scale_format == ScaleFormat::kPow2) scale = fp8::RoundDownPow2(scale);
  return scale;
}

template <typename F>
void EncodeBlock(const float* x, int64_t n, float scale, uint8_t* out, int64_t out_stride) {
  for (int64_t i = 0; i < n; ++i) out[i * out_stride] = fp8::Encode<F>(x[i] * scale);
}

template <typename F>
void Quantize1x128(const QuantizeArgs& a, ThreadPool& pool) {
  const int64_t m = a.input.shape[0], k = a.input.shape[1], kb = k / kQuantBlock;
  uint8_t* out = a.output.as<uint8_t>();
  float* scales = a.scales.as<float>();
  pool.ParallelFor(m, 4, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(k);
    for (int64_t r = r0; r < r1; ++r) {
      LoadRow(a.input, r, 0, k, row.data());
      for (int64_t b = 0; b < kb; ++b) {
        const float* x = row.data() + b * kQuantBlock;
        const float scale = QuantScale(AbsMax(x, kQuantBlock), F::kMax, a);
        if (a.transpose_output) {
          // Xᵀ (K,M): element (r, c) goes to (c, r).
          EncodeBlock<F>(x, kQuantBlock, scale, out + (b * kQuantBlock) * a.output.strides[0] + r,
                         a.output.strides[0]);
        } else {
          EncodeBlock<F>(x, kQuantBlock, scale, out + r * a.output.strides[0] + b * kQuantBlock, 1);
        }
        const int64_t s = a.scale_layout == ScaleLayout::kKBlockMajor
                              ? b * a.scales.strides[0] + r
                              : r * a.scales.strides[0] + b;
        scales[s] = 1.0f / scale;
      }
    }
  });
}

template <typename F>
void Quantize128x128(const QuantizeArgs& a, ThreadPool& pool) {
  const int64_t m = a.input.shape[0], k = a.input.shape[1], kb = k / kQuantBlock;
  const int64_t mb = (m + kQuantBlock - 1) / kQuantBlock;
  uint8_t* out = a.output.as<uint8_t>();
  float* scales = a.scales.as<float>();
  pool.ParallelFor(mb, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> tile(kQuantBlock * k);
    for (int64_t rb = b0; rb < b1; ++rb) {
      const int64_t rows = std::min(kQuantBlock, m - rb * kQuantBlock);
      for (int64_t i = 0; i < rows; ++i) LoadRow(a.input, rb * kQuantBlock + i, 0, k, &tile[i * k]);
      for (int64_t cb = 0; cb < kb; ++cb) {
        float amax = 0.0f;
        for (int64_t i = 0; i < rows; ++i) {
          const float v = AbsMax(&tile[i * k + cb * kQuantBlock], kQuantBlock);
          amax = (v != v || amax != amax) ? std::numeric_limits<float>::quiet_NaN()
                                         : std::max(amax, v);
        }
        const float scale = QuantScale(amax, F::kMax, a);
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t r = rb * kQuantBlock + i;
          const float* x = &tile[i * k + cb * kQuantBlock];
          if (a.transpose_output) {
            EncodeBlock<F>(x, kQuantBlock, scale,
                           out + (cb * kQuantBlock) * a.output.strides[0] + r,
                           a.output.strides[0]);
          } else {
            EncodeBlock<F>(x, kQuantBlock, scale,
                           out + r * a.output.strides[0] + cb * kQuantBlock, 1);
          }
        }
        scales[rb * a.scales.strides[0] + cb] = 1.0f / scale;
      }
    }
  });
}

template <typename F>
absl::Status QuantizeAs(const QuantizeArgs& a, ThreadPool& pool) {
  switch (a.granularity) {
    case QuantGranularity::k1x128:
      Quantize1x128<F>(a, pool);
      return absl::OkStatus();
    case QuantGranularity::k128x128:
      Quantize128x128<F>(a, pool);
      return absl::OkStatus();
    default:
      return CpuSupportsQuantize(a);
  }
}

}  // namespace

absl::Status CpuSupportsQuantize(const QuantizeArgs& a) {
  if (a.granularity == QuantGranularity::k1x128 || a.granularity == QuantGranularity::k128x128) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("quantize granularity ",
                                               GranularityName(a.granularity),
                                               " is not implemented on the cpu backend"));
}

absl::Status QuantizeCpu(const QuantizeArgs& a, ThreadPool& pool) {
  switch (a.output.dtype) {
    case DType::kE4M3FN: return QuantizeAs<fp8::E4M3FN>(a, pool);
    case DType::kE4M3FNUZ: return QuantizeAs<fp8::E4M3FNUZ>(a, pool);
    case DType::kE5M2: return QuantizeAs<fp8::E5M2>(a, pool);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("output.dtype=", DTypeName(a.output.dtype), " is not an FP8 format"));
  }
}

}  // namespace kd
