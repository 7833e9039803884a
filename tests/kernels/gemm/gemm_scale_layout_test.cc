// The GEMM's 1x128 scales in both layouts Quantize writes, on the CPU backend: every variant gives
// the same bits with K-block-major scales (the (rows, R/128) view with strides (1, ld)) as with
// row-major ones, and a K-block-major view binds to a buffer as a transposed 2-D tensor.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/gemm/gemm_test_util.h"

namespace kd {
namespace gemm_test {
namespace {

// A K-block-major copy of the row-major (rows, blocks) scales `rm`: K block kb's scales at
// kb * ld .. + rows, the tensor named as the (rows, blocks) view with strides (1, ld).
HostTensor KBlockMajorCopy(const HostTensor& rm, int64_t ld) {
  const int64_t rows = rm.t.shape[0], blocks = rm.t.shape[1];
  HostTensor out = MakeHost(DType::kF32, {blocks, ld});
  std::vector<float> fill(blocks * ld, -7.0f);  // padding a kernel must not read as a scale
  std::memcpy(out.t.data, fill.data(), fill.size() * sizeof(float));
  const float* src = static_cast<const float*>(rm.t.data);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t kb = 0; kb < blocks; ++kb) {
      out.data<float>()[kb * ld + i] = src[i * rm.t.strides[0] + kb];
    }
  }
  out.t.shape[0] = rows;
  out.t.shape[1] = blocks;
  out.t.strides[0] = 1;
  out.t.strides[1] = ld;
  return out;
}

HostTensor MakeEnds(const std::vector<int64_t>& ends) {
  HostTensor t = MakeHost(DType::kI64, {static_cast<int64_t>(ends.size())});
  for (size_t i = 0; i < ends.size(); ++i) t.data<int64_t>()[i] = ends[i];
  return t;
}

// Runs `rm` (row-major scales) and then `kbm` (the same with K-block-major copies) into the two
// poisoned outputs and expects the same bits, none of them NaN.
void ExpectSameBits(GemmArgs rm, GemmArgs kbm, HostTensor& d_rm, HostTensor& d_kbm) {
  Poison(d_rm);
  Poison(d_kbm);
  rm.d = d_rm.t;
  kbm.d = d_kbm.t;
  ASSERT_TRUE(RunOnCpu(rm).ok());
  const absl::Status s = RunOnCpu(kbm);
  ASSERT_TRUE(s.ok()) << s;
  const std::vector<double> want = ReadAll(d_rm), got = ReadAll(d_kbm);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(want[i] != want[i]) << "element " << i << " not written";
  }
  EXPECT_EQ(0, std::memcmp(d_rm.t.data, d_kbm.t.data, want.size() * DTypeSize(d_rm.t.dtype)));
}

class GemmScaleLayoutCpuTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(GemmScaleLayoutCpuTest, NtAndNnGiveTheSameBitsWithKBlockMajorActivationScales) {
  const int64_t pad = GetParam();
  std::mt19937_64 rng(FreshSeed());
  const int64_t m = 70, n = 200, r = 384, kb = r / 128;
  HostTensor a = MakeHost(DType::kE4M3FN, {m, r}), sa = MakeHost(DType::kF32, {m, kb});
  HostTensor b = MakeHost(DType::kE4M3FN, {n, r});
  HostTensor sb = MakeHost(DType::kF32, {(n + 127) / 128, kb});
  HostTensor w = MakeHost(DType::kE4M3FN, {r, n}), sw = MakeHost(DType::kF32, {kb, 2});
  FillFp8(a, Pattern::kGaussian, rng);
  FillFp8(b, Pattern::kGaussian, rng);
  FillFp8(w, Pattern::kAllCodes, rng);
  FillScales(sa, -3, rng);
  FillScales(sb, 0, rng);
  FillScales(sw, 0, rng);
  const HostTensor sa_k = KBlockMajorCopy(sa, m + pad);
  HostTensor d_rm = MakeHost(DType::kBF16, {m, n}), d_kbm = MakeHost(DType::kBF16, {m, n});

  GemmArgs nt;
  nt.variant = GemmVariant::kNT;
  nt.a = a.t;
  nt.a_scales = sa.t;
  nt.b = b.t;
  nt.b_scales = sb.t;
  GemmArgs nt_k = nt;
  nt_k.a_scales = sa_k.t;
  SCOPED_TRACE("nt");
  ExpectSameBits(nt, nt_k, d_rm, d_kbm);

  GemmArgs nn = nt;
  nn.variant = GemmVariant::kNN;
  nn.b = w.t;
  nn.b_scales = sw.t;
  GemmArgs nn_k = nn;
  nn_k.a_scales = sa_k.t;
  SCOPED_TRACE("nn");
  ExpectSameBits(nn, nn_k, d_rm, d_kbm);
}

TEST_P(GemmScaleLayoutCpuTest, TnGivesTheSameBitsWithEitherOperandsScalesKBlockMajor) {
  const int64_t pad = GetParam();
  std::mt19937_64 rng(FreshSeed());
  const int64_t m = 130, n = 96, r = 512, kb = r / 128;
  HostTensor a = MakeHost(DType::kE4M3FN, {m, r}), sa = MakeHost(DType::kF32, {m, kb});
  HostTensor b = MakeHost(DType::kE4M3FN, {n, r}), sb = MakeHost(DType::kF32, {n, kb});
  FillFp8(a, Pattern::kOutlierPerBlock, rng);
  FillFp8(b, Pattern::kGaussian, rng);
  FillScales(sa, 2, rng);
  FillScales(sb, -1, rng);
  const HostTensor sa_k = KBlockMajorCopy(sa, m + pad), sb_k = KBlockMajorCopy(sb, n + pad);
  HostTensor d_rm = MakeHost(DType::kF32, {m, n}), d_kbm = MakeHost(DType::kF32, {m, n});
  GemmArgs tn;
  tn.variant = GemmVariant::kTN;
  tn.a = a.t;
  tn.a_scales = sa.t;
  tn.b = b.t;
  tn.b_scales = sb.t;
  for (int which = 1; which <= 3; ++which) {  // a, b, both
    SCOPED_TRACE(which);
    GemmArgs k = tn;
    if (which & 1) k.a_scales = sa_k.t;
    if (which & 2) k.b_scales = sb_k.t;
    ExpectSameBits(tn, k, d_rm, d_kbm);
  }
}

TEST_P(GemmScaleLayoutCpuTest, MGroupedGivesTheSameBitsWithKBlockMajorActivationScales) {
  const int64_t pad = GetParam();
  std::mt19937_64 rng(FreshSeed());
  const std::vector<int64_t> ends = {40, 40, 173, 300};  // ragged, one group empty
  const int64_t total = ends.back(), experts = ends.size(), n = 160, r = 256, kb = r / 128;
  HostTensor a = MakeHost(DType::kE4M3FN, {total, r}), sa = MakeHost(DType::kF32, {total, kb});
  HostTensor b = MakeHost(DType::kE4M3FN, {experts, n, r});
  HostTensor sb = MakeHost(DType::kF32, {experts, (n + 127) / 128, kb});
  HostTensor e = MakeEnds(ends);
  FillFp8(a, Pattern::kGaussian, rng);
  FillFp8(b, Pattern::kGaussian, rng);
  FillScales(sa, 0, rng);
  FillScales(sb, 0, rng);
  const HostTensor sa_k = KBlockMajorCopy(sa, total + pad);
  HostTensor d_rm = MakeHost(DType::kBF16, {total, n}), d_kbm = MakeHost(DType::kBF16, {total, n});
  GemmArgs g;
  g.variant = GemmVariant::kMGroupedNT;
  g.a = a.t;
  g.a_scales = sa.t;
  g.b = b.t;
  g.b_scales = sb.t;
  g.group_ends = e.t;
  GemmArgs k = g;
  k.a_scales = sa_k.t;
  ExpectSameBits(g, k, d_rm, d_kbm);
}

TEST_P(GemmScaleLayoutCpuTest, KGroupedGivesTheSameBitsWithEitherOperandsScalesKBlockMajor) {
  const int64_t pad = GetParam();
  std::mt19937_64 rng(FreshSeed());
  const std::vector<int64_t> ends = {256, 256, 640};  // an empty expert
  const int64_t m = 72, n = 90, total = ends.back(), kb = total / 128;
  HostTensor a = MakeHost(DType::kE4M3FN, {m, total}), sa = MakeHost(DType::kF32, {m, kb});
  HostTensor b = MakeHost(DType::kE4M3FN, {n, total}), sb = MakeHost(DType::kF32, {n, kb});
  HostTensor e = MakeEnds(ends);
  FillFp8(a, Pattern::kGaussian, rng);
  FillFp8(b, Pattern::kAllCodes, rng);
  FillScales(sa, 1, rng);
  FillScales(sb, -2, rng);
  const HostTensor sa_k = KBlockMajorCopy(sa, m + pad), sb_k = KBlockMajorCopy(sb, n + pad);
  const int64_t experts = ends.size();
  HostTensor d_rm = MakeHost(DType::kF32, {experts, m, n});
  HostTensor d_kbm = MakeHost(DType::kF32, {experts, m, n});
  GemmArgs g;
  g.variant = GemmVariant::kKGroupedTN;
  g.a = a.t;
  g.a_scales = sa.t;
  g.b = b.t;
  g.b_scales = sb.t;
  g.group_ends = e.t;
  for (int which = 1; which <= 3; ++which) {
    SCOPED_TRACE(which);
    GemmArgs k = g;
    if (which & 1) k.a_scales = sa_k.t;
    if (which & 2) k.b_scales = sb_k.t;
    ExpectSameBits(g, k, d_rm, d_kbm);
  }
}

// K-block strides of exactly the rows (a contiguous K-block-major tensor) and larger.
INSTANTIATE_TEST_SUITE_P(Strides, GemmScaleLayoutCpuTest, ::testing::Values(0, 5),
                         [](const auto& info) {
                           return "ld_rows_plus_" + std::to_string(info.param);
                         });

TEST(GemmScaleLayoutBindTest, AKBlockMajorViewBindsAsATransposedMatrix) {
  std::vector<float> buffer(4 * 100);
  TensorDesc desc;
  desc.present = true;
  desc.dtype = DType::kF32;
  desc.rank = 2;
  desc.shape[0] = 100;  // rows
  desc.shape[1] = 4;    // K blocks
  desc.strides_given = true;
  desc.strides[0] = 1;
  desc.strides[1] = 100;
  const DeviceLoc host{BackendKind::kCpu, 0};
  absl::StatusOr<Tensor> t = BindTensor(desc, buffer.data(), buffer.size() * 4, host, "a_scales");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->strides[0], 1);
  EXPECT_EQ(t->strides[1], 100);
  // Its extent is the whole buffer: one float more does not fit.
  EXPECT_EQ(
      BindTensor(desc, buffer.data(), buffer.size() * 4 - 4, host, "a_scales").status().code(),
      absl::StatusCode::kInvalidArgument);
  // Blocks that would overlap, and a transposed view of another rank, stay refused.
  desc.strides[1] = 99;
  EXPECT_EQ(BindTensor(desc, buffer.data(), buffer.size() * 4, host, "a_scales").status().code(),
            absl::StatusCode::kInvalidArgument);
  desc.rank = 3;
  desc.shape[2] = 1;
  desc.strides[1] = 100;
  desc.strides[2] = 400;
  const absl::Status s = BindTensor(desc, buffer.data(), buffer.size() * 4, host, "x").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("x.strides[2]=400 must be 1"), std::string::npos) << s;
}

}  // namespace
}  // namespace gemm_test
}  // namespace kd
