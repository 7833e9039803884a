// Test-side helpers for the quantizer: host tensors, input generation with edge cases, and a plain
// reference of every recipe written from the QuantizeOp contract (one loop per element, blocks
// found by index arithmetic), sharing no code with kernels/cpu/quantize.cc.
#ifndef KERNELD_TESTS_KERNELS_QUANTIZE_REFERENCE_H_
#define KERNELD_TESTS_KERNELS_QUANTIZE_REFERENCE_H_

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kerneld/kernels/ops.h"
#include "tests/kernels/fp8_reference.h"

namespace kd {
namespace testing_ref {

// Zero-initialised host memory viewed as one contiguous tensor.
struct HostTensor {
  std::vector<uint64_t> storage;  // 8-byte aligned
  Tensor t;

  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape) {
    t.dtype = dtype;
    t.rank = static_cast<int>(shape.size());
    int64_t n = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
      t.shape[i] = shape[i];
      t.strides[i] = n;
      n *= shape[i];
    }
    storage.assign((n * DTypeSize(dtype) + 7) / 8 + 1, 0);
    t.data = storage.data();
  }
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;
  HostTensor(HostTensor&& o) noexcept { *this = std::move(o); }
  HostTensor& operator=(HostTensor&& o) noexcept {
    storage = std::move(o.storage);
    t = o.t;
    t.data = storage.data();
    return *this;
  }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(storage.data());
  }
  int64_t numel() const { return t.numel(); }
};

// The fp32 value of element i of a bf16/f16/f32 tensor, from the format definitions.
inline float InputValue(const HostTensor& in, int64_t i) {
  const auto* base = reinterpret_cast<const uint8_t*>(in.storage.data());
  if (in.t.dtype == DType::kF32) {
    float f;
    std::memcpy(&f, base + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, base + 2 * i, 2);
  return in.t.dtype == DType::kBF16 ? Bf16Ref(h) : F16Ref(h);
}

// Bit pattern of a value with the given sign, unbiased exponent and random mantissa, in `dtype`.
// The exponent is clamped to the dtype's normal range; `subnormal` gives a random subnormal.
inline uint32_t RandomBits(DType dtype, bool neg, int exp, bool subnormal, std::mt19937_64& rng) {
  const int man_bits = dtype == DType::kF32 ? 23 : dtype == DType::kBF16 ? 7 : 10;
  const int bias = dtype == DType::kF16 ? 15 : 127;
  const int width = dtype == DType::kF32 ? 32 : 16;
  const uint32_t man = static_cast<uint32_t>(rng()) & ((1u << man_bits) - 1);
  uint32_t field = subnormal ? 0 : static_cast<uint32_t>(std::clamp(exp + bias, 1, 2 * bias));
  uint32_t bits = (field << man_bits) | (subnormal ? std::max(man, 1u) : man);
  if (neg) bits |= 1u << (width - 1);
  return bits;
}

inline void SetBits(HostTensor& in, int64_t i, uint32_t bits) {
  if (in.t.dtype == DType::kF32)
    in.as<uint32_t>()[i] = bits;
  else
    in.as<uint16_t>()[i] = static_cast<uint16_t>(bits);
}

inline uint32_t SpecialBits(DType dtype, float v) {
  const uint32_t b = Bits(v);
  if (dtype == DType::kF32) return b;
  if (dtype == DType::kBF16) return b >> 16;  // only used for values exact in bf16
  // f16: NaN, Inf, or small integers / powers of two used by the edge cases.
  if (std::isnan(v)) return 0x7E00;
  if (std::isinf(v)) return v > 0 ? 0x7C00 : 0xFC00;
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  int e;
  const float m = std::frexp(std::fabs(v), &e);  // v = m * 2^e, m in [0.5, 1)
  const uint32_t man = static_cast<uint32_t>(std::ldexp(m, 11)) - 1024;
  return (std::signbit(v) ? 0x8000u : 0u) | (static_cast<uint32_t>(e + 14) << 10) | man;
}

// A (M,K) input: rows of random values whose magnitude varies by row and by 128-column block
// (2^-24 .. 2^20, within the dtype's range), plus, when `edge_cases`: an all-zero 128x128 region,
// a NaN, a +Inf and a -Inf in separate regions, FP8_MAX and 2*FP8_MAX values, subnormals.
inline HostTensor MakeInput(DType dtype, int64_t m, int64_t k, uint64_t seed, bool edge_cases,
                            float fp8_max = 448.0f) {
  HostTensor in(dtype, {m, k});
  std::mt19937_64 rng(seed);
  const int lo = dtype == DType::kF16 ? -14 : -24, hi = dtype == DType::kF16 ? 12 : 20;
  std::uniform_int_distribution<int> center(lo + 6, hi);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c0 = 0; c0 < k; c0 += 32) {
      const int e = center(rng);
      for (int64_t c = c0; c < std::min(k, c0 + 32); ++c) {
        const int spread = static_cast<int>(rng() % 7);
        SetBits(in, r * k + c, RandomBits(dtype, rng() & 1, e - spread, false, rng));
      }
    }
  }
  if (!edge_cases) return in;
  auto put = [&](int64_t r, int64_t c, float v) {
    if (r < m && c < k) SetBits(in, r * k + c, SpecialBits(dtype, v));
  };
  for (int64_t r = 0; r < std::min<int64_t>(m, 128); ++r) {
    for (int64_t c = 0; c < std::min<int64_t>(k, 128); ++c) put(r, c, r % 3 == 0 ? -0.0f : 0.0f);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float fmax = dtype == DType::kF16 && fp8_max > 16384.0f ? 16384.0f : fp8_max;
  put(m - 1, k - 1, nan);
  put(m / 2, 5, HUGE_VALF);
  put(m / 2 + 1, k / 2 + 3, -HUGE_VALF);
  put(3, k - 40, fmax);
  put(4, k - 39, -fmax);
  put(5, k - 38, 2 * fmax);
  // Subnormals of the input dtype, alone in a row segment and mixed with normals.
  for (int64_t c = 0; c < std::min<int64_t>(k, 64); ++c) {
    if (m > 130) SetBits(in, 130 * k + c, RandomBits(dtype, c & 1, 0, true, rng));
  }
  if (m > 131) SetBits(in, 131 * k + 7, RandomBits(dtype, false, 0, true, rng));
  return in;
}

struct RefParams {
  QuantGranularity granularity = QuantGranularity::k1x128;
  bool transpose = false;
  DType out = DType::kE4M3FN;
  bool pow2 = false;
  float eps = 1e-12f;
  MxRounding rounding = MxRounding::kFloor;
  std::vector<int64_t> group_ends;
};

struct RefResult {
  std::vector<uint8_t> codes;  // Y (R,C) row-major
  std::vector<float> scales;   // natural (row-major) scale shape; f32 recipes
  std::vector<uint8_t> e8m0;   // mx1x32 scales (R, C/32)
};

inline float CanonicalNan(float v) { return std::isnan(v) ? FromBits(0x7FC00000u) : v; }

inline float RefScale(float amax, float fp8_max, float eps, bool pow2) {
  if (std::isnan(amax)) return amax;
  float s = fp8_max / std::max(amax, eps);
  if (pow2 && s > 0 && std::isfinite(s)) s = std::ldexp(1.0f, std::ilogb(s));
  return s;
}

inline uint8_t RefMxScale(float amax, DType out, bool rceil) {
  if (!std::isfinite(amax)) return 0xFF;
  const int emax = out == DType::kE4M3FN ? 8 : 15;
  if (!rceil) {
    const int e = amax >= FLT_MIN ? std::ilogb(amax) + 127 : 0;
    return static_cast<uint8_t>(std::max(e - emax, 0));
  }
  const float max = out == DType::kE4M3FN ? 448.0f : 57344.0f;
  const float d = amax * (1.0f / max);
  if (d == 0) return 0;
  if (d < FLT_MIN) return d > std::ldexp(1.0f, -127) ? 1 : 0;
  const int e = std::ilogb(d);
  return static_cast<uint8_t>(e + 127 + (d == std::ldexp(1.0f, e) ? 0 : 1));
}

// The recipe of QuantizeOp on the (M,K) values x.
inline RefResult RefQuantize(const std::vector<float>& x, int64_t m, int64_t k,
                             const RefParams& p) {
  const int64_t rows = p.transpose ? k : m, cols = p.transpose ? m : k;
  auto y = [&](int64_t r, int64_t c) { return p.transpose ? x[c * k + r] : x[r * k + c]; };
  const EncoderRef encode(p.out);
  const float fp8_max = static_cast<float>(encode.max());
  const int64_t b = 128;
  int64_t nblocks = 0;
  std::vector<int64_t> group_of(cols, 0);
  for (size_t g = 0; g < p.group_ends.size(); ++g) {
    for (int64_t c = g ? p.group_ends[g - 1] : 0; c < p.group_ends[g]; ++c) group_of[c] = g;
  }
  auto block_of = [&](int64_t r, int64_t c) -> int64_t {
    switch (p.granularity) {
      case QuantGranularity::k128x1:
        return (r / b) * cols + c;
      case QuantGranularity::k128x128:
        return (r / b) * (cols / b) + c / b;
      case QuantGranularity::kPerRow:
        return r;
      case QuantGranularity::kPerTensor:
        return 0;
      case QuantGranularity::kMx1x32:
        return r * (cols / 32) + c / 32;
      case QuantGranularity::kJaggedColwise:
        return group_of[c] * rows + r;
      default:
        return r * (cols / b) + c / b;  // 1x128, jagged_rowwise
    }
  };
  switch (p.granularity) {
    case QuantGranularity::k128x1:
      nblocks = (rows + b - 1) / b * cols;
      break;
    case QuantGranularity::k128x128:
      nblocks = (rows + b - 1) / b * (cols / b);
      break;
    case QuantGranularity::kPerRow:
      nblocks = rows;
      break;
    case QuantGranularity::kPerTensor:
      nblocks = 1;
      break;
    case QuantGranularity::kMx1x32:
      nblocks = rows * (cols / 32);
      break;
    case QuantGranularity::kJaggedColwise:
      nblocks = static_cast<int64_t>(p.group_ends.size()) * rows;
      break;
    default:
      nblocks = rows * (cols / b);
      break;
  }
  std::vector<float> amax(nblocks, 0.0f);
  std::vector<bool> has_nan(nblocks, false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t blk = block_of(r, c);
      const float v = y(r, c);
      if (std::isnan(v))
        has_nan[blk] = true;
      else
        amax[blk] = std::max(amax[blk], std::fabs(v));
    }
  }
  RefResult res;
  res.codes.resize(rows * cols);
  std::vector<float> mul(nblocks);
  const bool mx = p.granularity == QuantGranularity::kMx1x32;
  for (int64_t i = 0; i < nblocks; ++i) {
    const float a = has_nan[i] ? std::numeric_limits<float>::quiet_NaN() : amax[i];
    if (mx) {
      const uint8_t s = RefMxScale(a, p.out, p.rounding == MxRounding::kRceil);
      res.e8m0.push_back(s);
      mul[i] = s == 0xFF ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, 127 - s);
    } else {
      mul[i] = RefScale(a, fp8_max, p.eps, p.pow2);
      res.scales.push_back(CanonicalNan(1.0f / mul[i]));
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      res.codes[r * cols + c] = encode(y(r, c) * mul[block_of(r, c)]);
  }
  return res;
}

}  // namespace testing_ref
}  // namespace kd

#endif  // KERNELD_TESTS_KERNELS_QUANTIZE_REFERENCE_H_
