// The portable tile GEMM (kernels/gpu/tile_gemm) on an NVIDIA GPU (sm_89 or later: mma.sync FP8)
// against the CPU backend, the reference: every variant, every config of the device's space,
// ragged M and N, strided operands and outputs, empty groups and group ends the kernel must
// clamp (i32 and i64), e4m3fn and e5m2 in every pairing, bf16 and f32 output, accumulation; and
// against cuBLASLt's block-scaled FP8 matmul where it takes the problem (NT, 1x128 A scales,
// 128x128 B scales). Skips without such a GPU (ctest label gpu).
//
// Budget (GPU vs CPU), the one gemm_cuda_test.cc states for the sm_90a kernel: per element
// |gpu - cpu| <= 2^-7 * S + 2^-7 * |cpu| (+ 2^-22 * |prior| when accumulating), S the same GEMM
// over |a|, |b|; norm-wise 2e-3 (f32 output) or 8e-3 (bf16). The matrix cores sum the products
// of a 128-wide block with fewer bits than fp32; the kernel promotes each block to fp32. Against
// cuBLASLt, both sides within that budget of the CPU: twice it.
//
// Which code ran: the test log prints the PTX and SASS versions of the kernels (the H100 runs
// sm_90a SASS; with CUDA_FORCE_PTX_JIT=1 the driver compiles the compute_89 PTX instead). With
// KD_EXPECT_TILE_GEMM_PTX=89 set, KernelCodeIsTheExpectedOne asserts that version.
#include "kernels/gpu/tile_gemm/tile_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"
#include "kernels/gpu/tile_gemm/tile_gemm_launch.h"
#include "tests/kernels/gemm/gemm_test_util.h"

namespace kd {
namespace tile_gemm {
namespace {

using gemm_test::HostTensor;
using gemm_test::MakeHost;
using gemm_test::Mix;
using gemm_test::Pattern;

// The device's architecture when it runs the tile GEMM, else "".
std::string Fp8Arch() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return "";
  const absl::StatusOr<TileDevice> d = CurrentTileDevice();
  if (!d.ok() || FamilyOf(d->arch) != ArchFamily::kNvidia) return "";
  return d->arch;
}

#define KD_REQUIRE_FP8_GPU()          \
  const std::string arch = Fp8Arch(); \
  if (arch.empty()) GTEST_SKIP() << "no GPU with FP8 mma.sync (sm_89 or later)"

// Device copy of a host tensor (all its storage, strided rows too); freed on destruction.
struct DeviceTensor {
  void* ptr = nullptr;
  Tensor t;
  size_t bytes = 0;
  explicit DeviceTensor(const HostTensor& h) {
    bytes = h.storage.size() * sizeof(h.storage[0]);
    EXPECT_EQ(cudaMalloc(&ptr, bytes + 16), cudaSuccess);
    t = h.t;
    t.data = ptr;
    t.loc = DeviceLoc{BackendKind::kCuda, 0};
    EXPECT_EQ(cudaMemcpy(ptr, h.t.data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceTensor() { cudaFree(ptr); }
  void CopyTo(HostTensor& h) const {
    EXPECT_EQ(cudaMemcpy(h.storage.data(), ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
};

// FP8 codes of the tensor's own dtype (e4m3fn through the shared generator, e5m2 likewise:
// N(0,1) * 64 encoded, or small values with one ±max per 128-wide block, or zeros).
void FillCodes(HostTensor& t, Pattern pattern, std::mt19937_64& rng) {
  if (t.t.dtype != DType::kE5M2) {
    gemm_test::FillFp8(t, pattern, rng);
    return;
  }
  const int64_t count = t.t.numel(), row = t.t.shape[t.t.rank - 1];
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  uint8_t* codes = t.bytes();
  for (int64_t i = 0; i < count; ++i) {
    codes[i] = pattern == Pattern::kZeros             ? 0
               : pattern == Pattern::kOutlierPerBlock ? fp8::Encode<fp8::E5M2>(gauss(rng) * 0.05f)
                                                      : fp8::Encode<fp8::E5M2>(gauss(rng) * 64.0f);
  }
  if (pattern == Pattern::kOutlierPerBlock) {
    std::uniform_int_distribution<int64_t> pos(0, 127);
    for (int64_t base = 0; base < count; base += 128) {
      const int64_t len = std::min<int64_t>(128, row - base % row);
      codes[base + pos(rng) % len] = (rng() & 1) ? 0x7B : 0xFB;  // ±57344
    }
  }
}

// The operands of one op on the host, in the order a, a_scales, b, b_scales, d, [group_ends].
struct HostOp {
  std::vector<HostTensor> tensors;
  GemmArgs args;
};

GemmArgs Bind(GemmArgs shape, std::vector<HostTensor>& t) {
  shape.a = t[0].t;
  shape.a_scales = t[1].t;
  shape.b = t[2].t;
  shape.b_scales = t[3].t;
  shape.d = t[4].t;
  if (t.size() > 5) shape.group_ends = t[5].t;
  return shape;
}

void Abs(HostTensor& t) {
  for (size_t i = 0; i < t.storage.size() * sizeof(t.storage[0]); ++i) t.bytes()[i] &= 0x7F;
}

// A (rows, cols) host tensor whose rows are `ld` elements apart (ld >= cols).
HostTensor MakeStrided(DType dtype, int64_t rows, int64_t cols, int64_t ld) {
  HostTensor h = MakeHost(dtype, {rows, ld});
  h.t.shape[1] = cols;
  return h;
}

// A contiguous f32 host tensor of `d`'s shape (the mass S of an output).
HostTensor DenseF32Like(const Tensor& d) {
  HostTensor h = MakeHost(DType::kF32, {1});
  int64_t count = 1;
  for (int i = d.rank - 1; i >= 0; --i) {
    h.t.shape[i] = d.shape[i];
    h.t.strides[i] = count;
    count *= d.shape[i];
  }
  h.t.rank = d.rank;
  h.storage.assign((count * 4 + 7) / 8, 0);
  h.t.data = h.storage.data();
  return h;
}

// Runs the op on the GPU and checks every output element against `reference` (the CPU on the
// same inputs, or `cpu_op` when the GPU op's group ends need clamping first: then the GPU output
// must match the reference's d on its elements and keep its poison on the rest).
void CheckAgainstCpu(HostOp& op, const TileShape& shape, HostOp* cpu_op = nullptr) {
  HostOp& ref_op = cpu_op != nullptr ? *cpu_op : op;
  std::vector<HostTensor> cpu = ref_op.tensors;
  const GemmArgs cpu_args = Bind(ref_op.args, cpu);
  const absl::Status cpu_ran = gemm_test::RunOnCpu(cpu_args);
  ASSERT_TRUE(cpu_ran.ok()) << cpu_ran;
  std::vector<HostTensor> mass = ref_op.tensors;
  Abs(mass[0]);
  Abs(mass[2]);
  mass[4] = DenseF32Like(cpu_args.d);
  GemmArgs mass_args = Bind(ref_op.args, mass);
  mass_args.accumulate = false;
  const absl::Status mass_ran = gemm_test::RunOnCpu(mass_args);
  ASSERT_TRUE(mass_ran.ok()) << mass_ran;

  std::vector<HostTensor>& t = op.tensors;
  const bool accumulate = op.args.accumulate;
  if (!accumulate) gemm_test::Poison(t[4]);  // NaN everywhere: an unwritten element fails
  const HostTensor before = t[4];
  std::vector<std::unique_ptr<DeviceTensor>> dev;
  for (const HostTensor& h : t) dev.push_back(std::make_unique<DeviceTensor>(h));
  GemmArgs gpu_args = op.args;
  gpu_args.a = dev[0]->t;
  gpu_args.a_scales = dev[1]->t;
  gpu_args.b = dev[2]->t;
  gpu_args.b_scales = dev[3]->t;
  gpu_args.d = dev[4]->t;
  if (dev.size() > 5) gpu_args.group_ends = dev[5]->t;
  ASSERT_TRUE(Validate(Op(gpu_args)).ok());
  const absl::Status launched = LaunchTileGemm(gpu_args, shape, nullptr);
  ASSERT_TRUE(launched.ok()) << launched;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  HostTensor out = t[4];
  dev[4]->CopyTo(out);

  // Element (logical index) i of d: strided rows in the GPU's tensor, dense in the references.
  const Tensor& d = out.t;
  const int64_t cols = d.shape[d.rank - 1];
  auto at = [&](const HostTensor& h, int64_t i) {
    const int64_t row = i / cols, col = i % cols;
    const int64_t offset = d.rank == 3 ? (row / d.shape[1]) * h.t.strides[0] +
                                             (row % d.shape[1]) * h.t.strides[1] + col
                                       : row * h.t.strides[0] + col;
    return gemm_test::ReadOutput(h.t, offset);
  };
  const int64_t checked = cpu_args.d.numel(), total = d.numel();
  double err2 = 0, ref2 = 0;
  int bad = 0;
  std::string first;
  for (int64_t i = 0; i < checked; ++i) {
    const double got = at(out, i), want = at(cpu[4], i), s = at(mass[4], i);
    const double prior = accumulate ? at(before, i) : 0.0;
    const double bound =
        std::ldexp(s, -7) + std::ldexp(std::fabs(want), -7) + std::ldexp(std::fabs(prior), -22);
    const double err = std::fabs(got - want);
    err2 += err * err;
    ref2 += want * want;
    if (!(err <= bound) && bad++ == 0) {
      first = absl::StrCat("element ", i, ": gpu ", got, " cpu ", want, " bound ", bound);
    }
  }
  for (int64_t i = checked; i < total; ++i) {
    if (!std::isnan(at(out, i)) && bad++ == 0) {
      first = absl::StrCat("element ", i, " past the clamped groups was written: ", at(out, i));
    }
  }
  EXPECT_EQ(bad, 0) << bad << " elements over the bound; first " << first;
  const double budget = d.dtype == DType::kF32 ? 2e-3 : 8e-3;
  if (ref2 > 0) {
    EXPECT_LE(std::sqrt(err2 / ref2), budget) << "norm-wise relative error";
  } else {
    EXPECT_EQ(err2, 0.0);
  }
}

// The standard mixes minus every-finite-code (its cancellation measures the reference, not the
// kernel), as gemm_cuda_test.cc runs them.
std::vector<Mix> GpuMixes() {
  std::vector<Mix> out;
  for (const Mix& m : gemm_test::StandardMixes()) {
    if (m.a != Pattern::kAllCodes) out.push_back(m);
  }
  return out;
}

void FillAndBind(HostOp& op, GemmVariant v, const Mix& mix, std::mt19937_64& rng) {
  FillCodes(op.tensors[0], mix.a, rng);
  gemm_test::FillScales(op.tensors[1], mix.scale_magnitude, rng);
  FillCodes(op.tensors[2], mix.b, rng);
  gemm_test::FillScales(op.tensors[3], 0, rng);
  if (mix.accumulate) gemm_test::FillGaussian(op.tensors[4], rng);
  op.args.variant = v;
  op.args.accumulate = mix.accumulate;
  op.args = Bind(op.args, op.tensors);
}

struct Layout {
  int64_t lda = 0, ldb = 0, ldd = 0;  // 0: contiguous
};

// NT/TN: b (n, k). NN: b (k, n), row stride ldb. NN draws b along its rows (N), so the outlier
// pattern puts one outlier in every 128 columns rather than every reduction block.
HostOp MakeDense(GemmVariant v, int64_t m, int64_t n, int64_t k, const Mix& mix, DType a_type,
                 DType b_type, std::mt19937_64& rng, Layout l = {}) {
  HostOp op;
  const int64_t kb = k / 128, nb = (n + 127) / 128;
  op.tensors.push_back(MakeStrided(a_type, m, k, l.lda > 0 ? l.lda : k));
  op.tensors.push_back(MakeHost(DType::kF32, {m, kb}));
  if (v == GemmVariant::kNN) {
    op.tensors.push_back(MakeStrided(b_type, k, n, l.ldb > 0 ? l.ldb : n));
    op.tensors.push_back(MakeHost(DType::kF32, {kb, nb}));
  } else {
    op.tensors.push_back(MakeStrided(b_type, n, k, l.ldb > 0 ? l.ldb : k));
    op.tensors.push_back(MakeHost(DType::kF32, {v == GemmVariant::kNT ? nb : n, kb}));
  }
  op.tensors.push_back(MakeStrided(mix.out, m, n, l.ldd > 0 ? l.ldd : n));
  FillAndBind(op, v, mix, rng);
  return op;
}

HostTensor Ends(const std::vector<int64_t>& ends, DType dtype) {
  HostTensor t = MakeHost(dtype, {static_cast<int64_t>(ends.size())});
  for (size_t i = 0; i < ends.size(); ++i) {
    if (dtype == DType::kI64)
      t.data<int64_t>()[i] = ends[i];
    else
      t.data<int32_t>()[i] = static_cast<int32_t>(ends[i]);
  }
  return t;
}

// M-grouped NT over `total` rows with group ends `ends` (as given: they may need clamping).
HostOp MakeMGrouped(const std::vector<int64_t>& ends, int64_t total, int64_t n, int64_t k,
                    const Mix& mix, std::mt19937_64& rng, DType ends_type = DType::kI32) {
  const int64_t experts = ends.size(), kb = k / 128;
  HostOp op;
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {total, k}));
  op.tensors.push_back(MakeHost(DType::kF32, {total, kb}));
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {experts, n, k}));
  op.tensors.push_back(MakeHost(DType::kF32, {experts, (n + 127) / 128, kb}));
  op.tensors.push_back(MakeHost(mix.out, {total, n}));
  op.tensors.push_back(Ends(ends, ends_type));
  FillAndBind(op, GemmVariant::kMGroupedNT, mix, rng);
  return op;
}

// K-grouped TN over `total` tokens: a (m, total), b (n, total), d (E, m, n).
HostOp MakeKGrouped(const std::vector<int64_t>& ends, int64_t total, int64_t m, int64_t n,
                    const Mix& mix, std::mt19937_64& rng, DType ends_type = DType::kI32) {
  const int64_t experts = ends.size(), tb = total / 128;
  HostOp op;
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {m, total}));
  op.tensors.push_back(MakeHost(DType::kF32, {m, tb}));
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {n, total}));
  op.tensors.push_back(MakeHost(DType::kF32, {n, tb}));
  op.tensors.push_back(MakeHost(mix.out, {experts, m, n}));
  op.tensors.push_back(Ends(ends, ends_type));
  FillAndBind(op, GemmVariant::kKGroupedTN, mix, rng);
  return op;
}

// The clamping rule of the kernel (and of the CUDA backend): each end into [previous end, rows].
std::vector<int64_t> Clamped(const std::vector<int64_t>& ends, int64_t rows) {
  std::vector<int64_t> out;
  int64_t prev = 0;
  for (int64_t e : ends) {
    prev = std::max(prev, std::min(std::max<int64_t>(e, 0), rows));
    out.push_back(prev);
  }
  return out;
}

std::string ShapeName(const TileShape& s) { return TileShapeToString(s); }

// ---- Dense variants -------------------------------------------------------------------------

struct DenseCase {
  GemmVariant variant;
  int64_t m, n, k;
  Layout layout = {};
};

class TileGemmDenseTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(TileGemmDenseTest, MatchesCpuBackendWithinBudgetOnEveryConfig) {
  KD_REQUIRE_FP8_GPU();
  const DenseCase& c = GetParam();
  for (const TileShape& shape : TileGemmSpace(arch)) {
    for (const Mix& mix : GpuMixes()) {
      const uint64_t seed = gemm_test::FreshSeed();
      SCOPED_TRACE(testing::Message() << ShapeName(shape) << " " << mix.name << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op =
          MakeDense(c.variant, c.m, c.n, c.k, mix, DType::kE4M3FN, DType::kE4M3FN, rng, c.layout);
      CheckAgainstCpu(op, shape);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TileGemmDenseTest,
    ::testing::Values(
        // Whole tiles, ragged M and N (past one tile, one short of a tile, one row, one column
        // past a 128x128 scale block), long K.
        DenseCase{GemmVariant::kNT, 256, 256, 512}, DenseCase{GemmVariant::kNT, 300, 200, 384},
        DenseCase{GemmVariant::kNT, 1, 136, 128}, DenseCase{GemmVariant::kNT, 127, 129, 256},
        DenseCase{GemmVariant::kNT, 64, 520, 2048},
        // Strided a, b and d.
        DenseCase{GemmVariant::kNT, 200, 136, 256, {272, 384, 140}},
        DenseCase{GemmVariant::kTN, 400, 136, 512}, DenseCase{GemmVariant::kTN, 100, 72, 640},
        DenseCase{GemmVariant::kTN, 200, 136, 256, {272, 256, 137}},
        // NN: any N (b read 4 columns at a time, the last 1-3 bytewise), strided W.
        DenseCase{GemmVariant::kNN, 256, 256, 512}, DenseCase{GemmVariant::kNN, 300, 208, 384},
        DenseCase{GemmVariant::kNN, 130, 7, 128, {0, 8, 0}},
        DenseCase{GemmVariant::kNN, 1, 150, 256, {0, 152, 0}},
        DenseCase{GemmVariant::kNN, 520, 400, 1024}),
    [](const auto& info) {
      const DenseCase& c = info.param;
      return absl::StrCat(GemmVariantName(c.variant), "_", c.m, "x", c.n, "x", c.k,
                          c.layout.lda + c.layout.ldb + c.layout.ldd > 0 ? "_strided" : "");
    });

// Every pairing of e4m3fn and e5m2 (mma.sync takes each), on each dense variant.
TEST(TileGemmTest, Fp8FormatPairsMatchCpuBackend) {
  KD_REQUIRE_FP8_GPU();
  const TileShape shape = TileGemmSpace(arch)[0];
  const std::vector<Mix> mixes = GpuMixes();
  for (GemmVariant v : {GemmVariant::kNT, GemmVariant::kNN, GemmVariant::kTN}) {
    for (DType a : {DType::kE4M3FN, DType::kE5M2}) {
      for (DType b : {DType::kE4M3FN, DType::kE5M2}) {
        for (const Mix& mix : mixes) {
          const uint64_t seed = gemm_test::FreshSeed();
          SCOPED_TRACE(testing::Message() << GemmVariantName(v) << " " << DTypeName(a) << "x"
                                          << DTypeName(b) << " " << mix.name << " seed " << seed);
          std::mt19937_64 rng(seed);
          HostOp op = MakeDense(v, 300, 200, 384, mix, a, b, rng);
          CheckAgainstCpu(op, shape);
        }
      }
    }
  }
}

// ---- Grouped variants -----------------------------------------------------------------------

TEST(TileGemmTest, MGroupedMatchesCpuBackendOnEveryConfig) {
  KD_REQUIRE_FP8_GPU();
  // Empty groups, groups starting and ending mid-tile, a one-row group.
  const std::vector<int64_t> ends = {37, 37, 300, 301, 700, 1024};
  for (const TileShape& shape : TileGemmSpace(arch)) {
    for (const Mix& mix : GpuMixes()) {
      const uint64_t seed = gemm_test::FreshSeed();
      SCOPED_TRACE(testing::Message() << ShapeName(shape) << " " << mix.name << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeMGrouped(ends, 1024, 200, 512, mix, rng);
      CheckAgainstCpu(op, shape);
    }
  }
}

TEST(TileGemmTest, KGroupedMatchesCpuBackendOnEveryConfig) {
  KD_REQUIRE_FP8_GPU();
  const std::vector<int64_t> ends = {128, 128, 512, 1024};  // one expert empty: d[1] = 0
  for (const TileShape& shape : TileGemmSpace(arch)) {
    for (const Mix& mix : GpuMixes()) {
      const uint64_t seed = gemm_test::FreshSeed();
      SCOPED_TRACE(testing::Message() << ShapeName(shape) << " " << mix.name << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeKGrouped(ends, 1024, 200, 136, mix, rng);
      CheckAgainstCpu(op, shape);
    }
  }
}

// Many groups (more than the CTA has threads: the group table's scan spans several per thread).
TEST(TileGemmTest, MGroupedWithManyGroupsMatchesCpuBackend) {
  KD_REQUIRE_FP8_GPU();
  std::vector<int64_t> ends;
  std::mt19937_64 sizes(7);
  int64_t end = 0;
  for (int g = 0; g < 600; ++g) {
    end += sizes() % 5 == 0 ? 0 : sizes() % 9;
    ends.push_back(end);
  }
  const Mix mix = GpuMixes()[0];
  const uint64_t seed = gemm_test::FreshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  HostOp op = MakeMGrouped(ends, end, 136, 256, mix, rng, DType::kI64);
  CheckAgainstCpu(op, TileGemmSpace(arch)[0]);
}

// Group ends the CPU backend would refuse: the kernel clamps each into [previous end, rows]
// (and K-grouped ends down to a 128-block), as the CUDA backend documents, and must then match
// the CPU on the clamped ends; M-grouped rows past the last clamped end stay unwritten.
TEST(TileGemmTest, BadGroupEndsAreClampedAsDocumented) {
  KD_REQUIRE_FP8_GPU();
  const TileShape shape = TileGemmSpace(arch)[0];
  const Mix mix = GpuMixes()[0];
  for (DType ends_type : {DType::kI32, DType::kI64}) {
    {
      const std::vector<int64_t> bad = {37, 20, -5, 5000, 900};  // decreasing, negative, past T
      const uint64_t seed = gemm_test::FreshSeed();
      SCOPED_TRACE(testing::Message() << "m-grouped " << DTypeName(ends_type) << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeMGrouped(bad, 1024, 200, 256, mix, rng, ends_type);
      HostOp cpu = op;
      cpu.tensors[5] = Ends(Clamped(bad, 1024), ends_type);
      cpu.args = Bind(op.args, cpu.tensors);
      CheckAgainstCpu(op, shape, &cpu);
    }
    {
      // The last end short of T: rows [700, 1024) belong to no group and stay poisoned.
      const std::vector<int64_t> short_ends = {37, 300, 700};
      const uint64_t seed = gemm_test::FreshSeed();
      SCOPED_TRACE(testing::Message() << "m-grouped short " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeMGrouped(short_ends, 1024, 200, 256, mix, rng, ends_type);
      HostOp cpu = op;
      cpu.tensors[0].t.shape[0] = 700;
      cpu.tensors[1].t.shape[0] = 700;
      cpu.tensors[4].t.shape[0] = 700;
      cpu.args = Bind(op.args, cpu.tensors);
      CheckAgainstCpu(op, shape, &cpu);
    }
    {
      const std::vector<int64_t> bad = {100, 300, 256, 5000};  // mid-block, decreasing, past T
      const uint64_t seed = gemm_test::FreshSeed();
      SCOPED_TRACE(testing::Message() << "k-grouped " << DTypeName(ends_type) << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeKGrouped(bad, 1024, 200, 136, mix, rng, ends_type);
      std::vector<int64_t> blocks = Clamped(bad, 1024);
      for (int64_t& e : blocks) e = e / 128 * 128;
      HostOp cpu = op;
      cpu.tensors[5] = Ends(blocks, ends_type);
      cpu.args = Bind(op.args, cpu.tensors);
      CheckAgainstCpu(op, shape, &cpu);
    }
  }
}

// ---- Refusals -------------------------------------------------------------------------------

TEST(TileGemmTest, RefusesWhatTheDeviceOrBuildCannotRun) {
  KD_REQUIRE_FP8_GPU();
  std::mt19937_64 rng(1);
  const Mix mix = GpuMixes()[0];
  HostOp op = MakeDense(GemmVariant::kNT, 64, 64, 128, mix, DType::kE4M3FN, DType::kE4M3FN, rng);
  std::vector<std::unique_ptr<DeviceTensor>> dev;
  for (const HostTensor& h : op.tensors) dev.push_back(std::make_unique<DeviceTensor>(h));
  GemmArgs g = op.args;
  g.a = dev[0]->t;
  g.a_scales = dev[1]->t;
  g.b = dev[2]->t;
  g.b_scales = dev[3]->t;
  g.d = dev[4]->t;
  EXPECT_EQ(LaunchTileGemm(g, TileShape{96, 96, 2}, nullptr).code(),
            absl::StatusCode::kUnimplemented);
  GemmArgs fnuz = g;
  fnuz.a.dtype = fnuz.b.dtype = DType::kE4M3FNUZ;
  const absl::Status refused = LaunchTileGemm(fnuz, TileShape{}, nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find(arch), absl::string_view::npos) << refused;
  GemmArgs misaligned = g;
  misaligned.a.data = static_cast<char*>(g.a.data) + 8;
  EXPECT_EQ(LaunchTileGemm(misaligned, TileShape{}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Which code the driver loaded: sm_90a SASS on an H100, or the compute_89 PTX under
// CUDA_FORCE_PTX_JIT=1 (then KD_EXPECT_TILE_GEMM_PTX=89 makes this a check).
TEST(TileGemmTest, KernelCodeIsTheExpectedOne) {
  KD_REQUIRE_FP8_GPU();
  for (const TileShape& shape : TileGemmSpace(arch)) {
    int ptx = 0, binary = 0;
    ASSERT_EQ(TileGemmKernelVersions(shape, &ptx, &binary), cudaSuccess) << ShapeName(shape);
    std::printf("tile gemm %s on %s: PTX %d, binary %d\n", ShapeName(shape).c_str(), arch.c_str(),
                ptx, binary);
    if (const char* expect = std::getenv("KD_EXPECT_TILE_GEMM_PTX")) {
      EXPECT_EQ(ptx, std::atoi(expect)) << ShapeName(shape);
    }
  }
}

// ---- Against cuBLASLt -----------------------------------------------------------------------

// cuBLASLt's block-scaled FP8 matmul on our NT operands (as bench/gpu_gemm/gpu_gemm_bench.cc
// calls it): its A is our A (m,k) read as a k x m column-major matrix, transposed, VEC128
// scales; its B our B (n,k) as k x n column-major, BLK128x128 scales; D (m x n column-major) is
// our D transposed. Returns false when cuBLASLt does not take the problem.
bool RunCublasLt(int64_t m, int64_t n, int64_t k, const void* a, const void* b,
                 const float* a_scales, const float* b_scales, void* d) {
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  bool ok = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const cublasLtMatmulMatrixScale_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  ok =
      ok && cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) == 0;
  ok =
      ok && cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) == 0;
  ok = ok && cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode,
                                            sizeof(a_mode)) == 0;
  ok = ok && cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode,
                                            sizeof(b_mode)) == 0;
  ok = ok && cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scales,
                                            sizeof(a_scales)) == 0;
  ok = ok && cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scales,
                                            sizeof(b_scales)) == 0;
  ok = ok && cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k) == 0;
  ok = ok && cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k) == 0;
  ok = ok && cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m) == 0;
  void* workspace = nullptr;
  const size_t workspace_bytes = 32 << 20;
  ok = ok && cudaMalloc(&workspace, workspace_bytes) == cudaSuccess;
  cublasLtMatmulPreference_t pref = nullptr;
  ok = ok && cublasLtMatmulPreferenceCreate(&pref) == 0;
  ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace_bytes, sizeof(workspace_bytes)) == 0;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ok = ok &&
       cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &result, &found) == 0 &&
       found > 0;
  const float alpha = 1.0f, beta = 0.0f;
  ok = ok && cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &result.algo,
                            workspace, workspace_bytes, nullptr) == 0;
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  cudaFree(workspace);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (desc) cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(lt);
  return ok;
}

// cuBLASLt's documentation of where each block's scale lives is not one the test can rely on, so
// the test tries the two orders of each scale tensor (row-major as kerneld's, and transposed) and
// takes the one whose result matches the CPU backend; the tile GEMM must then match that result
// within twice the budget (both sides within it of the CPU).
TEST(TileGemmTest, NtMatchesCublasLtBlockScaledMatmul) {
  KD_REQUIRE_FP8_GPU();
  const int64_t shapes[][3] = {{256, 384, 512}, {1024, 1536, 1024}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2], kb = k / 128, nb = n / 128;
    const uint64_t seed = gemm_test::FreshSeed();
    SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k << " seed " << seed);
    std::mt19937_64 rng(seed);
    Mix mix = GpuMixes()[0];
    mix.out = DType::kF32;
    HostOp op = MakeDense(GemmVariant::kNT, m, n, k, mix, DType::kE4M3FN, DType::kE4M3FN, rng);
    std::vector<HostTensor> cpu = op.tensors;
    ASSERT_TRUE(gemm_test::RunOnCpu(Bind(op.args, cpu)).ok());
    std::vector<HostTensor> mass = op.tensors;
    Abs(mass[0]);
    Abs(mass[2]);
    ASSERT_TRUE(gemm_test::RunOnCpu(Bind(op.args, mass)).ok());
    const std::vector<double> want = gemm_test::ReadAll(cpu[4]), size = gemm_test::ReadAll(mass[4]);

    std::vector<std::unique_ptr<DeviceTensor>> dev;
    for (const HostTensor& h : op.tensors) dev.push_back(std::make_unique<DeviceTensor>(h));
    GemmArgs g = op.args;
    g.a = dev[0]->t;
    g.a_scales = dev[1]->t;
    g.b = dev[2]->t;
    g.b_scales = dev[3]->t;
    g.d = dev[4]->t;
    ASSERT_TRUE(LaunchTileGemm(g, TileShape{}, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    HostTensor ours_host = op.tensors[4];
    dev[4]->CopyTo(ours_host);
    const std::vector<double> ours = gemm_test::ReadAll(ours_host);

    const float* sa = op.tensors[1].data<float>();
    const float* sb = op.tensors[3].data<float>();
    std::vector<float> sa_t(m * kb), sb_t(nb * kb);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < kb; ++j) sa_t[j * m + i] = sa[i * kb + j];
    for (int64_t i = 0; i < nb; ++i)
      for (int64_t j = 0; j < kb; ++j) sb_t[j * nb + i] = sb[i * kb + j];
    float *dsa_t = nullptr, *dsb_t = nullptr, *dlt = nullptr;
    ASSERT_EQ(cudaMalloc(&dsa_t, sa_t.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dsb_t, sb_t.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dlt, m * n * 4), cudaSuccess);
    cudaMemcpy(dsa_t, sa_t.data(), sa_t.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dsb_t, sb_t.data(), sb_t.size() * 4, cudaMemcpyHostToDevice);
    std::vector<float> lt(m * n);
    std::string matched;
    for (int order = 0; order < 4 && matched.empty(); ++order) {
      const float* a_scales = order & 1 ? dsa_t : static_cast<const float*>(g.a_scales.data);
      const float* b_scales = order & 2 ? dsb_t : static_cast<const float*>(g.b_scales.data);
      if (!RunCublasLt(m, n, k, g.a.data, g.b.data, a_scales, b_scales, dlt)) {
        GTEST_SKIP() << "cuBLASLt does not take the block-scaled problem here";
      }
      cudaMemcpy(lt.data(), dlt, lt.size() * 4, cudaMemcpyDeviceToHost);
      bool close = true;
      for (int64_t i = 0; i < m && close; ++i) {
        for (int64_t j = 0; j < n && close; ++j) {
          const double v = lt[j * m + i], w = want[i * n + j];
          close =
              std::fabs(v - w) <= std::ldexp(size[i * n + j], -7) + std::ldexp(std::fabs(w), -7);
        }
      }
      if (close) {
        matched = absl::StrCat("a scales ", order & 1 ? "(K/128, M)" : "(M, K/128)", ", b scales ",
                               order & 2 ? "(K/128, N/128)" : "(N/128, K/128)");
      }
    }
    cudaFree(dsa_t);
    cudaFree(dsb_t);
    cudaFree(dlt);
    ASSERT_FALSE(matched.empty()) << "no scale order makes cuBLASLt match the CPU backend";
    std::printf("cuBLASLt %ldx%ldx%ld matched the CPU with %s\n", static_cast<long>(m),
                static_cast<long>(n), static_cast<long>(k), matched.c_str());
    int bad = 0;
    std::string first;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double v = lt[j * m + i], o = ours[i * n + j], w = want[i * n + j];
        const double bound = 2 * (std::ldexp(size[i * n + j], -7) + std::ldexp(std::fabs(w), -7));
        if (!(std::fabs(o - v) <= bound) && bad++ == 0) {
          first = absl::StrCat("(", i, ", ", j, "): tile ", o, " cuBLASLt ", v);
        }
      }
    }
    EXPECT_EQ(bad, 0) << "first " << first;
  }
}

}  // namespace
}  // namespace tile_gemm
}  // namespace kd
