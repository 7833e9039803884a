// fp8::EncodeBranchFree (the form the CUDA kernels use) against fp8::Encode (the reference) on
// every one of the 2^32 float inputs, for each format. Host-only: the device form differs only
// by spelling the one fp32 addition __fadd_rn, which is the same IEEE round-to-nearest-even.
#include "kernels/gpu/fp8_encode.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kd {
namespace {

template <typename F>
uint64_t CountMismatches() {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<uint64_t> bad(threads, 0);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([t, threads, &bad] {
      const uint64_t begin = (uint64_t{1} << 32) * t / threads;
      const uint64_t end = (uint64_t{1} << 32) * (t + 1) / threads;
      for (uint64_t u = begin; u < end; ++u) {
        const float x = fp8::BitsToFloat(static_cast<uint32_t>(u));
        bad[t] += fp8::Encode<F>(x) != fp8::EncodeBranchFree<F>(x);
      }
    });
  }
  for (auto& th : pool) th.join();
  uint64_t total = 0;
  for (uint64_t b : bad) total += b;
  return total;
}

TEST(Fp8EncodeBranchFree, MatchesEncodeOnEveryFloatE4M3FN) {
  EXPECT_EQ(CountMismatches<fp8::E4M3FN>(), 0u);
}
TEST(Fp8EncodeBranchFree, MatchesEncodeOnEveryFloatE4M3FNUZ) {
  EXPECT_EQ(CountMismatches<fp8::E4M3FNUZ>(), 0u);
}
TEST(Fp8EncodeBranchFree, MatchesEncodeOnEveryFloatE5M2) {
  EXPECT_EQ(CountMismatches<fp8::E5M2>(), 0u);
}

}  // namespace
}  // namespace kd
