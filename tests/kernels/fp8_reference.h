// Independent FP8 reference for tests: values come from the format definitions through std::ldexp
// and encoding is a nearest-value search over the decoded table, so nothing here shares code with
// kerneld/kernels/fp8.h or the CPU quantizer.
#ifndef KERNELD_TESTS_KERNELS_FP8_REFERENCE_H_
#define KERNELD_TESTS_KERNELS_FP8_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kerneld/kernels/dtype.h"

namespace kd {
namespace testing_ref {

struct Fp8Format {
  int exp_bits, man_bits, bias;
  enum Special { kFn, kFnuz, kIeee } special;
};

inline Fp8Format FormatOf(DType dtype) {
  switch (dtype) {
    case DType::kE4M3FN:
      return {4, 3, 7, Fp8Format::kFn};
    case DType::kE4M3FNUZ:
      return {4, 3, 8, Fp8Format::kFnuz};
    default:
      return {5, 2, 15, Fp8Format::kIeee};
  }
}

// The value of `code`, from sign/exponent/mantissa fields: (-1)^s * 2^(e-bias) * (1 + m/2^M) for
// normals, (-1)^s * 2^(1-bias) * (m/2^M) for subnormals.
inline double DecodeRef(DType dtype, uint8_t code) {
  const Fp8Format f = FormatOf(dtype);
  const int sign = code >> 7;
  const int e = (code >> f.man_bits) & ((1 << f.exp_bits) - 1);
  const int m = code & ((1 << f.man_bits) - 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int e_max = (1 << f.exp_bits) - 1;
  if (f.special == Fp8Format::kFnuz && code == 0x80) return nan;
  if (f.special == Fp8Format::kFn && e == e_max && m == (1 << f.man_bits) - 1) return nan;
  if (f.special == Fp8Format::kIeee && e == e_max) {
    return m ? nan : (sign ? -HUGE_VAL : HUGE_VAL);
  }
  const double mag = e == 0 ? std::ldexp(m, 1 - f.bias - f.man_bits)
                            : std::ldexp((1 << f.man_bits) + m, e - f.bias - f.man_bits);
  return sign ? -mag : mag;
}

inline uint8_t NanCodeRef(DType dtype) { return dtype == DType::kE4M3FNUZ ? 0x80 : 0x7F; }

// Saturating, round-to-nearest-even encoder: the finite code nearest to v, ties to the code with
// an even mantissa (the even low bit). NaN gives the positive NaN code.
class EncoderRef {
 public:
  explicit EncoderRef(DType dtype) : dtype_(dtype) {
    for (int c = 0; c < 0x80; ++c) {
      const double v = DecodeRef(dtype, static_cast<uint8_t>(c));
      if (std::isfinite(v)) table_.push_back({v, static_cast<uint8_t>(c)});
    }
    std::sort(table_.begin(), table_.end(),
              [](const Entry& a, const Entry& b) { return a.value < b.value; });
    max_ = table_.back().value;
  }
  double max() const { return max_; }

  uint8_t operator()(float x) const {
    if (std::isnan(x)) return NanCodeRef(dtype_);
    const bool neg = std::signbit(x);
    const double a = std::min(std::fabs(static_cast<double>(x)), max_);
    auto hi = std::lower_bound(table_.begin(), table_.end(), a,
                               [](const Entry& e, double v) { return e.value < v; });
    uint8_t mag;
    if (hi->value == a || hi == table_.begin()) {
      mag = hi->code;
    } else {
      auto lo = hi - 1;
      const double dlo = a - lo->value, dhi = hi->value - a;
      if (dlo < dhi)
        mag = lo->code;
      else if (dhi < dlo)
        mag = hi->code;
      else
        mag = (lo->code & 1) == 0 ? lo->code : hi->code;
    }
    if (dtype_ == DType::kE4M3FNUZ && mag == 0) return 0;
    return static_cast<uint8_t>(mag | (neg ? 0x80 : 0));
  }

 private:
  struct Entry {
    double value;
    uint8_t code;
  };
  DType dtype_;
  std::vector<Entry> table_;
  double max_ = 0;
};

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16/f16 bit patterns to float, from the definitions.
inline float Bf16Ref(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }
inline float F16Ref(uint16_t h) {
  const int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31)
    v = m ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL;
  else if (e == 0)
    v = std::ldexp(m, -24);
  else
    v = std::ldexp(1024 + m, e - 25);
  return static_cast<float>(sign ? -v : v);
}

}  // namespace testing_ref
}  // namespace kd

#endif  // KERNELD_TESTS_KERNELS_FP8_REFERENCE_H_
