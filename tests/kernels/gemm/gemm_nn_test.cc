// NN dgrad (dY 1x128 · W 128x128, W as stored, not transposed) on the CPU backend against the
// double reference (budget: gemm_test_util.h).
#include <random>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/kernels/gemm/gemm_test_util.h"

namespace kd {
namespace gemm_test {
namespace {

struct Shape {
  int64_t m, n, r;
};
void PrintTo(const Shape& s, std::ostream* os) { *os << s.m << "x" << s.n << "x" << s.r; }

class GemmNnCpuTest : public ::testing::TestWithParam<std::tuple<Mix, Shape>> {};

TEST_P(GemmNnCpuTest, MatchesDoubleReferenceWithinBudget) {
  const auto& [mix, shape] = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const int64_t m = shape.m, n = shape.n, r = shape.r, kb = r / 128;
  HostTensor a = MakeHost(DType::kE4M3FN, {m, r});
  HostTensor b = MakeHost(DType::kE4M3FN, {r, n});
  HostTensor sa = MakeHost(DType::kF32, {m, kb});
  HostTensor sb = MakeHost(DType::kF32, {kb, (n + 127) / 128});
  HostTensor d = MakeHost(mix.out, {m, n});
  FillFp8(a, mix.a, rng);
  FillFp8(b, mix.b, rng);
  FillScales(sa, mix.scale_magnitude, rng);
  FillScales(sb, 0, rng);
  std::vector<double> prior;
  if (mix.accumulate) {
    FillGaussian(d, rng);
    prior = ReadAll(d);
  } else {
    Poison(d);
  }
  GemmArgs g;
  g.variant = GemmVariant::kNN;
  g.a = a.t;
  g.a_scales = sa.t;
  g.b = b.t;
  g.b_scales = sb.t;
  g.d = d.t;
  g.accumulate = mix.accumulate;
  ASSERT_TRUE(RunOnCpu(g).ok());

  RefProblem p;
  p.m = m;
  p.n = n;
  p.kb_end = kb;
  p.a = [&](int64_t i, int64_t k) { return DecodeE4M3(a.bytes()[i * r + k]); };
  p.b = [&](int64_t j, int64_t k) { return DecodeE4M3(b.bytes()[k * n + j]); };
  p.a_scale = [&](int64_t i, int64_t blk) { return double{sa.data<float>()[i * kb + blk]}; };
  p.b_scale = [&](int64_t j, int64_t blk) {
    return double{sb.data<float>()[blk * ((n + 127) / 128) + j / 128]};
  };
  EXPECT_EQ(CompareWithBudget(d.t, 0, n, Reference(p), kb, prior), "");
}

INSTANTIATE_TEST_SUITE_P(Mixes, GemmNnCpuTest,
                         ::testing::Combine(::testing::ValuesIn(StandardMixes()),
                                            // Ragged M and N, K of one block, a single row.
                                            ::testing::Values(Shape{130, 200, 384},
                                                              Shape{64, 256, 128},
                                                              Shape{1, 129, 256})),
                         [](const auto& info) {
                           const Shape& s = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                                  std::to_string(s.r);
                         });

}  // namespace
}  // namespace gemm_test
}  // namespace kd
