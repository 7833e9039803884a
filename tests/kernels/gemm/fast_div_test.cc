// kd::cuda_gemm::FastDiv (kernels/cuda/gemm/fast_div.h), the tile scheduler's division by launch
// constants, against `/` and `%` on the host: every dividend below 2^16 for every divisor up to
// 300 (raster bands, band heights, split counts and tile counts are in this range), and dividends
// near multiples and near 2^31 for divisors up to 2^31 - 1.
#include "kernels/cuda/gemm/fast_div.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kd {
namespace cuda_gemm {
namespace {

void ExpectDivides(const FastDiv& f, int d, int n) {
  const int q = f.Div(n);
  ASSERT_EQ(q, n / d) << n << " / " << d;
  ASSERT_EQ(f.Mod(n, q), n % d) << n << " % " << d;
}

TEST(FastDivTest, EverySmallDividendForSmallDivisors) {
  for (int d = 1; d <= 300; ++d) {
    FastDiv f;
    f.Init(d);
    for (int n = 0; n < (1 << 16); ++n) ExpectDivides(f, d, n);
  }
}

TEST(FastDivTest, NearMultiplesAndTheTopOfTheRange) {
  std::vector<int> divisors = {1,          2,
                               3,          7,
                               64,         127,
                               128,        129,
                               1000,       4095,
                               65537,      (1 << 30) - 1,
                               1 << 30,    (1 << 30) + 1,
                               2147483646, 2147483647};
  std::mt19937 rng(9);
  for (int i = 0; i < 2000; ++i) {
    divisors.push_back(static_cast<int>(rng() % 2147483647u) + 1);
  }
  for (const int d : divisors) {
    FastDiv f;
    f.Init(d);
    const int64_t top = 2147483647;
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{1000}, top / d - 1, top / d}) {
      for (int64_t delta = -2; delta <= 2; ++delta) {
        const int64_t n = k * d + delta;
        if (n >= 0 && n <= top) ExpectDivides(f, d, static_cast<int>(n));
      }
    }
    for (int j = 0; j < 200; ++j) ExpectDivides(f, d, static_cast<int>(rng() % 2147483648u));
    ExpectDivides(f, d, 2147483647);
  }
}

}  // namespace
}  // namespace cuda_gemm
}  // namespace kd
