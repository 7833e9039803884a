// The MoE variants on the CPU backend against the double reference (budget: gemm_test_util.h):
// M-grouped NT forward and K-grouped TN wgrad, with ragged, empty and single groups, and bad
// group ends rejected from the values read out of the tensor.
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/gemm/gemm_test_util.h"

namespace kd {
namespace gemm_test {
namespace {

HostTensor MakeEnds(const std::vector<int64_t>& ends, DType dtype) {
  HostTensor t = MakeHost(dtype, {static_cast<int64_t>(ends.size())});
  for (size_t i = 0; i < ends.size(); ++i) {
    if (dtype == DType::kI64)
      t.data<int64_t>()[i] = ends[i];
    else
      t.data<int32_t>()[i] = static_cast<int32_t>(ends[i]);
  }
  return t;
}

// Group ends with sizes: ragged, an empty group, a group of one row.
struct Groups {
  const char* name;
  std::vector<int64_t> ends;
  DType dtype;
};
void PrintTo(const Groups& g, std::ostream* os) { *os << g.name; }

// ---- M-grouped NT ---------------------------------------------------------------------------

struct MGroupedOperands {
  HostTensor a, sa, b, sb, ends, d;
  GemmArgs args;
};

MGroupedOperands MakeMGrouped(const std::vector<int64_t>& ends, DType ends_dtype, int64_t n,
                              int64_t r, const Mix& mix, std::mt19937_64& rng) {
  const int64_t total = ends.back(), experts = ends.size(), kb = r / 128;
  MGroupedOperands o{MakeHost(DType::kE4M3FN, {total, r}),
                     MakeHost(DType::kF32, {total, kb}),
                     MakeHost(DType::kE4M3FN, {experts, n, r}),
                     MakeHost(DType::kF32, {experts, (n + 127) / 128, kb}),
                     MakeEnds(ends, ends_dtype),
                     MakeHost(mix.out, {total, n}),
                     {}};
  FillFp8(o.a, mix.a, rng);
  FillFp8(o.b, mix.b, rng);
  FillScales(o.sa, mix.scale_magnitude, rng);
  FillScales(o.sb, 0, rng);
  o.args.variant = GemmVariant::kMGroupedNT;
  o.args.a = o.a.t;
  o.args.a_scales = o.sa.t;
  o.args.b = o.b.t;
  o.args.b_scales = o.sb.t;
  o.args.group_ends = o.ends.t;
  o.args.d = o.d.t;
  o.args.accumulate = mix.accumulate;
  return o;
}

class GemmMGroupedCpuTest : public ::testing::TestWithParam<std::tuple<Mix, Groups>> {};

TEST_P(GemmMGroupedCpuTest, EveryGroupMatchesDoubleReferenceWithinBudget) {
  const auto& [mix, groups] = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const int64_t n = 136, r = 256, kb = r / 128, nb = (n + 127) / 128;
  MGroupedOperands o = MakeMGrouped(groups.ends, groups.dtype, n, r, mix, rng);
  std::vector<double> prior;
  if (mix.accumulate) {
    FillGaussian(o.d, rng);
    prior = ReadAll(o.d);
  } else {
    Poison(o.d);
  }
  ASSERT_TRUE(RunOnCpu(o.args).ok());
  int64_t begin = 0;
  for (size_t e = 0; e < groups.ends.size(); ++e) {
    const int64_t rows = groups.ends[e] - begin;
    if (rows > 0) {
      SCOPED_TRACE(testing::Message() << "group " << e);
      RefProblem p;
      p.m = rows;
      p.n = n;
      p.kb_end = kb;
      p.a = [&](int64_t i, int64_t k) { return DecodeE4M3(o.a.bytes()[(begin + i) * r + k]); };
      p.b = [&](int64_t j, int64_t k) { return DecodeE4M3(o.b.bytes()[(e * n + j) * r + k]); };
      p.a_scale = [&](int64_t i, int64_t blk) {
        return double{o.sa.data<float>()[(begin + i) * kb + blk]};
      };
      p.b_scale = [&](int64_t j, int64_t blk) {
        return double{o.sb.data<float>()[(e * nb + j / 128) * kb + blk]};
      };
      std::vector<double> group_prior;
      if (!prior.empty()) {
        group_prior.assign(prior.begin() + begin * n, prior.begin() + (begin + rows) * n);
      }
      EXPECT_EQ(CompareWithBudget(o.d.t, begin * n, n, Reference(p), kb, group_prior), "");
    }
    begin = groups.ends[e];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, GemmMGroupedCpuTest,
    ::testing::Combine(::testing::ValuesIn(StandardMixes()),
                       ::testing::Values(Groups{"ragged_i32", {37, 37, 200, 201, 330}, DType::kI32},
                                         Groups{"one_group_i64", {129}, DType::kI64},
                                         Groups{"aligned_i64", {128, 256, 256, 384}, DType::kI64})),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param).name;
    });

TEST(GemmMGroupedCpuTest, DecreasingGroupEndsAreInvalidArgument) {
  std::mt19937_64 rng(FreshSeed());
  const Mix mix = StandardMixes()[0];
  MGroupedOperands o = MakeMGrouped({100, 50, 200}, DType::kI32, 128, 128, mix, rng);
  const absl::Status s = RunOnCpu(o.args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("group_ends[1]=50"), absl::string_view::npos) << s;
}

TEST(GemmMGroupedCpuTest, LastGroupEndBelowRowCountIsInvalidArgument) {
  std::mt19937_64 rng(FreshSeed());
  const Mix mix = StandardMixes()[0];
  MGroupedOperands o = MakeMGrouped({100, 150, 200}, DType::kI64, 128, 128, mix, rng);
  o.ends.data<int64_t>()[2] = 190;
  const absl::Status s = RunOnCpu(o.args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("group_ends[2]=190"), absl::string_view::npos) << s;
}

TEST(GemmMGroupedCpuTest, NegativeGroupEndIsInvalidArgument) {
  std::mt19937_64 rng(FreshSeed());
  const Mix mix = StandardMixes()[0];
  MGroupedOperands o = MakeMGrouped({100, 150, 200}, DType::kI32, 128, 128, mix, rng);
  o.ends.data<int32_t>()[0] = -1;
  const absl::Status s = RunOnCpu(o.args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("group_ends[0]=-1"), absl::string_view::npos) << s;
}

// ---- K-grouped TN ---------------------------------------------------------------------------

struct KGroupedOperands {
  HostTensor a, sa, b, sb, ends, d;
  GemmArgs args;
};

KGroupedOperands MakeKGrouped(const std::vector<int64_t>& ends, DType ends_dtype, int64_t m,
                              int64_t n, const Mix& mix, std::mt19937_64& rng) {
  const int64_t total = ends.back(), experts = ends.size(), tb = total / 128;
  KGroupedOperands o{MakeHost(DType::kE4M3FN, {m, total}),
                     MakeHost(DType::kF32, {m, tb}),
                     MakeHost(DType::kE4M3FN, {n, total}),
                     MakeHost(DType::kF32, {n, tb}),
                     MakeEnds(ends, ends_dtype),
                     MakeHost(mix.out, {experts, m, n}),
                     {}};
  FillFp8(o.a, mix.a, rng);
  FillFp8(o.b, mix.b, rng);
  FillScales(o.sa, mix.scale_magnitude, rng);
  FillScales(o.sb, 0, rng);
  o.args.variant = GemmVariant::kKGroupedTN;
  o.args.a = o.a.t;
  o.args.a_scales = o.sa.t;
  o.args.b = o.b.t;
  o.args.b_scales = o.sb.t;
  o.args.group_ends = o.ends.t;
  o.args.d = o.d.t;
  o.args.accumulate = mix.accumulate;
  return o;
}

class GemmKGroupedCpuTest : public ::testing::TestWithParam<std::tuple<Mix, Groups>> {};

TEST_P(GemmKGroupedCpuTest, EveryExpertMatchesDoubleReferenceWithinBudget) {
  const auto& [mix, groups] = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const int64_t m = 72, n = 140, total = groups.ends.back(), tb = total / 128;
  KGroupedOperands o = MakeKGrouped(groups.ends, groups.dtype, m, n, mix, rng);
  std::vector<double> prior;
  if (mix.accumulate) {
    FillGaussian(o.d, rng);
    prior = ReadAll(o.d);
  } else {
    Poison(o.d);
  }
  ASSERT_TRUE(RunOnCpu(o.args).ok());
  int64_t begin = 0;
  for (size_t e = 0; e < groups.ends.size(); ++e) {
    SCOPED_TRACE(testing::Message() << "expert " << e);
    RefProblem p;
    p.m = m;
    p.n = n;
    p.kb_begin = begin / 128;
    p.kb_end = groups.ends[e] / 128;
    p.a = [&](int64_t i, int64_t k) { return DecodeE4M3(o.a.bytes()[i * total + k]); };
    p.b = [&](int64_t j, int64_t k) { return DecodeE4M3(o.b.bytes()[j * total + k]); };
    p.a_scale = [&](int64_t i, int64_t blk) { return double{o.sa.data<float>()[i * tb + blk]}; };
    p.b_scale = [&](int64_t j, int64_t blk) { return double{o.sb.data<float>()[j * tb + blk]}; };
    std::vector<double> expert_prior;
    if (!prior.empty()) {
      expert_prior.assign(prior.begin() + e * m * n, prior.begin() + (e + 1) * m * n);
    }
    EXPECT_EQ(
        CompareWithBudget(o.d.t, e * m * n, n, Reference(p), p.kb_end - p.kb_begin, expert_prior),
        "");
    begin = groups.ends[e];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, GemmKGroupedCpuTest,
    ::testing::Combine(
        ::testing::ValuesIn(StandardMixes()),
        // An empty expert (its d must be zero), one-block groups, a single expert.
        ::testing::Values(Groups{"with_empty_i32", {128, 128, 384, 512}, DType::kI32},
                          Groups{"one_expert_i64", {256}, DType::kI64})),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param).name;
    });

TEST(GemmKGroupedCpuTest, GroupEndOffTheScaleBlockIsInvalidArgument) {
  std::mt19937_64 rng(FreshSeed());
  const Mix mix = StandardMixes()[0];
  KGroupedOperands o = MakeKGrouped({128, 256, 384}, DType::kI32, 64, 64, mix, rng);
  o.ends.data<int32_t>()[1] = 200;
  const absl::Status s = RunOnCpu(o.args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("group_ends[1]=200 is not a multiple of block 128"),
            absl::string_view::npos)
      << s;
}

TEST(GemmKGroupedCpuTest, LastGroupEndAboveTokenCountIsInvalidArgument) {
  std::mt19937_64 rng(FreshSeed());
  const Mix mix = StandardMixes()[0];
  KGroupedOperands o = MakeKGrouped({128, 256}, DType::kI64, 64, 64, mix, rng);
  o.ends.data<int64_t>()[1] = 384;
  const absl::Status s = RunOnCpu(o.args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("group_ends[1]=384 must equal the row count 256"),
            absl::string_view::npos)
      << s;
}

}  // namespace
}  // namespace gemm_test
}  // namespace kd
