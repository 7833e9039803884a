// The sm_90a FP8 GEMM (kernels/cuda/gemm) against the CPU backend, the reference, on random
// inputs at several magnitudes, one outlier per block and zeros, for every variant it runs and
// each built tile width; the split tail (with scratch: the last wave's tiles split along K,
// clusters, ragged edges) and its determinism; NN (run as NT on a
// transposed copy of W) also through the CUDA backend
// (the stream's scratch), bit for bit against NT on a host-transposed W, and the transpose alone
// byte for byte; the portable tile GEMM through the CUDA backend (its config forced on sm_90).
// Needs an sm_90 GPU (the tile GEMM cases: sm_89 or later; ctest label gpu).
//
// Budget (GPU vs CPU): the tensor core sums FP8 products inside a 128-wide block with fewer bits
// than fp32 (about 14 kept, by DeepSeek-V3's report for Hopper), which is why the kernel promotes
// each block to fp32. Per element |gpu - cpu| <= 2^-7 * S + 2^-7 * |cpu| (+ 2^-22 * |prior| when
// accumulating), where S is the same GEMM over |a|, |b| (the size of the terms) and the second
// term covers both sides' bf16 rounding; norm-wise ||gpu - cpu|| / ||cpu|| <= 2e-3 (f32 output)
// or 8e-3 (bf16 output). Seen on an H100: gaussian inputs stay under 2^-11 * S; with one ±448
// outlier per block in both operands (the small products are aligned to the large ones'
// exponent and lose their low bits inside the tensor core) a few elements reach 2^-8.6 * S,
// hence 2^-7: this is the hardware's in-block accumulation, which no kernel can undo. The split
// tail changes only the fp32 order of the block sums of a split tile (the owner's slice, then
// slices 0, 1, ... added to it): at most s-1 more fp32 roundings of partial sums, each within
// 2^-24 of |partial| <= S, far inside the same budget, which its cases must meet too.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/cuda_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/registry.h"
#include "kernels/cuda/gemm/cublaslt.h"
#include "kernels/cuda/gemm/cublaslt_gemm.h"
#include "kernels/cuda/gemm/gemm_fp8.h"
#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/gemm_launch.h"
#include "kernels/gpu/tile_gemm/tile_gemm.h"
#include "kernels/gpu/transpose_fp8.h"
#include "tests/kernels/gemm/gemm_test_util.h"
#include "tests/support/run_op.h"

namespace kd {
namespace gemm_test {
namespace {

bool HaveSm90() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return false;
  cudaDeviceProp prop;
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major == 9;
}

// Device copy of a host tensor; frees on destruction.
struct DeviceTensor {
  void* ptr = nullptr;
  Tensor t;
  DeviceTensor(const HostTensor& h, size_t pad_bytes = 0) {
    const size_t bytes = h.storage.size() * sizeof(h.storage[0]);  // all rows, strided too
    EXPECT_EQ(cudaMalloc(&ptr, bytes + pad_bytes + 16), cudaSuccess);
    t = h.t;
    t.data = static_cast<char*>(ptr) + pad_bytes;
    t.loc = DeviceLoc{BackendKind::kCuda, 0};
    EXPECT_EQ(cudaMemcpy(t.data, h.t.data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceTensor() { cudaFree(ptr); }
  void CopyTo(HostTensor& h) const {
    EXPECT_EQ(
        cudaMemcpy(h.t.data, t.data, h.t.numel() * DTypeSize(h.t.dtype), cudaMemcpyDeviceToHost),
        cudaSuccess);
  }
};

// The operands of one op on the host; `args` points at them.
struct HostOp {
  std::vector<HostTensor> tensors;  // a, a_scales, b, b_scales, d, [group_ends]
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

// Clears the sign bit of every FP8 code: |x| for e4m3fn (NaN codes stay NaN, none are drawn).
void Abs(HostTensor& t) {
  for (size_t i = 0; i < t.storage.size() * sizeof(t.storage[0]); ++i) t.bytes()[i] &= 0x7F;
}

// Enqueues the op whose device tensors `args` names and waits for it.
using GpuRun = std::function<absl::Status(const GemmArgs& args)>;

GpuRun WithConfig(const GemmConfig& config) {
  return [config](const GemmArgs& args) {
    const absl::Status launched = LaunchGemmFp8(args, config, nullptr);
    if (!launched.ok()) return launched;
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return absl::InternalError(cudaGetErrorString(err));
    return absl::OkStatus();
  };
}

// As WithConfig, with the scratch GemmFp8ScratchBytes asks for (as the CUDA backend passes it),
// so the split tail is on; the scratch starts as garbage (0xAB), as a reused one may.
GpuRun WithScratch(const GemmConfig& config) {
  return [config](const GemmArgs& args) {
    const uint64_t bytes = GemmFp8ScratchBytes(args);
    void* scratch = nullptr;
    if (cudaMalloc(&scratch, bytes) != cudaSuccess) return absl::InternalError("cudaMalloc");
    cudaMemset(scratch, 0xAB, bytes);
    absl::Status status = LaunchGemmFp8(args, config, nullptr, scratch);
    const cudaError_t err = cudaDeviceSynchronize();
    cudaFree(scratch);
    if (status.ok() && err != cudaSuccess) status = absl::InternalError(cudaGetErrorString(err));
    return status;
  };
}

// The elements of D (rank 2, any row stride; rank 3 contiguous) as double, row by row.
std::vector<double> ReadD(const HostTensor& d) {
  if (d.t.rank != 2 || d.t.strides[0] == d.t.shape[1]) return ReadAll(d);
  std::vector<double> out;
  out.reserve(d.t.numel());
  for (int64_t i = 0; i < d.t.shape[0]; ++i) {
    for (int64_t j = 0; j < d.t.shape[1]; ++j) {
      out.push_back(ReadOutput(d.t, i * d.t.strides[0] + j));
    }
  }
  return out;
}

// Bytes of a host tensor's storage: every row, padding included.
size_t StorageBytes(const HostTensor& h) { return h.storage.size() * sizeof(h.storage[0]); }

// Runs `op` on the GPU with `config` and on the CPU, and checks the budget.
void CheckAgainstCpu(HostOp& op, const GemmConfig& config);
void CheckAgainstCpu(HostOp& op, const GpuRun& run) {
  std::vector<HostTensor>& t = op.tensors;
  const bool accumulate = op.args.accumulate;
  // Expected: CPU on the same inputs, and the mass S on |a|, |b|.
  std::vector<HostTensor> cpu = t;
  GemmArgs cpu_args = Bind(op.args, cpu);
  ASSERT_TRUE(RunOnCpu(cpu_args).ok());
  std::vector<HostTensor> mass = t;
  Abs(mass[0]);
  Abs(mass[2]);
  GemmArgs mass_args = Bind(op.args, mass);
  mass_args.accumulate = false;
  mass[4].t.dtype = DType::kF32;
  mass[4].storage.assign((mass[4].t.numel() * 4 + 7) / 8, 0);
  mass[4].t.data = mass[4].storage.data();
  for (int64_t i = mass[4].t.rank - 1, stride = 1; i >= 0; --i) {
    mass[4].t.strides[i] = stride;  // contiguous, whatever d's strides
    stride *= mass[4].t.shape[i];
  }
  mass_args.d = mass[4].t;
  ASSERT_TRUE(RunOnCpu(mass_args).ok());
  const std::vector<double> prior = accumulate ? ReadD(t[4]) : std::vector<double>();

  std::vector<std::unique_ptr<DeviceTensor>> dev;
  for (const HostTensor& h : t) dev.push_back(std::make_unique<DeviceTensor>(h));
  if (!accumulate) {
    ASSERT_EQ(cudaMemset(dev[4]->t.data, 0xFF, StorageBytes(t[4])),
              cudaSuccess);  // NaN everywhere: an unwritten element fails
  }
  GemmArgs gpu_args = op.args;
  gpu_args.a = dev[0]->t;
  gpu_args.a_scales = dev[1]->t;
  gpu_args.b = dev[2]->t;
  gpu_args.b_scales = dev[3]->t;
  gpu_args.d = dev[4]->t;
  if (dev.size() > 5) gpu_args.group_ends = dev[5]->t;
  ASSERT_TRUE(Validate(Op(gpu_args)).ok());
  const absl::Status ran = run(gpu_args);
  ASSERT_TRUE(ran.ok()) << ran;
  HostTensor out = t[4];
  ASSERT_EQ(cudaMemcpy(out.t.data, dev[4]->t.data, StorageBytes(out), cudaMemcpyDeviceToHost),
            cudaSuccess);

  const std::vector<double> got = ReadD(out), want = ReadD(cpu[4]), s = ReadAll(mass[4]);
  double err2 = 0, ref2 = 0;
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double before = prior.empty() ? 0.0 : prior[i];
    double bound = std::ldexp(s[i], -7) + std::ldexp(std::fabs(want[i]), -7);
    bound += std::ldexp(std::fabs(before), -22);
    const double err = std::fabs(got[i] - want[i]);
    err2 += err * err;
    ref2 += want[i] * want[i];
    if (!(err <= bound)) {
      if (bad++ == 0) {
        first = absl::StrCat("element ", i, ": gpu ", got[i], " cpu ", want[i], " bound ", bound);
      }
    }
  }
  EXPECT_EQ(bad, 0) << bad << " elements over the bound; first " << first;
  const double budget = out.t.dtype == DType::kF32 ? 2e-3 : 8e-3;
  if (ref2 > 0) {
    EXPECT_LE(std::sqrt(err2 / ref2), budget) << "norm-wise relative error";
  } else {
    EXPECT_EQ(err2, 0.0);
  }
}

void CheckAgainstCpu(HostOp& op, const GemmConfig& config) {
  CheckAgainstCpu(op, WithConfig(config));
}

// `src` (rows, cols) contiguous, transposed into a (cols, rows) tensor with row stride `stride`
// >= rows (the bytes past each row are left 0).
HostTensor TransposedBytes(const HostTensor& src, int64_t stride) {
  const int64_t rows = src.t.shape[0], cols = src.t.shape[1];
  HostTensor out = MakeHost(src.t.dtype, {cols, stride});
  out.t.shape[1] = rows;
  const uint8_t* s = static_cast<const uint8_t*>(src.t.data);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out.bytes()[j * stride + i] = s[i * cols + j];
  }
  return out;
}

// Fills a builder's tensors in the order every builder draws them (a, its scales, b unless the
// builder filled it already, b's scales, and d when the mix accumulates) and binds op.args.
void FillAndBind(HostOp& op, GemmVariant v, const Mix& mix, std::mt19937_64& rng,
                 bool fill_b = true) {
  FillFp8(op.tensors[0], mix.a, rng);
  FillScales(op.tensors[1], mix.scale_magnitude, rng);
  if (fill_b) FillFp8(op.tensors[2], mix.b, rng);
  FillScales(op.tensors[3], 0, rng);
  if (mix.accumulate) FillGaussian(op.tensors[4], rng);
  op.args.variant = v;
  op.args.accumulate = mix.accumulate;
  op.args = Bind(op.args, op.tensors);
}

// Dense NT/TN: b (n, k). NN: b = W (k, n) with row stride `b_stride` (0: n), drawn as Wᵀ (n, k)
// so that the outlier pattern puts one outlier in every 128-block of the reduction, as for NT.
HostOp MakeDense(GemmVariant v, int64_t m, int64_t n, int64_t k, const Mix& mix,
                 std::mt19937_64& rng, int64_t b_stride = 0) {
  HostOp op;
  const int64_t kb = k / 128, nb = (n + 127) / 128;
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {m, k}));
  op.tensors.push_back(MakeHost(DType::kF32, {m, kb}));
  HostTensor b = MakeHost(DType::kE4M3FN, {n, k});
  FillFp8(b, mix.b, rng);
  if (v == GemmVariant::kNN) {
    op.tensors.push_back(TransposedBytes(b, b_stride > 0 ? b_stride : n));
    op.tensors.push_back(MakeHost(DType::kF32, {kb, nb}));
  } else {
    op.tensors.push_back(std::move(b));
    op.tensors.push_back(MakeHost(DType::kF32, {v == GemmVariant::kNT ? nb : n, kb}));
  }
  op.tensors.push_back(MakeHost(mix.out, {m, n}));
  FillAndBind(op, v, mix, rng, /*fill_b=*/false);  // b drawn above, before NN transposes it
  return op;
}

HostTensor Ends(const std::vector<int64_t>& ends) {
  HostTensor t = MakeHost(DType::kI32, {static_cast<int64_t>(ends.size())});
  for (size_t i = 0; i < ends.size(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(ends[i]);
  return t;
}

// Mixes the GPU runs: the standard ones minus every-finite-code (its 2^-9..448 range times
// random signs cancels so far that the norm-wise budget measures cancellation, not the kernel).
std::vector<Mix> GpuMixes() {
  std::vector<Mix> out;
  for (const Mix& m : StandardMixes()) {
    if (m.a != Pattern::kAllCodes) out.push_back(m);
  }
  return out;
}

struct DenseCase {
  GemmVariant variant;
  int64_t m, n, k;
  GemmConfig config;
  int64_t b_stride = 0;  // NN only: W's row stride in bytes (0: contiguous, n)
};

class GemmCudaDenseTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(GemmCudaDenseTest, MatchesCpuBackendWithinBudget) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const DenseCase& c = GetParam();
  for (const Mix& mix : GpuMixes()) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << mix.name << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = MakeDense(c.variant, c.m, c.n, c.k, mix, rng, c.b_stride);
    CheckAgainstCpu(op, c.config);
  }
}

GemmConfig Config(int block_m, int block_n, int stages, int raster = 8, int cluster = 1) {
  GemmConfig c;
  c.cluster = cluster;
  c.block_m = block_m;
  c.block_n = block_n;
  c.stages = stages;
  c.raster_group = raster;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmCudaDenseTest,
    ::testing::Values(DenseCase{GemmVariant::kNT, 256, 256, 512, Config(128, 128, 6)},
                      DenseCase{GemmVariant::kNT, 300, 200, 384, Config(128, 128, 4, 1)},
                      DenseCase{GemmVariant::kNT, 520, 392, 1024, Config(128, 64, 8, 3)},
                      DenseCase{GemmVariant::kNT, 64, 4096, 1024, Config(128, 64, 6)},
                      DenseCase{GemmVariant::kNT, 1, 136, 128, Config(128, 128, 5)},
                      DenseCase{GemmVariant::kNT, 1024, 1024, 2048, Config(128, 128, 6)},
                      DenseCase{GemmVariant::kNT, 500, 264, 768, Config(128, 128, 5, 2, 2)},
                      DenseCase{GemmVariant::kNT, 1100, 1000, 1024, Config(128, 128, 6, 3, 2)},
                      DenseCase{GemmVariant::kNT, 200, 4096, 256, Config(128, 64, 8, 8, 2)},
                      DenseCase{GemmVariant::kTN, 400, 136, 512, Config(128, 128, 6, 8, 2)},
                      DenseCase{GemmVariant::kTN, 256, 320, 1024, Config(128, 128, 6)},
                      DenseCase{GemmVariant::kTN, 200, 72, 640, Config(128, 64, 8)},
                      // NN: ragged M and N (N a multiple of 16 when W is contiguous), one row,
                      // clusters, and strided W whose N leaves a ragged 16-byte chunk.
                      DenseCase{GemmVariant::kNN, 256, 256, 512, Config(128, 128, 6)},
                      DenseCase{GemmVariant::kNN, 300, 208, 384, Config(128, 128, 4, 1)},
                      DenseCase{GemmVariant::kNN, 520, 400, 1024, Config(128, 64, 8, 3)},
                      DenseCase{GemmVariant::kNN, 1, 144, 128, Config(128, 128, 5)},
                      DenseCase{GemmVariant::kNN, 1100, 1008, 1024, Config(128, 128, 6, 3, 2)},
                      DenseCase{GemmVariant::kNN, 200, 200, 256, Config(128, 64, 8), 208},
                      DenseCase{GemmVariant::kNN, 130, 7, 128, Config(128, 128, 6), 16},
                      DenseCase{GemmVariant::kNT, 64, 4096, 1024, Config(64, 64, 8)},
                      DenseCase{GemmVariant::kNT, 130, 200, 384, Config(64, 64, 8, 2)},
                      DenseCase{GemmVariant::kTN, 100, 136, 512, Config(64, 64, 8)},
                      // 64x32: ragged N (a partial last tile), one row, TN, NN, long K.
                      DenseCase{GemmVariant::kNT, 64, 4096, 1024, Config(64, 32, 16)},
                      DenseCase{GemmVariant::kNT, 50, 200, 384, Config(64, 32, 16, 2)},
                      DenseCase{GemmVariant::kNT, 1, 136, 128, Config(64, 32, 16)},
                      DenseCase{GemmVariant::kTN, 100, 136, 512, Config(64, 32, 16)},
                      DenseCase{GemmVariant::kNN, 60, 208, 384, Config(64, 32, 16)},
                      DenseCase{GemmVariant::kNT, 64, 264, 4096, Config(64, 32, 16)},
                      // 192-column tiles: a tile starting at column 192 (64 into a B scale
                      // block) straddles two B scale blocks; N past the last whole tile, one
                      // short of a tile, inside a partial last scale block, and one row.
                      DenseCase{GemmVariant::kNT, 300, 200, 384, Config(128, 192, 4)},
                      DenseCase{GemmVariant::kNT, 520, 648, 1024, Config(128, 192, 4, 3)},
                      DenseCase{GemmVariant::kNT, 256, 383, 512, Config(128, 192, 4)},
                      DenseCase{GemmVariant::kNT, 1, 136, 128, Config(128, 192, 4)},
                      DenseCase{GemmVariant::kNT, 1024, 1152, 2048, Config(128, 192, 4)},
                      DenseCase{GemmVariant::kTN, 400, 392, 512, Config(128, 192, 4)},
                      DenseCase{GemmVariant::kNN, 520, 400, 1024, Config(128, 192, 4, 3)},
                      // 192-column tiles in clusters of 2 (B multicast), an odd M tile count.
                      DenseCase{GemmVariant::kNT, 1100, 1000, 1024, Config(128, 192, 4, 3, 2)},
                      DenseCase{GemmVariant::kTN, 400, 136, 512, Config(128, 192, 4, 8, 2)},
                      DenseCase{GemmVariant::kNN, 300, 208, 384, Config(128, 192, 4, 8, 2)},
                      // 192x128 tiles (three consumer warpgroups): ragged M and N, M below
                      // one tile and one row, several tiles along both, TN and NN.
                      DenseCase{GemmVariant::kNT, 300, 200, 384, Config(192, 128, 4)},
                      DenseCase{GemmVariant::kNT, 520, 392, 1024, Config(192, 128, 4, 3)},
                      DenseCase{GemmVariant::kNT, 100, 136, 256, Config(192, 128, 4)},
                      DenseCase{GemmVariant::kNT, 1, 136, 128, Config(192, 128, 4)},
                      DenseCase{GemmVariant::kNT, 1024, 1152, 2048, Config(192, 128, 4)},
                      DenseCase{GemmVariant::kTN, 400, 392, 512, Config(192, 128, 4)},
                      DenseCase{GemmVariant::kNN, 520, 400, 1024, Config(192, 128, 4, 3)},
                      // 192x128 in clusters of 2 (B multicast): odd M tile counts (3, 1).
                      DenseCase{GemmVariant::kNT, 500, 392, 1024, Config(192, 128, 4, 3, 2)},
                      DenseCase{GemmVariant::kNT, 150, 1000, 512, Config(192, 128, 4, 8, 2)},
                      DenseCase{GemmVariant::kTN, 400, 136, 512, Config(192, 128, 4, 8, 2)},
                      DenseCase{GemmVariant::kNN, 300, 208, 384, Config(192, 128, 4, 8, 2)}),
    [](const auto& info) {
      const DenseCase& c = info.param;
      return std::string(GemmVariantName(c.variant)) + "_" + std::to_string(c.m) + "x" +
             std::to_string(c.n) + "x" + std::to_string(c.k) + "_bm" +
             std::to_string(c.config.block_m) + "_c" + std::to_string(c.config.cluster) + "_bn" +
             std::to_string(c.config.block_n) + "_s" + std::to_string(c.config.stages) +
             (c.b_stride > 0 ? "_ldb" + std::to_string(c.b_stride) : "");
    });

GemmConfig WithCtas(GemmConfig c, int num_ctas) {
  c.num_ctas = num_ctas;
  return c;
}

// M-grouped NT: a (T, k), experts' b (E, n, k), group ends `ends` (E of them, the last T).
HostOp MakeMGrouped(const std::vector<int64_t>& ends, int64_t n, int64_t k, const Mix& mix,
                    std::mt19937_64& rng) {
  const int64_t total = ends.back(), experts = ends.size(), kb = k / 128;
  HostOp op;
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {total, k}));
  op.tensors.push_back(MakeHost(DType::kF32, {total, kb}));
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {experts, n, k}));
  op.tensors.push_back(MakeHost(DType::kF32, {experts, (n + 127) / 128, kb}));
  op.tensors.push_back(MakeHost(mix.out, {total, n}));
  op.tensors.push_back(Ends(ends));
  FillAndBind(op, GemmVariant::kMGroupedNT, mix, rng);
  return op;
}

TEST(GemmCudaTest, MGroupedMatchesCpuBackendWithinBudget) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const std::vector<int64_t> ends = {37, 37, 300, 301, 700, 1024};
  for (const GemmConfig& config :
       {Config(128, 128, 6), Config(128, 64, 8), Config(128, 128, 6, 8, 2), Config(64, 64, 8),
        Config(64, 32, 16), Config(128, 192, 4), Config(192, 128, 4), Config(128, 192, 4, 8, 2),
        Config(192, 128, 4, 8, 2)}) {
    for (const Mix& mix : GpuMixes()) {
      const uint64_t seed = FreshSeed();
      SCOPED_TRACE(testing::Message()
                   << mix.name << " " << GemmConfigToString(config) << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeMGrouped(ends, 320, 512, mix, rng);
      CheckAgainstCpu(op, config);
    }
  }
}

// M-grouped in clusters of 2: a work item is two M-adjacent tiles of one group sharing that
// expert's B tile (multicast halves). Each case lists its groups' tile counts for its block_m:
// odd counts leave the pair's second tile at or past the group's end (it must store nothing,
// and its rows belong to the next group or lie past the tensor), empty groups have no item,
// groups start and end mid-tile, and the last group ends at the tensor's end with an odd count.
// Columns: n = 200 leaves the second N tile's upper B half (rank 1's load) wholly past N.
struct MGroupedCase {
  const char* name;
  std::vector<int64_t> ends;
  int64_t n, k;
  GemmConfig config;
};

class GemmCudaMGroupedClusterTest : public ::testing::TestWithParam<MGroupedCase> {};

TEST_P(GemmCudaMGroupedClusterTest, MatchesCpuBackendWithinBudget) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const MGroupedCase& c = GetParam();
  ASSERT_EQ(c.config.cluster, 2);
  for (const Mix& mix : GpuMixes()) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << mix.name << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = MakeMGrouped(c.ends, c.n, c.k, mix, rng);
    CheckAgainstCpu(op, c.config);
  }
}

// 128-row tiles: groups of 384, 0, 512, 104, 0, 300 and 384 rows = 3, 0, 4, 1, 0, 3, 3 tiles.
const std::vector<int64_t> kEnds128 = {384, 384, 896, 1000, 1000, 1300, 1684};
// 192-row tiles: groups of 384, 0, 512, 104, 300, 0 and 576 rows = 2, 0, 3, 1, 2, 0, 3 tiles.
const std::vector<int64_t> kEnds192 = {384, 384, 896, 1000, 1300, 1300, 1876};

INSTANTIATE_TEST_SUITE_P(
    Groups, GemmCudaMGroupedClusterTest,
    ::testing::Values(
        MGroupedCase{"bm128_bn128", kEnds128, 200, 512, Config(128, 128, 5, 8, 2)},
        MGroupedCase{"bm128_bn128_s6_band1", kEnds128, 320, 384, Config(128, 128, 6, 1, 2)},
        MGroupedCase{"bm128_bn192", kEnds128, 320, 384, Config(128, 192, 4, 2, 2)},
        MGroupedCase{"bm128_bn192_n200", kEnds128, 200, 512, Config(128, 192, 4, 8, 2)},
        MGroupedCase{"bm192_bn128", kEnds192, 200, 512, Config(192, 128, 4, 3, 2)},
        MGroupedCase{"bm192_bn128_n320", kEnds192, 320, 384, Config(192, 128, 4, 8, 2)},
        // One cluster walks every item, across groups and partner tiles past their group.
        MGroupedCase{"bm128_bn192_one_cluster", kEnds128, 320, 384,
                     WithCtas(Config(128, 192, 4, 8, 2), 2)},
        MGroupedCase{"bm192_bn128_three_clusters", kEnds192, 200, 512,
                     WithCtas(Config(192, 128, 4, 8, 2), 6)},
        // Every group one tile (each pair's second tile idle), and one group alone, odd.
        MGroupedCase{"bm128_bn128_single_tiles",
                     {100, 228, 356, 400, 528},
                     320,
                     256,
                     Config(128, 128, 5, 8, 2)},
        MGroupedCase{"bm192_bn128_one_group", {900}, 320, 256, Config(192, 128, 4, 8, 2)}),
    [](const auto& info) { return std::string(info.param.name); });

// K-grouped TN: a (m, T), b (n, T), group ends `ends` over T (the last T), d (E, m, n).
HostOp MakeKGrouped(const std::vector<int64_t>& ends, int64_t m, int64_t n, const Mix& mix,
                    std::mt19937_64& rng) {
  const int64_t total = ends.back(), experts = ends.size(), tb = total / 128;
  HostOp op;
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {m, total}));
  op.tensors.push_back(MakeHost(DType::kF32, {m, tb}));
  op.tensors.push_back(MakeHost(DType::kE4M3FN, {n, total}));
  op.tensors.push_back(MakeHost(DType::kF32, {n, tb}));
  op.tensors.push_back(MakeHost(mix.out, {experts, m, n}));
  op.tensors.push_back(Ends(ends));
  FillAndBind(op, GemmVariant::kKGroupedTN, mix, rng);
  return op;
}

TEST(GemmCudaTest, KGroupedMatchesCpuBackendWithinBudget) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const std::vector<int64_t> ends = {128, 128, 512, 1024};  // one expert empty
  for (const GemmConfig& config :
       {Config(128, 128, 6), Config(128, 64, 6), Config(128, 128, 5, 8, 2), Config(64, 64, 8),
        Config(64, 32, 16), Config(128, 192, 4), Config(192, 128, 4)}) {
    for (const Mix& mix : GpuMixes()) {
      const uint64_t seed = FreshSeed();
      SCOPED_TRACE(testing::Message() << mix.name << " bn" << config.block_n << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeKGrouped(ends, 200, 136, mix, rng);
      CheckAgainstCpu(op, config);
    }
  }
}

// The scale loads: the kernel's TMA thread loads each K block's scales (a 16-byte box of four
// K blocks' scales per row) for the 128x192 tile in clusters of 2 in dense problems with 128x128
// B scales (NT, NN) when both scale tensors have 16-byte aligned rows; otherwise (unclustered,
// M-grouped, TN, K-grouped, other tiles, unaligned rows) producer warps copy them with cp.async.
// Each case states the path it takes (checked with GemmFp8LoadsScalesByTma on the device
// tensors) and must match the CPU backend: K/128 a multiple of 4 or not (3, 5), per variant and
// tile, and scale tensors whose rows are padded to 4 or 8 floats while K/128 is 3 or 5 (the
// padding holds NaN: a kernel that read it would fail). A tile's first block sits at every column
// of a 4-column box in the split tail's cases (GemmCudaSplitTailTest) and, for the cp.async path,
// in the K-grouped ones.
struct ScalePathCase {
  const char* name;
  GemmVariant variant;
  int64_t m, n, k;  // M-grouped: m unused (the ends); K-grouped: k unused (the ends)
  GemmConfig config;
  bool pad_scales;
  bool tma;  // the path it must take
  std::vector<int64_t> ends = {};
};

// `t` (rank 2 or 3, contiguous, last dimension c) re-laid with rows of the next multiple of 4
// above c elements, the c used ones first and NaN after them.
HostTensor PadScaleRows(const HostTensor& t) {
  const int64_t c = t.t.shape[t.t.rank - 1], rows = t.t.numel() / c, row = c + 4 - c % 4;
  HostTensor out = MakeHost(DType::kF32, {rows, row});
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < row; ++j) {
      out.data<float>()[i * row + j] =
          j < c ? static_cast<const float*>(t.t.data)[i * c + j] : std::nanf("");
    }
  }
  out.t.rank = t.t.rank;
  int64_t stride = row;
  for (int d = t.t.rank - 1; d >= 0; --d) {
    out.t.shape[d] = t.t.shape[d];
    out.t.strides[d] = d == t.t.rank - 1 ? 1 : stride;
    if (d < t.t.rank - 1) stride *= t.t.shape[d];
  }
  return out;
}

class GemmCudaScalePathTest : public ::testing::TestWithParam<ScalePathCase> {};

TEST_P(GemmCudaScalePathTest, TakesItsPathAndMatchesCpuBackendWithinBudget) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const ScalePathCase& c = GetParam();
  for (const Mix& mix : GpuMixes()) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << mix.name << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = c.variant == GemmVariant::kMGroupedNT ? MakeMGrouped(c.ends, c.n, c.k, mix, rng)
                : c.variant == GemmVariant::kKGroupedTN
                    ? MakeKGrouped(c.ends, c.m, c.n, mix, rng)
                    : MakeDense(c.variant, c.m, c.n, c.k, mix, rng);
    if (c.pad_scales) {
      op.tensors[1] = PadScaleRows(op.tensors[1]);
      op.tensors[3] = PadScaleRows(op.tensors[3]);
      op.args = Bind(op.args, op.tensors);
    }
    const GemmConfig config = c.config;
    const bool tma = c.tma;
    CheckAgainstCpu(op, [config, tma](const GemmArgs& args) {
      EXPECT_EQ(GemmFp8LoadsScalesByTma(args, config), tma);
      return WithConfig(config)(args);
    });
  }
}

// Groups of 1, 2, 1 and 1 or 4 K blocks, starting at blocks 0, 1, 3 and 4.
const std::vector<int64_t> kEndsK640 = {128, 384, 512, 640};    // T/128 = 5
const std::vector<int64_t> kEndsK1024 = {128, 384, 512, 1024};  // T/128 = 8

INSTANTIATE_TEST_SUITE_P(
    Paths, GemmCudaScalePathTest,
    ::testing::Values(
        // 128x192 (the tile built with TMA scale loads), clusters of 2; unclustered it copies.
        ScalePathCase{"nt_k384_cp_async_bn192_c2", GemmVariant::kNT, 300, 200, 384,
                      Config(128, 192, 4, 8, 2), false, false},
        ScalePathCase{"nt_k512_cp_async_bn192", GemmVariant::kNT, 300, 392, 512,
                      Config(128, 192, 4), false, false},
        ScalePathCase{"nt_k512_tma_bn192_c2_two_tiles", GemmVariant::kNT, 300, 392, 512,
                      Config(128, 192, 4, 8, 2), false, true},
        ScalePathCase{"nt_k512_tma_bn192_c2", GemmVariant::kNT, 1100, 1000, 512,
                      Config(128, 192, 4, 3, 2), false, true},
        ScalePathCase{"nt_k384_padded_tma_bn192_c2", GemmVariant::kNT, 1100, 1000, 384,
                      Config(128, 192, 4, 3, 2), true, true},
        ScalePathCase{"tn_k384_cp_async_bn192", GemmVariant::kTN, 400, 392, 384,
                      Config(128, 192, 4), false, false},
        // Per-row B scales (TN, K-grouped) are always copied, aligned or not.
        ScalePathCase{"tn_k512_cp_async_bn192", GemmVariant::kTN, 400, 392, 512,
                      Config(128, 192, 4), false, false},
        ScalePathCase{"tn_k512_cp_async_bn192_c2", GemmVariant::kTN, 400, 136, 512,
                      Config(128, 192, 4, 8, 2), false, false},
        ScalePathCase{"tn_k640_padded_cp_async_bn192", GemmVariant::kTN, 200, 136, 640,
                      Config(128, 192, 4), true, false},
        ScalePathCase{"nn_k640_cp_async_bn192", GemmVariant::kNN, 520, 400, 640,
                      Config(128, 192, 4, 3), false, false},
        ScalePathCase{"nn_k1024_cp_async_bn192", GemmVariant::kNN, 520, 400, 1024,
                      Config(128, 192, 4, 3), false, false},
        ScalePathCase{"nn_k1024_tma_bn192_c2", GemmVariant::kNN, 520, 400, 1024,
                      Config(128, 192, 4, 3, 2), false, true},
        ScalePathCase{"nn_k512_tma_bn192_c2", GemmVariant::kNN, 300, 208, 512,
                      Config(128, 192, 4, 8, 2), false, true},
        ScalePathCase{"m_grouped_k384_cp_async_bn192_c2", GemmVariant::kMGroupedNT, 0, 200, 384,
                      Config(128, 192, 4, 8, 2), false, false, kEnds128},
        // M-grouped is always copied: by TMA it was 1-3% slower on an H100.
        ScalePathCase{"m_grouped_k512_cp_async_bn192_c2", GemmVariant::kMGroupedNT, 0, 200, 512,
                      Config(128, 192, 4, 8, 2), false, false, kEnds128},
        ScalePathCase{"m_grouped_k384_padded_cp_async_bn192_c2", GemmVariant::kMGroupedNT, 0, 320,
                      384, Config(128, 192, 4, 2, 2), true, false, kEnds128},
        ScalePathCase{"m_grouped_k512_cp_async_bn192", GemmVariant::kMGroupedNT, 0, 320, 512,
                      Config(128, 192, 4), false, false, kEnds128},
        ScalePathCase{"k_grouped_t640_cp_async_bn192", GemmVariant::kKGroupedTN, 200, 136, 0,
                      Config(128, 192, 4), false, false, kEndsK640},
        ScalePathCase{"k_grouped_t1024_cp_async_bn192", GemmVariant::kKGroupedTN, 200, 136, 0,
                      Config(128, 192, 4), false, false, kEndsK1024},
        ScalePathCase{"k_grouped_t640_padded_cp_async_bn192", GemmVariant::kKGroupedTN, 200, 136, 0,
                      Config(128, 192, 4), true, false, kEndsK640},
        // Tiles built without TMA scale loads copy them with cp.async, aligned or not.
        ScalePathCase{"nt_k512_cp_async_bm192_c2", GemmVariant::kNT, 500, 392, 512,
                      Config(192, 128, 4, 3, 2), false, false},
        ScalePathCase{"nt_k512_cp_async_bn128_s5", GemmVariant::kNT, 300, 264, 512,
                      Config(128, 128, 5), false, false},
        ScalePathCase{"tn_k512_cp_async_bm192", GemmVariant::kTN, 400, 392, 512,
                      Config(192, 128, 4), false, false},
        ScalePathCase{"m_grouped_k512_cp_async_bm192_c2", GemmVariant::kMGroupedNT, 0, 320, 512,
                      Config(192, 128, 4, 3, 2), false, false, kEnds192},
        ScalePathCase{"k_grouped_t1024_cp_async_bm64", GemmVariant::kKGroupedTN, 200, 136, 0,
                      Config(64, 64, 8), false, false, kEndsK1024}),
    [](const auto& info) { return std::string(info.param.name); });

// The epilogue's stores: with more tiles than CTAs, a bf16 D written (not accumulated) by NT, NN,
// TN or M-grouped NT on a 128- or 192-wide tile leaves each 64-row slice of a tile through a TMA
// bulk store from the epilogue buffers (two per warpgroup where shared memory has room, else
// one), M-grouped slices that cross their group's end excepted; otherwise threads store 16 bytes
// at a time. Each case
// caps the CTAs (GemmConfig::num_ctas) so that every CTA runs several tiles through the same
// buffers, states the path it takes (GemmFp8StoresByTma on the device tensors) and must match
// the CPU backend: N not a multiple of 64 (clipped columns), M past the last full tile (clipped
// rows; in clusters of 2, a tile wholly past the end), every tile shape and buffer count.
struct StorePathCase {
  const char* name;
  GemmVariant variant;
  int64_t m, n, k;  // M-grouped: m unused (the ends)
  GemmConfig config;
  int num_ctas;
  bool tma;  // the path it must take
  std::vector<int64_t> ends = {};
};

class GemmCudaStorePathTest : public ::testing::TestWithParam<StorePathCase> {};

TEST_P(GemmCudaStorePathTest, TakesItsPathAndMatchesCpuBackendWithinBudget) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const StorePathCase& c = GetParam();
  for (const Mix& mix : GpuMixes()) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << mix.name << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = c.variant == GemmVariant::kMGroupedNT
                    ? MakeMGrouped(c.ends, c.n, c.k, mix, rng)
                    : MakeDense(c.variant, c.m, c.n, c.k, mix, rng);
    GemmConfig config = c.config;
    config.num_ctas = c.num_ctas;
    // The mixes with an f32 output or accumulating keep the 16-byte stores whatever the case.
    const bool tma = c.tma && op.args.d.dtype == DType::kBF16 && !op.args.accumulate;
    CheckAgainstCpu(op, [config, tma](const GemmArgs& args) {
      EXPECT_EQ(GemmFp8StoresByTma(args, config), tma);
      return WithConfig(config)(args);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, GemmCudaStorePathTest,
    ::testing::Values(
        // 128x192 with TMA scale loads (two buffers): 9 M tiles in clusters of 2, N 1000.
        StorePathCase{"nt_tma_bn192_c2_two_buffers", GemmVariant::kNT, 1100, 1000, 512,
                      Config(128, 192, 4, 3, 2), 8, true},
        // 192x128 (three warpgroups, two buffers), 128x128 with 5 stages (one) and 4 (two).
        StorePathCase{"nt_bm192_c2", GemmVariant::kNT, 500, 392, 512, Config(192, 128, 4, 3, 2), 4,
                      true},
        StorePathCase{"nt_bn128_s5_one_buffer", GemmVariant::kNT, 300, 264, 512,
                      Config(128, 128, 5), 2, true},
        StorePathCase{"nt_bn128_s4_two_buffers", GemmVariant::kNT, 300, 264, 512,
                      Config(128, 128, 4), 2, true},
        // 64-wide tiles are built without the path.
        StorePathCase{"nt_bn64_s8", GemmVariant::kNT, 520, 392, 256, Config(128, 64, 8), 4, false},
        StorePathCase{"nt_bm64_bn64", GemmVariant::kNT, 130, 200, 384, Config(64, 64, 8), 2, false},
        StorePathCase{"nt_bm64_bn32", GemmVariant::kNT, 130, 200, 384, Config(64, 32, 16), 2,
                      false},
        // 128x192 unclustered (cp.async scales, one buffer): TN and NN.
        StorePathCase{"tn_bn192_one_buffer", GemmVariant::kTN, 400, 392, 512, Config(128, 192, 4),
                      2, true},
        StorePathCase{"nn_tma_bn192_c2", GemmVariant::kNN, 520, 400, 1024,
                      Config(128, 192, 4, 3, 2), 4, true},
        // M-grouped: groups of 0 to 512 rows, so slices inside a group and across its end.
        StorePathCase{"m_grouped_bn192_c2", GemmVariant::kMGroupedNT, 0, 320, 512,
                      Config(128, 192, 4, 8, 2), 4, true, kEnds128},
        StorePathCase{"m_grouped_bm192_c2", GemmVariant::kMGroupedNT, 0, 320, 512,
                      Config(192, 128, 4, 3, 2), 2, true, kEnds192},
        // At most one tile per CTA (the default CTA count here), and a row of 1001 bf16 (2002
        // bytes, not a multiple of 16): 16-byte stores.
        StorePathCase{"nt_one_tile_per_cta", GemmVariant::kNT, 300, 392, 512,
                      Config(128, 192, 4, 8, 2), 0, false},
        StorePathCase{"nt_unaligned_rows", GemmVariant::kNT, 300, 1001, 512, Config(128, 192, 4), 2,
                      false}),
    [](const auto& info) { return std::string(info.param.name); });

// The path rule on its own (no GPU: only shapes, strides and addresses are read).
TEST(GemmCudaConfigTest, ScalesByTmaWhereConfigAndScaleTensorsAllowIt) {
  const Mix mix = StandardMixes()[0];
  std::mt19937_64 rng(1);
  HostOp op = MakeDense(GemmVariant::kNT, 256, 256, 512, mix, rng);
  GemmArgs g = op.args;
  g.a_scales.data = reinterpret_cast<void*>(uintptr_t{1} << 20);
  g.b_scales.data = reinterpret_cast<void*>(uintptr_t{1} << 21);
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(g, Config(128, 192, 4)));  // unclustered
  EXPECT_TRUE(GemmFp8LoadsScalesByTma(g, Config(128, 192, 4, 8, 2)));
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(g, Config(192, 128, 4, 8, 2)));  // built without
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(g, Config(128, 128, 5)));
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(g, Config(64, 64, 8)));
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(g, Config(128, 256, 4)));  // not a config
  GemmArgs sliced = g;  // starts one K block in: 4 bytes off 16
  sliced.a_scales.data = static_cast<char*>(g.a_scales.data) + 4;
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(sliced, Config(128, 192, 4, 8, 2)));
  GemmArgs odd = g;  // K/128 = 3 with contiguous rows of 3 floats (12 bytes)
  odd.a_scales.shape[1] = odd.a_scales.strides[0] = 3;
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(odd, Config(128, 192, 4, 8, 2)));
  odd.a_scales.strides[0] = 8;  // padded rows of 32 bytes
  EXPECT_TRUE(GemmFp8LoadsScalesByTma(odd, Config(128, 192, 4, 8, 2)));
  odd.b_scales.strides[0] = 6;  // B rows of 24 bytes
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(odd, Config(128, 192, 4, 8, 2)));
  GemmArgs tn = g;  // per-row B scales: always cp.async
  tn.variant = GemmVariant::kTN;
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(tn, Config(128, 192, 4, 8, 2)));
  GemmArgs mg = g;  // M-grouped: always cp.async
  mg.variant = GemmVariant::kMGroupedNT;
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(mg, Config(128, 192, 4, 8, 2)));
}

// The kernel's launcher refuses TMA scale loads outside what they were built and measured for
// (dense mode, 128x128 B scales, clusters of 2, the 128x192 tile), before touching the device.
// The unclustered and 192x128 cases have no TMA-scale instantiation to fall into anyway; the
// M-grouped and per-row cases would launch the 128x192 c2 one without the check.
TEST(GemmCudaConfigTest, KernelLaunchRefusesTmaScalesOutsideDenseClustersOf2) {
  CUtensorMap map{};
  auto launch = [&](const cuda_gemm::KernelParams& p, int block_m, int block_n, int cluster) {
    return cuda_gemm::LaunchGemmFp8Kernel(p, map, map, map, map, map, block_m, block_n, 4, cluster,
                                          0, 1, nullptr, 0, nullptr);
  };
  cuda_gemm::KernelParams p;
  p.scale_tma = 1;
  EXPECT_EQ(launch(p, 128, 192, 1), cudaErrorInvalidValue);  // unclustered
  EXPECT_EQ(launch(p, 192, 128, 2), cudaErrorInvalidValue);  // no TMA-scale build of 192x128
  cuda_gemm::KernelParams mg = p;
  mg.mode = cuda_gemm::KernelMode::kMGrouped;
  EXPECT_EQ(launch(mg, 128, 192, 2), cudaErrorInvalidValue);
  cuda_gemm::KernelParams tn = p;
  tn.b_scale_per_row = 1;
  EXPECT_EQ(launch(tn, 128, 192, 2), cudaErrorInvalidValue);
}

// The same for the epilogue's TMA stores: dense or M-grouped, bf16 output, no accumulate, a tile
// 128 or 192 wide (an f32 or accumulating epilogue would read the bf16 buffers wrongly or
// overwrite D's old values; K-grouped's D has a group dimension the 2D map does not have).
TEST(GemmCudaConfigTest, KernelLaunchRefusesTmaStoresOutsideBf16Writes) {
  CUtensorMap map{};
  auto launch = [&](const cuda_gemm::KernelParams& p) {
    return cuda_gemm::LaunchGemmFp8Kernel(p, map, map, map, map, map, 128, 192, 4, 1, 0, 1, nullptr,
                                          0, nullptr);
  };
  cuda_gemm::KernelParams p;
  p.d_tma = 1;
  cuda_gemm::KernelParams f32 = p;
  f32.d_f32 = 1;
  EXPECT_EQ(launch(f32), cudaErrorInvalidValue);
  cuda_gemm::KernelParams acc = p;
  acc.accumulate = 1;
  EXPECT_EQ(launch(acc), cudaErrorInvalidValue);
  cuda_gemm::KernelParams kg = p;
  kg.mode = cuda_gemm::KernelMode::kKGrouped;
  EXPECT_EQ(launch(kg), cudaErrorInvalidValue);
  // A 64-wide tile is built without the path.
  EXPECT_EQ(cuda_gemm::LaunchGemmFp8Kernel(p, map, map, map, map, map, 128, 64, 8, 1, 0, 1, nullptr,
                                           0, nullptr),
            cudaErrorInvalidValue);
}

TEST(GemmCudaTest, NnIsSupportedForE4m3fnOnly) {
  GemmArgs g;
  g.variant = GemmVariant::kNN;
  g.a.dtype = g.b.dtype = DType::kE4M3FN;
  EXPECT_TRUE(CudaSupportsGemmFp8(g).ok());
  g.b.dtype = DType::kE5M2;
  EXPECT_EQ(CudaSupportsGemmFp8(g).code(), absl::StatusCode::kUnimplemented);
}

TEST(GemmCudaTest, NnWithUnalignedWeightRowsIsInvalidArgument) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  std::mt19937_64 rng(FreshSeed());
  HostOp op = MakeDense(GemmVariant::kNN, 128, 200, 256, StandardMixes()[0], rng);  // stride 200
  std::vector<std::unique_ptr<DeviceTensor>> dev;
  for (const HostTensor& h : op.tensors) dev.push_back(std::make_unique<DeviceTensor>(h));
  GemmArgs g = op.args;
  g.a = dev[0]->t;
  g.a_scales = dev[1]->t;
  g.b = dev[2]->t;
  g.b_scales = dev[3]->t;
  g.d = dev[4]->t;
  ASSERT_TRUE(Validate(Op(g)).ok());
  absl::Status s = LaunchGemmFp8(g, GemmConfig(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("b.strides[0]=200"), std::string::npos) << s;
  g.b.data = static_cast<char*>(g.b.data) + 8;
  g.b.strides[0] = 208;
  g.b.shape[1] = 192;
  s = LaunchGemmFp8(g, GemmConfig(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("b starts at an address"), std::string::npos) << s;
}

// Through Backend::Run: NN takes bᵀ from the stream's scratch, which grows from one op to the
// next (a larger N·R) and is reused by a smaller one after it.
TEST(GemmCudaTest, NnThroughTheCudaBackendMatchesCpuBackend) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  std::unique_ptr<Backend> gpu = CreateCudaBackend(0);
  ASSERT_NE(gpu, nullptr);
  auto stream = gpu->CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const GpuRun run = [&](const GemmArgs& args) {
    const absl::Status ran = RunOp(*gpu, Op(args), **stream, nullptr);
    if (!ran.ok()) return ran;
    return gpu->Synchronize(**stream);
  };
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape& shape : {Shape{200, 256, 256}, Shape{384, 1040, 1024}, Shape{1, 64, 128}}) {
    for (const Mix& mix : GpuMixes()) {
      const uint64_t seed = FreshSeed();
      SCOPED_TRACE(testing::Message() << shape.m << "x" << shape.n << "x" << shape.k << " "
                                      << mix.name << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeDense(GemmVariant::kNN, shape.m, shape.n, shape.k, mix, rng);
      CheckAgainstCpu(op, run);
    }
  }
}

// The transpose by itself: every byte and scale lands exactly, for full and ragged tiles,
// strided sources, and sources narrower than one 16-byte chunk.
TEST(TransposeFp8Test, CopiesEveryByteAndScaleExactly) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  struct Shape {
    int64_t rows, cols, stride;
  };
  for (const Shape& c :
       {Shape{128, 128, 128}, Shape{384, 200, 208}, Shape{128, 1, 16}, Shape{256, 17, 32},
        Shape{1024, 1000, 1008}, Shape{256, 4112, 4112}, Shape{640, 130, 256}}) {
    SCOPED_TRACE(testing::Message() << c.rows << "x" << c.cols << " stride " << c.stride);
    std::mt19937_64 rng(FreshSeed());
    const int64_t rb = c.rows / 128, cb = (c.cols + 127) / 128, scale_stride = cb + 3;
    std::vector<uint8_t> src(c.rows * c.stride);
    for (uint8_t& v : src) v = static_cast<uint8_t>(rng());
    std::vector<float> scales(rb * scale_stride);
    for (float& v : scales) v = static_cast<float>(rng() % 100000) * 0.25f;
    uint8_t *d_src = nullptr, *d_dst = nullptr;
    float *d_scales = nullptr, *d_scales_t = nullptr;
    ASSERT_EQ(cudaMalloc(&d_src, src.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_dst, c.cols * c.rows), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_scales, scales.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_scales_t, cb * rb * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_src, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_scales, scales.data(), scales.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemset(d_dst, 0xA5, c.cols * c.rows), cudaSuccess);
    cuda::TransposeFp8Params p;
    p.src = d_src;
    p.src_stride = c.stride;
    p.rows = c.rows;
    p.cols = c.cols;
    p.dst = d_dst;
    p.src_scales = d_scales;
    p.src_scales_stride = scale_stride;
    p.dst_scales = d_scales_t;
    ASSERT_EQ(cuda::LaunchTransposeFp8(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> dst(c.cols * c.rows);
    std::vector<float> scales_t(cb * rb);
    ASSERT_EQ(cudaMemcpy(dst.data(), d_dst, dst.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(scales_t.data(), d_scales_t, scales_t.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    int64_t wrong = 0;
    std::string first;
    for (int64_t j = 0; j < c.cols; ++j) {
      for (int64_t i = 0; i < c.rows; ++i) {
        if (dst[j * c.rows + i] != src[i * c.stride + j] && wrong++ == 0) {
          first = absl::StrCat("dst(", j, ", ", i, ")=", dst[j * c.rows + i], " src(", i, ", ", j,
                               ")=", src[i * c.stride + j]);
        }
      }
    }
    EXPECT_EQ(wrong, 0) << first;
    for (int64_t j = 0; j < cb; ++j) {
      for (int64_t i = 0; i < rb; ++i) {
        EXPECT_EQ(scales_t[j * rb + i], scales[i * scale_stride + j]) << "scale " << j << "," << i;
      }
    }
    cudaFree(d_src);
    cudaFree(d_dst);
    cudaFree(d_scales);
    cudaFree(d_scales_t);
  }
}

TEST(TransposeFp8Test, RefusesWhatItCannotCopy) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  uint8_t* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 1 << 20), cudaSuccess);
  cuda::TransposeFp8Params p;
  p.src = buf;
  p.src_stride = 256;
  p.rows = 256;
  p.cols = 256;
  p.dst = buf + (1 << 19);
  EXPECT_EQ(cuda::LaunchTransposeFp8(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cuda::TransposeFp8Params bad = p;
  bad.rows = 200;  // not a multiple of 128
  EXPECT_EQ(cuda::LaunchTransposeFp8(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.src_stride = 264;  // not a multiple of 16
  EXPECT_EQ(cuda::LaunchTransposeFp8(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.src = buf + 8;
  EXPECT_EQ(cuda::LaunchTransposeFp8(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.src_scales = reinterpret_cast<const float*>(buf);  // without dst_scales
  EXPECT_EQ(cuda::LaunchTransposeFp8(bad, nullptr), cudaErrorInvalidValue);
  cudaFree(buf);
}

// NN is the NT kernel on a transposed W: at the dgrad size of the issue (dX 8192x7168 from
// dY 8192x2048 and W 2048x7168) its output equals NT's on a host-transposed W bit for bit, with
// the same config. Also prints the time of each (median of 20 runs, CUDA events) as JSON.
// The split tail: the last wave's tiles split along K into slices whose fp32 partials meet in
// the scratch (same budget: only the fp32 summation order of those tiles changes). Each case
// states its split on 132 SMs (an H100/H200; other SM counts split differently, still checked):
// all tiles split when there are few; with num_ctas (p) a full wave plus a split tail; clusters
// of 2; 128x128, 128x64 and 64x64 tiles; TN (per-row B scales) and NN (through NT).
class GemmCudaSplitTailTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(GemmCudaSplitTailTest, MatchesCpuBackendWithinBudget) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const DenseCase& c = GetParam();
  for (const Mix& mix : GpuMixes()) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << mix.name << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = MakeDense(c.variant, c.m, c.n, c.k, mix, rng, c.b_stride);
    CheckAgainstCpu(op, WithScratch(c.config));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmCudaSplitTailTest,
    ::testing::Values(
        // 18 tiles of 128x192, 16 K blocks: 4 slices each (ragged M and N).
        DenseCase{GemmVariant::kNT, 300, 1000, 2048, Config(128, 192, 4)},
        // 8 CTAs, 18 tiles: two full waves, then 2 tiles in 4 slices.
        DenseCase{GemmVariant::kNT, 300, 1000, 2048, WithCtas(Config(128, 192, 4, 2), 8)},
        // Clusters of 2, 4 clusters, 30 pairs: 2 pairs in 2 slices; odd M tile count.
        DenseCase{GemmVariant::kNT, 1100, 1000, 1024, WithCtas(Config(128, 192, 4, 3, 2), 8)},
        // 128x128: 12 CTAs, 16 tiles: 4 tiles in 3 slices of 5-6 blocks (uneven).
        DenseCase{GemmVariant::kNT, 400, 392, 2176, WithCtas(Config(128, 128, 6), 12)},
        DenseCase{GemmVariant::kTN, 400, 392, 1024, WithCtas(Config(128, 128, 6), 12)},
        DenseCase{GemmVariant::kTN, 400, 392, 1024, Config(128, 192, 4)},
        // 64x64, 64 tiles: 2 slices each; 128x64 in clusters of 2. 64x32 on 8 CTAs, 25 tiles:
        // three full waves, then one tile in slices.
        DenseCase{GemmVariant::kNT, 64, 4096, 1024, Config(64, 64, 8)},
        DenseCase{GemmVariant::kNT, 60, 800, 2048, WithCtas(Config(64, 32, 16), 8)},
        DenseCase{GemmVariant::kNT, 130, 1000, 1024, Config(128, 64, 8, 8, 2)},
        DenseCase{GemmVariant::kNN, 520, 400, 1024, Config(128, 192, 4, 3)},
        // 192x128: 16 tiles, 16 K blocks: 4 slices each. 8 CTAs in clusters of 2: 5 M tiles
        // (odd: the last pair's second tile lies wholly past M) x 10 N tiles = 30 pairs on 4
        // clusters, 2 pairs in 2 slices. TN: 12 tiles in 2 slices.
        DenseCase{GemmVariant::kNT, 300, 1000, 2048, Config(192, 128, 4)},
        DenseCase{GemmVariant::kNT, 900, 1200, 1024, WithCtas(Config(192, 128, 4, 3, 2), 8)},
        DenseCase{GemmVariant::kTN, 400, 392, 1024, Config(192, 128, 4)},
        // Slices starting mid-box of the TMA scale loads (128x192 in clusters of 2): 4 M x 3 N
        // tiles = 6 pairs on 4 clusters, the last 2 pairs in 2 slices of 10 of the 20 K blocks
        // (the second starts at block 10, column 2 of its box); NT and NN. The same unclustered
        // (cp.async): 12 tiles on 9 CTAs, 3 tiles in 3 slices.
        DenseCase{GemmVariant::kNT, 400, 392, 2560, WithCtas(Config(128, 192, 4, 8, 2), 8)},
        DenseCase{GemmVariant::kNN, 400, 400, 2560, WithCtas(Config(128, 192, 4, 8, 2), 8)},
        DenseCase{GemmVariant::kNT, 400, 392, 2048, WithCtas(Config(128, 192, 4), 9)}),
    [](const auto& info) {
      const DenseCase& c = info.param;
      return std::string(GemmVariantName(c.variant)) + "_" + std::to_string(c.m) + "x" +
             std::to_string(c.n) + "x" + std::to_string(c.k) + "_bm" +
             std::to_string(c.config.block_m) + "_c" + std::to_string(c.config.cluster) + "_bn" +
             std::to_string(c.config.block_n) + "_p" + std::to_string(c.config.num_ctas);
    });

// The split is fixed by shape, config and CTA count: two launches give the same bits.
TEST(GemmCudaTest, SplitTailIsDeterministic) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  std::mt19937_64 rng(FreshSeed());
  HostOp op = MakeDense(GemmVariant::kNT, 300, 1000, 2048, GpuMixes()[0], rng);
  std::vector<std::unique_ptr<DeviceTensor>> dev;
  for (const HostTensor& h : op.tensors) dev.push_back(std::make_unique<DeviceTensor>(h));
  GemmArgs args = op.args;
  args.a = dev[0]->t;
  args.a_scales = dev[1]->t;
  args.b = dev[2]->t;
  args.b_scales = dev[3]->t;
  args.d = dev[4]->t;
  HostTensor first = op.tensors[4], second = op.tensors[4];
  ASSERT_TRUE(WithScratch(Config(128, 192, 4))(args).ok());
  dev[4]->CopyTo(first);
  ASSERT_EQ(cudaMemset(args.d.data, 0, first.t.numel() * DTypeSize(first.t.dtype)), cudaSuccess);
  ASSERT_TRUE(WithScratch(Config(128, 192, 4))(args).ok());
  dev[4]->CopyTo(second);
  EXPECT_EQ(std::memcmp(first.t.data, second.t.data, first.t.numel() * DTypeSize(first.t.dtype)),
            0);
}

TEST(GemmCudaTest, NnEqualsNtOnTransposedWeightBitForBit) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const int64_t m = 8192, n = 7168, r = 2048, rb = r / 128, nb = n / 128;
  std::mt19937_64 rng(FreshSeed());
  auto codes = [&rng](HostTensor& t) {  // every finite code, fast (no NaN: 0x7F/0xFF -> 0x7E/0xFE)
    for (int64_t i = 0; i < t.t.numel(); ++i) {
      uint8_t c = static_cast<uint8_t>(rng());
      if ((c & 0x7F) == 0x7F) c ^= 1;
      t.bytes()[i] = c;
    }
  };
  HostTensor a = MakeHost(DType::kE4M3FN, {m, r}), w = MakeHost(DType::kE4M3FN, {r, n});
  HostTensor sa = MakeHost(DType::kF32, {m, rb}), sw = MakeHost(DType::kF32, {rb, nb});
  codes(a);
  codes(w);
  FillScales(sa, -10, rng);
  FillScales(sw, -10, rng);
  HostTensor wt = TransposedBytes(w, r);
  HostTensor swt = MakeHost(DType::kF32, {nb, rb});
  for (int64_t i = 0; i < rb; ++i) {
    for (int64_t j = 0; j < nb; ++j) swt.data<float>()[j * rb + i] = sw.data<float>()[i * nb + j];
  }
  HostTensor d = MakeHost(DType::kBF16, {m, n});
  DeviceTensor da(a), dsa(sa), dw(w), dsw(sw), dwt(wt), dswt(swt), dnn(d), dnt(d);
  GemmArgs nn;
  nn.variant = GemmVariant::kNN;
  nn.a = da.t;
  nn.a_scales = dsa.t;
  nn.b = dw.t;
  nn.b_scales = dsw.t;
  nn.d = dnn.t;
  ASSERT_TRUE(Validate(Op(nn)).ok());
  GemmArgs nt = nn;
  nt.variant = GemmVariant::kNT;
  nt.b = dwt.t;
  nt.b_scales = dswt.t;
  nt.d = dnt.t;
  ASSERT_TRUE(Validate(Op(nt)).ok());
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const GemmConfig config = DefaultGemmConfig(NnAsNtArgs(nn, nullptr, nullptr), prop);
  // Both with scratch: the same split tail (if any) on both sides.
  void* scratch = nullptr;
  void* nt_scratch = nullptr;
  ASSERT_EQ(cudaMalloc(&scratch, GemmFp8ScratchBytes(nn)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&nt_scratch, GemmFp8ScratchBytes(nt)), cudaSuccess);

  ASSERT_TRUE(LaunchGemmFp8(nn, config, nullptr, scratch).ok());
  ASSERT_TRUE(LaunchGemmFp8(nt, config, nullptr, nt_scratch).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  HostTensor got_nn = d, got_nt = d;
  dnn.CopyTo(got_nn);
  dnt.CopyTo(got_nt);
  EXPECT_EQ(std::memcmp(got_nn.t.data, got_nt.t.data, m * n * 2), 0)
      << "nn and nt on the transposed weight differ";
  int64_t nonzero = 0;
  for (int64_t i = 0; i < m * n; i += 997) nonzero += got_nt.data<uint16_t>()[i] != 0;
  EXPECT_GT(nonzero, 0) << "the output is all zero: the comparison proves nothing";

  cuda::TransposeFp8Params tp;
  tp.src = dw.t.as<const uint8_t>();
  tp.src_stride = n;
  tp.rows = r;
  tp.cols = n;
  tp.dst = static_cast<uint8_t*>(scratch);
  tp.src_scales = dsw.t.as<const float>();
  tp.src_scales_stride = nb;
  tp.dst_scales = reinterpret_cast<float*>(static_cast<char*>(scratch) + GemmFp8ScratchBytes(nn) -
                                           nb * rb * sizeof(float));
  auto time_us = [](const std::function<void()>& launch) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    for (int i = 0; i < 3; ++i) launch();
    std::vector<float> us;
    for (int i = 0; i < 20; ++i) {
      cudaEventRecord(start, nullptr);
      launch();
      cudaEventRecord(stop, nullptr);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      us.push_back(ms * 1000);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  const double nt_us = time_us([&] { (void)LaunchGemmFp8(nt, config, nullptr, nt_scratch); });
  const double nn_us = time_us([&] { (void)LaunchGemmFp8(nn, config, nullptr, scratch); });
  const double nn_alloc_us = time_us([&] { (void)LaunchGemmFp8(nn, config, nullptr); });
  const double tr_us = time_us([&] { (void)cuda::LaunchTransposeFp8(tp, nullptr); });
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const double flops = 2.0 * m * n * r;
  std::printf(
      "{\"name\":\"nn_vs_nt\",\"device\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,"
      "\"config\":\"%s\",\"nt_us\":%.1f,\"nt_tflops\":%.0f,\"nn_us\":%.1f,"
      "\"nn_tflops\":%.0f,\"nn_own_scratch_us\":%.1f,\"transpose_us\":%.1f,"
      "\"transpose_gbps\":%.0f}\n",
      prop.name, static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(r),
      GemmConfigToString(config).c_str(), nt_us, flops / nt_us * 1e-6, nn_us, flops / nn_us * 1e-6,
      nn_alloc_us, tr_us, 2.0 * n * r / tr_us * 1e-3);
  cudaFree(scratch);
  cudaFree(nt_scratch);
}

TEST(GemmCudaTest, E5m2OperandIsUnimplemented) {
  GemmArgs g;
  g.variant = GemmVariant::kNT;
  g.a.dtype = DType::kE4M3FN;
  g.b.dtype = DType::kE5M2;
  EXPECT_EQ(CudaSupportsGemmFp8(g).code(), absl::StatusCode::kUnimplemented);
}

TEST(GemmCudaTest, MisalignedOperandIsInvalidArgument) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  std::mt19937_64 rng(FreshSeed());
  HostOp op = MakeDense(GemmVariant::kNT, 128, 128, 128, StandardMixes()[0], rng);
  DeviceTensor a(op.tensors[0], /*pad_bytes=*/8);
  std::vector<std::unique_ptr<DeviceTensor>> rest;
  for (int i = 1; i < 5; ++i) rest.push_back(std::make_unique<DeviceTensor>(op.tensors[i]));
  GemmArgs g = op.args;
  g.a = a.t;
  g.a_scales = rest[0]->t;
  g.b = rest[1]->t;
  g.b_scales = rest[2]->t;
  g.d = rest[3]->t;
  const absl::Status s = LaunchGemmFp8(g, GemmConfig(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("a starts at an address"), std::string::npos) << s;
}

TEST(GemmCudaConfigTest, StringRoundTripsAndBadFieldsAreNamed) {
  GemmConfig c;
  c.block_n = 64;
  c.stages = 8;
  c.raster_group = 4;
  c.num_ctas = 100;
  const std::string text = GemmConfigToString(c);
  EXPECT_EQ(text, "bm128.bn64.s8.c1.r4.p100");
  auto parsed = ParseGemmConfig(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(*parsed == c);
  EXPECT_EQ(ParseGemmConfig("bm128.bn96.s6.c1.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(ParseGemmConfig("bm128.bn96.s6.c1.r8.p0").status().message())
                .find("config.block_n=96"),
            std::string::npos);
  EXPECT_EQ(ParseGemmConfig("bm128.bn128").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGemmConfig("bm192.bn128.s5.c1.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseGemmConfig("bm64.bn64.s8.c1.r8.p0").ok());
  EXPECT_EQ(ParseGemmConfig("bm64.bn128.s6.c1.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGemmConfig("bm64.bn64.s8.c2.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGemmConfig("bm128.bn64.s6.c2.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseGemmConfig("bm128.bn128.s6.c2.r8.p0").ok());
  EXPECT_EQ(ParseGemmConfig("bm128.bn128.s6.c4.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseGemmConfig("bm128.bn192.s4.c1.r8.p0").ok());
  EXPECT_EQ(ParseGemmConfig("bm128.bn192.s5.c1.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseGemmConfig("bm128.bn192.s4.c2.r8.p0").ok());
  EXPECT_EQ(ParseGemmConfig("bm128.bn160.s5.c1.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGemmConfig("bm64.bn192.s4.c1.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseGemmConfig("bm192.bn128.s4.c1.r8.p0").ok());
  EXPECT_TRUE(ParseGemmConfig("bm192.bn128.s4.c2.r8.p0").ok());
  EXPECT_EQ(ParseGemmConfig("bm192.bn192.s4.c1.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(ParseGemmConfig("bm192.bn64.s4.c1.r8.p0").status().message())
                .find("config.block_n=64"),
            std::string::npos);
  EXPECT_EQ(ParseGemmConfig("bm256.bn128.s4.c1.r8.p0").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- 1x128 scales in both layouts ------------------------------------------------------------

// A K-block-major copy of the row-major (rows, blocks) scales `rm`, named as the (rows, blocks)
// view with strides (1, ld); the padding past each K block's rows is -7 (a scale no one draws).
HostTensor KBlockMajorCopy(const HostTensor& rm, int64_t ld) {
  const int64_t rows = rm.t.shape[0], blocks = rm.t.shape[1];
  HostTensor out = MakeHost(DType::kF32, {blocks, ld});
  for (int64_t i = 0; i < blocks * ld; ++i) out.data<float>()[i] = -7.0f;
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

// The path rule for K-block-major a_scales (no GPU: only shapes, strides and addresses are
// read): the TMA-scale tile takes them where each K block's scales start 16-byte aligned, or
// where their row-major copy (contiguous rows of K/128 floats) would.
TEST(GemmCudaConfigTest, KBlockMajorActivationScalesByTmaWhereTheirBlocksAlign) {
  const Mix mix = StandardMixes()[0];
  std::mt19937_64 rng(1);
  HostOp op = MakeDense(GemmVariant::kNT, 256, 256, 384, mix, rng);  // K/128 = 3
  GemmArgs g = op.args;
  g.a_scales.data = reinterpret_cast<void*>(uintptr_t{1} << 20);
  g.b_scales.data = reinterpret_cast<void*>(uintptr_t{1} << 21);
  g.b_scales.strides[0] = 4;  // B rows of 16 bytes
  const GemmConfig tma = Config(128, 192, 4, 8, 2);
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(g, tma));  // row-major rows of 12 bytes
  g.a_scales.strides[0] = 1;
  g.a_scales.strides[1] = 256;  // K-block-major, K blocks 1 KB apart
  EXPECT_TRUE(GemmFp8LoadsScalesByTma(g, tma));
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(g, Config(128, 192, 4)));  // unclustered
  g.a_scales.strides[1] = 257;  // K blocks not 16-byte aligned, and its copy's rows neither
  EXPECT_FALSE(GemmFp8LoadsScalesByTma(g, tma));
  HostOp four = MakeDense(GemmVariant::kNT, 255, 256, 512, mix, rng);  // K/128 = 4
  GemmArgs h = four.args;
  h.a_scales.data = reinterpret_cast<void*>(uintptr_t{1} << 20);
  h.b_scales.data = reinterpret_cast<void*>(uintptr_t{1} << 21);
  h.a_scales.strides[0] = 1;
  h.a_scales.strides[1] = 255;  // K blocks unaligned; the copy's rows are 16 bytes
  EXPECT_TRUE(GemmFp8LoadsScalesByTma(h, tma));
}

// One case of the layout comparison: the variant's operands with row-major scales, run once with
// them and once with K-block-major copies (K-block stride rows + pad), on the same config.
struct LayoutCase {
  const char* name;
  GemmVariant variant;
  int64_t m, n, k;
  std::vector<int64_t> ends;  // grouped variants
  GemmConfig config;
  int64_t pad;
  bool scratch;     // the backend's way (scratch given, split tail on) or the launch's own
  bool tma_scales;  // GemmFp8LoadsScalesByTma holds with the K-block-major scales
};
void PrintTo(const LayoutCase& c, std::ostream* os) { *os << c.name; }

class GemmCudaScaleLayoutTest : public ::testing::TestWithParam<LayoutCase> {};

// Runs `args` (host tensors) on the GPU and returns D's bytes.
std::vector<uint8_t> RunOnGpu(const GemmArgs& args, const std::vector<const HostTensor*>& host,
                              const GpuRun& run) {
  std::vector<std::unique_ptr<DeviceTensor>> dev;
  for (const HostTensor* h : host) dev.push_back(std::make_unique<DeviceTensor>(*h));
  GemmArgs g = args;
  g.a = dev[0]->t;
  g.a_scales = dev[1]->t;
  g.b = dev[2]->t;
  g.b_scales = dev[3]->t;
  g.d = dev[4]->t;
  if (dev.size() > 5) g.group_ends = dev[5]->t;
  const size_t d_bytes = host[4]->t.numel() * DTypeSize(host[4]->t.dtype);
  EXPECT_EQ(cudaMemset(g.d.data, 0xFF, d_bytes), cudaSuccess);  // NaN: unwritten shows
  EXPECT_TRUE(Validate(Op(g)).ok()) << Validate(Op(g)).status();
  const absl::Status ran = run(g);
  EXPECT_TRUE(ran.ok()) << ran;
  std::vector<uint8_t> out(d_bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), g.d.data, d_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

TEST_P(GemmCudaScaleLayoutTest, KBlockMajorScalesGiveTheRowMajorBits) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  const LayoutCase& c = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  Mix mix = StandardMixes()[0];
  mix.out = DType::kBF16;
  mix.accumulate = false;
  HostOp op = c.variant == GemmVariant::kMGroupedNT ? MakeMGrouped(c.ends, c.n, c.k, mix, rng)
              : c.variant == GemmVariant::kKGroupedTN
                  ? MakeKGrouped(c.ends, c.m, c.n, mix, rng)
                  : MakeDense(c.variant, c.m, c.n, c.k, mix, rng);
  const bool per_row_b = c.variant == GemmVariant::kTN || c.variant == GemmVariant::kKGroupedTN;
  const HostTensor sa = KBlockMajorCopy(op.tensors[1], op.tensors[1].t.shape[0] + c.pad);
  const HostTensor sb =
      per_row_b ? KBlockMajorCopy(op.tensors[3], op.tensors[3].t.shape[0] + c.pad) : op.tensors[3];
  std::vector<const HostTensor*> rm, kbm;
  for (const HostTensor& t : op.tensors) rm.push_back(&t);
  kbm = rm;
  kbm[1] = &sa;
  kbm[3] = &sb;
  GemmArgs k_args = op.args;
  k_args.a_scales = sa.t;
  k_args.b_scales = sb.t;
  // The path rule, on the device addresses a launch sees (cudaMalloc'd: 256-byte aligned).
  const DeviceTensor dsa(sa), dsb(sb);
  GemmArgs path = k_args;
  path.a_scales = dsa.t;
  path.b_scales = dsb.t;
  EXPECT_EQ(GemmFp8LoadsScalesByTma(path, c.config), c.tma_scales);

  const GpuRun run = c.scratch ? WithScratch(c.config) : WithConfig(c.config);
  const std::vector<uint8_t> want = RunOnGpu(op.args, rm, run);
  const std::vector<uint8_t> got = RunOnGpu(k_args, kbm, run);
  // Every element written (no NaN pattern left), and the same bits.
  const bool f32 = op.tensors[4].t.dtype == DType::kF32;
  for (size_t i = 0; i < want.size(); i += f32 ? 4 : 2) {
    ASSERT_FALSE(want[i + (f32 ? 3 : 1)] == 0xFF && want[i] == 0xFF) << "element not written";
  }
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size()));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, GemmCudaScaleLayoutTest,
    ::testing::Values(
        // The TMA-scale tile reading K-block-major scales as they are (M a multiple of 4), and
        // its split tail; then with a K-block stride off 16 bytes, through the row-major copy.
        LayoutCase{"nt_tma_native",
                   GemmVariant::kNT,
                   1024,
                   1536,
                   2048,
                   {},
                   Config(128, 192, 4, 8, 2),
                   0,
                   true,
                   true},
        LayoutCase{"nt_tma_native_padded_split",
                   GemmVariant::kNT,
                   700,
                   512,
                   1024,
                   {},
                   Config(128, 192, 4, 8, 2),
                   4,
                   true,
                   true},
        LayoutCase{"nt_tma_copy",
                   GemmVariant::kNT,
                   1022,
                   1536,
                   2048,
                   {},
                   Config(128, 192, 4, 8, 2),
                   1,
                   true,
                   true},
        LayoutCase{"nt_cp_async_copy",
                   GemmVariant::kNT,
                   300,
                   200,
                   384,
                   {},
                   Config(128, 128, 4, 1),
                   0,
                   false,
                   false},
        LayoutCase{
            "nt_small_m", GemmVariant::kNT, 48, 4096, 1024, {}, Config(64, 32, 16), 3, true, false},
        LayoutCase{
            "nn", GemmVariant::kNN, 256, 320, 512, {}, Config(128, 192, 4, 8, 2), 0, true, true},
        LayoutCase{
            "tn", GemmVariant::kTN, 400, 136, 512, {}, Config(128, 128, 6, 8, 2), 2, true, false},
        LayoutCase{"tn_no_scratch",
                   GemmVariant::kTN,
                   256,
                   320,
                   1024,
                   {},
                   Config(128, 192, 4),
                   0,
                   false,
                   false},
        LayoutCase{"m_grouped",
                   GemmVariant::kMGroupedNT,
                   0,
                   320,
                   512,
                   {37, 37, 300, 1024},
                   Config(128, 192, 4, 8, 2),
                   5,
                   true,
                   false},
        LayoutCase{"k_grouped",
                   GemmVariant::kKGroupedTN,
                   200,
                   136,
                   0,
                   {128, 128, 512, 1024},
                   Config(128, 128, 6),
                   0,
                   true,
                   false}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- TN through cuBLASLt (cublaslt_gemm.h) ----------------------------------------------------
// The family against the CPU backend within the same budget, every GPU mix (bf16 and f32 output,
// accumulation), strided operands and output, 1x128 scales row-major, K-block-major as cuBLASLt
// reads them, and K-block-major with padded blocks; with the caller's scratch and without.
// Skipped where libcublasLt cannot be loaded. cuBLASLt must offer bf16 output; where it has no
// algorithm for an f32 D the test says so and checks that the backend's launch falls back to the
// kernel.

bool HaveCublasLt() { return cuda_gemm::LoadCublasLt().ok(); }

// `t` (rows, cols) contiguous, re-laid with rows `stride` elements apart; the padding holds 0xCD
// bytes, which a kernel that read them would add in.
HostTensor WithRowStride(const HostTensor& t, int64_t stride) {
  const int64_t rows = t.t.shape[0], cols = t.t.shape[1];
  const size_t esize = DTypeSize(t.t.dtype);
  HostTensor out = MakeHost(t.t.dtype, {rows, stride});
  std::memset(out.t.data, 0xCD, rows * stride * esize);
  const uint8_t* src = static_cast<const uint8_t*>(t.t.data);
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(out.bytes() + i * stride * esize, src + i * cols * esize, cols * esize);
  }
  out.t.shape[1] = cols;
  out.t.strides[0] = stride;
  return out;
}

enum class LtScales { kRowMajor, kKBlockMajor, kKBlockMajorPadded };

struct LtCase {
  const char* name;
  int64_t m, n, k;
  int64_t a_pad = 0, b_pad = 0, d_pad = 0;  // elements past each row (a, b: 16-byte multiples)
  LtScales scales = LtScales::kRowMajor;
  bool scratch = true;  // the backend's way (scratch given) or the launch's own
};
void PrintTo(const LtCase& c, std::ostream* os) { *os << c.name; }

// Applies the case's strides and scale layouts to a dense TN op and rebinds it.
void Relayout(HostOp& op, const LtCase& c) {
  std::vector<HostTensor>& t = op.tensors;
  if (c.a_pad > 0) t[0] = WithRowStride(t[0], c.k + c.a_pad);
  if (c.b_pad > 0) t[2] = WithRowStride(t[2], c.k + c.b_pad);
  if (c.d_pad > 0) t[4] = WithRowStride(t[4], c.n + c.d_pad);
  if (c.scales != LtScales::kRowMajor) {
    const int64_t pad = c.scales == LtScales::kKBlockMajorPadded ? 4 : 0;
    t[1] = KBlockMajorCopy(t[1], c.m + pad);
    t[3] = KBlockMajorCopy(t[3], c.n + pad);
  }
  op.args = Bind(op.args, t);
}

// Runs the family with `algo` (scratch per the case), strictly. Where cuBLASLt has no algorithm
// for an f32 D (UNIMPLEMENTED), runs the backend's launch with the cuBLASLt config instead, which
// must fall back to the kernel, and reports it once in `f32_refused`.
GpuRun WithCublasLt(int algo, bool with_scratch, bool* f32_refused) {
  return [=](const GemmArgs& args) {
    void* scratch = nullptr;
    const uint64_t bytes = std::max(CublasLtGemmScratchBytes(args), GemmFp8ScratchBytes(args));
    if (with_scratch) {
      if (cudaMalloc(&scratch, bytes) != cudaSuccess) return absl::InternalError("cudaMalloc");
      cudaMemset(scratch, 0xAB, bytes);
    }
    absl::Status status = LaunchCublasLtGemm(args, CublasLtGemmConfig{algo}, nullptr, scratch);
    if (status.code() == absl::StatusCode::kUnimplemented && args.d.dtype == DType::kF32 &&
        absl::StrContains(status.message(), "has no block-scaled FP8 algorithm")) {
      if (!*f32_refused) std::printf("cublaslt: %s\n", std::string(status.message()).c_str());
      *f32_refused = true;
      const uint64_t before = GemmConfigFallbacks();
      int sms = 0;
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
      status = LaunchGemmWithFallback(args, CublasLtGemmConfig{algo}, sms, nullptr, scratch);
      if (status.ok() && GemmConfigFallbacks() != before) {
        status = absl::InternalError("a cuBLASLt config the family declined counted a fallback");
      }
    }
    const cudaError_t err = cudaDeviceSynchronize();
    if (scratch != nullptr) cudaFree(scratch);
    if (status.ok() && err != cudaSuccess) status = absl::InternalError(cudaGetErrorString(err));
    return status;
  };
}

class GemmCudaCublasLtTest : public ::testing::TestWithParam<LtCase> {};

TEST_P(GemmCudaCublasLtTest, MatchesCpuBackendWithinBudget) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  if (!HaveCublasLt()) GTEST_SKIP() << cuda_gemm::LoadCublasLt().status();
  const LtCase& c = GetParam();
  bool f32_refused = false;
  for (const Mix& mix : GpuMixes()) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << mix.name << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = MakeDense(GemmVariant::kTN, c.m, c.n, c.k, mix, rng);
    Relayout(op, c);
    const bool bf16 = mix.out == DType::kBF16;
    bool refused = false;
    CheckAgainstCpu(op, WithCublasLt(0, c.scratch, &refused));
    EXPECT_FALSE(bf16 && refused) << "cuBLASLt must take a bf16 D";
    f32_refused |= refused;
  }
  if (f32_refused) RecordProperty("cublaslt_f32_d", "no algorithm: the kernel runs");
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GemmCudaCublasLtTest,
    ::testing::Values(
        LtCase{"row_major_scales", 256, 384, 512},
        LtCase{"k_block_major_scales_as_read", 512, 256, 1024, 0, 0, 0, LtScales::kKBlockMajor,
               false},
        LtCase{"k_block_major_padded_scales", 384, 640, 384, 0, 0, 0, LtScales::kKBlockMajorPadded},
        LtCase{"strided_operands_and_output", 256, 320, 512, 32, 16, 8},
        LtCase{"strided_one_block", 128, 144, 128, 16, 48, 24, LtScales::kKBlockMajor},
        LtCase{"strided_no_scratch", 640, 128, 768, 16, 0, 8, LtScales::kKBlockMajorPadded, false}),
    [](const auto& info) { return std::string(info.param.name); });

// Every algorithm cuBLASLt ranks for a problem computes the same product (the tuner's
// candidates).
TEST(GemmCudaCublasLtTest, EveryRankedAlgorithmMatchesCpuBackend) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  if (!HaveCublasLt()) GTEST_SKIP() << cuda_gemm::LoadCublasLt().status();
  Mix mix = StandardMixes()[0];
  int ran = 0;
  for (int algo = 0; algo < kCublasLtGemmAlgos; ++algo) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << "algo " << algo << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = MakeDense(GemmVariant::kTN, 512, 768, 1024, mix, rng);
    std::vector<std::unique_ptr<DeviceTensor>> dev;
    for (const HostTensor& h : op.tensors) dev.push_back(std::make_unique<DeviceTensor>(h));
    GemmArgs g = Bind(op.args, op.tensors);
    g.a = dev[0]->t;
    g.a_scales = dev[1]->t;
    g.b = dev[2]->t;
    g.b_scales = dev[3]->t;
    g.d = dev[4]->t;
    const absl::Status probe = LaunchCublasLtGemm(g, CublasLtGemmConfig{algo}, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (algo > 0 && probe.code() == absl::StatusCode::kInvalidArgument) break;  // fewer ranked
    ASSERT_TRUE(probe.ok()) << probe;
    bool refused = false;
    CheckAgainstCpu(op, WithCublasLt(algo, true, &refused));
    ++ran;
  }
  EXPECT_GE(ran, 1);
  RecordProperty("cublaslt_algorithms", ran);
}

// What the family takes, decided from shapes, strides and addresses before the library is asked
// (no GPU needed).
TEST(GemmCudaCublasLtTest, RefusesWhatItDoesNotTakeAsUnimplemented) {
  const Mix mix = StandardMixes()[0];
  std::mt19937_64 rng(3);
  HostOp tn = MakeDense(GemmVariant::kTN, 256, 384, 512, mix, rng);
  auto place = [](GemmArgs g) {  // 256-byte aligned fake device addresses
    g.a.data = reinterpret_cast<void*>(uintptr_t{1} << 20);
    g.b.data = reinterpret_cast<void*>(uintptr_t{2} << 20);
    g.d.data = reinterpret_cast<void*>(uintptr_t{3} << 20);
    return g;
  };
  auto refusal = [](const GemmArgs& g) {
    const absl::Status s = CublasLtGemmSupports(g);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    return std::string(s.message());
  };
  HostOp nt = MakeDense(GemmVariant::kNT, 256, 384, 512, mix, rng);
  EXPECT_TRUE(absl::StrContains(refusal(place(nt.args)), "variant nt (tn only)"));
  HostOp odd = MakeDense(GemmVariant::kTN, 200, 384, 512, mix, rng);
  EXPECT_TRUE(absl::StrContains(refusal(place(odd.args)), "M=200 and N=384"));
  GemmArgs g = place(tn.args);
  g.d.data = static_cast<char*>(g.d.data) + 8;
  EXPECT_TRUE(absl::StrContains(refusal(g), "16-byte aligned"));
  g = place(tn.args);
  g.a.strides[0] = 520;
  EXPECT_TRUE(absl::StrContains(refusal(g), "16-byte"));
  g = place(tn.args);
  g.b.dtype = DType::kE5M2;
  EXPECT_TRUE(absl::StrContains(refusal(g), "e4m3fn"));
  EXPECT_GE(CublasLtGemmScratchBytes(tn.args), cuda_gemm::kCublasLtWorkspaceBytes + 2 * 256);
}

#if defined(KD_HAVE_CUDA)
// Through Backend::Run with a cuBLASLt config, as the daemon's tune cache passes it: cuBLASLt's
// workspace and scale copies come from the stream's scratch; an op the family does not take (M
// not a multiple of 16, NT) runs the kernel's default without counting a fallback.
TEST(GemmCudaCublasLtTest, ThroughTheCudaBackendMatchesCpuBackend) {
  if (!HaveSm90()) GTEST_SKIP() << "no sm_90 GPU";
  std::unique_ptr<Backend> gpu = CreateCudaBackend(0);
  ASSERT_NE(gpu, nullptr);
  auto stream = gpu->CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const GpuRun run = [&](const GemmArgs& args) {
    GemmArgs g = args;
    g.config = CublasLtGemmConfig{};
    const absl::Status ran = gpu->Run(Op(g), **stream, nullptr);
    if (!ran.ok()) return ran;
    return gpu->Synchronize(**stream);
  };
  struct Shape {
    GemmVariant variant;
    int64_t m, n, k;
  };
  const uint64_t fallbacks = GemmConfigFallbacks();
  for (const Shape& shape :
       {Shape{GemmVariant::kTN, 256, 512, 1024}, Shape{GemmVariant::kTN, 1024, 256, 512},
        Shape{GemmVariant::kTN, 200, 136, 512}, Shape{GemmVariant::kNT, 256, 256, 512}}) {
    for (const Mix& mix : GpuMixes()) {
      const uint64_t seed = FreshSeed();
      SCOPED_TRACE(testing::Message()
                   << GemmVariantName(shape.variant) << " " << shape.m << "x" << shape.n << "x"
                   << shape.k << " " << mix.name << " seed " << seed);
      std::mt19937_64 rng(seed);
      HostOp op = MakeDense(shape.variant, shape.m, shape.n, shape.k, mix, rng);
      CheckAgainstCpu(op, run);
    }
  }
  EXPECT_EQ(GemmConfigFallbacks(), fallbacks);
}
#endif

// ---- The portable tile GEMM through the CUDA backend (kernels/gpu/gemm_dispatch.h): on sm_90 it
// runs for a GemmArgs carrying a TileGemmConfig, what a pinned tune-cache entry hands the backend;
// on the other devices with FP8 mma.sync (sm_89 and later) for every GEMM. Same budget as the
// wgmma kernel's (the header above): the m16n8k32 tensor-core op accumulates a 32-wide slice
// inside the hardware as wgmma does, and each 128-block is promoted in fp32 outside it.

// A device with FP8 mma.sync (sm_89 or later).
bool HaveFp8Mma() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return false;
  cudaDeviceProp prop;
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major * 10 + prop.minor >= 89;
}

// Through Backend::Run with `config` set on the op, then Synchronize.
GpuRun ThroughBackend(Backend& gpu, Stream& stream, const GemmKernelConfig& config) {
  return [&gpu, &stream, config](const GemmArgs& args) {
    GemmArgs with = args;
    with.config = config;
    const absl::Status ran = RunOp(gpu, Op(with), stream, nullptr);
    if (!ran.ok()) return ran;
    return gpu.Synchronize(stream);
  };
}

// One problem of `variant` with ragged M and N (tails in every tile dimension), several K blocks.
HostOp MakeTileCase(GemmVariant variant, const Mix& mix, std::mt19937_64& rng) {
  switch (variant) {
    case GemmVariant::kMGroupedNT:
      return MakeMGrouped({37, 37, 300, 301, 700, 1024}, 200, 512, mix, rng);
    case GemmVariant::kKGroupedTN:
      return MakeKGrouped({128, 128, 512, 1024}, 200, 136, mix, rng);
    default:
      return MakeDense(variant, 200, 264, 384, mix, rng);
  }
}

struct TileCase {
  const char* name;
  GemmVariant variant;
  TileGemmConfig config;
};

class GemmCudaBackendTileTest : public ::testing::TestWithParam<TileCase> {};

TEST_P(GemmCudaBackendTileTest, MatchesCpuBackendWithinBudget) {
  if (!HaveFp8Mma()) GTEST_SKIP() << "no GPU with FP8 mma.sync (sm_89 or later)";
  const TileCase& c = GetParam();
  std::unique_ptr<Backend> gpu = CreateCudaBackend(0);
  ASSERT_NE(gpu, nullptr);
  auto stream = gpu->CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const uint64_t fallbacks = tile_gemm::TileGemmConfigFallbacks();
  for (const Mix& mix : GpuMixes()) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << mix.name << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = MakeTileCase(c.variant, mix, rng);
    CheckAgainstCpu(op, ThroughBackend(*gpu, **stream, c.config));
  }
  // Every shape of sm_90's tile space runs as given on an H100 (sm_89 runs all but 128x128s3).
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  if (prop.major == 9) EXPECT_EQ(tile_gemm::TileGemmConfigFallbacks(), fallbacks);
}

std::vector<TileCase> TileCases() {
  struct Variant {
    const char* name;
    GemmVariant variant;
  };
  struct Tile {
    const char* name;
    TileGemmConfig config;
  };
  static const Variant kVariants[] = {{"nt", GemmVariant::kNT},
                                      {"nn", GemmVariant::kNN},
                                      {"tn", GemmVariant::kTN},
                                      {"m_grouped_nt", GemmVariant::kMGroupedNT},
                                      {"k_grouped_tn", GemmVariant::kKGroupedTN}};
  // sm_90's tile space (tile_gemm::TileGemmSpace("sm_90")).
  static const Tile kTiles[] = {{"tm128_tn128_ts3", {128, 128, 3}},
                                {"tm128_tn128_ts2", {128, 128, 2}},
                                {"tm64_tn128_ts3", {64, 128, 3}},
                                {"tm128_tn64_ts3", {128, 64, 3}}};
  std::vector<TileCase> out;
  static std::vector<std::string> names;
  names.reserve(std::size(kVariants) * std::size(kTiles));
  for (const Variant& v : kVariants) {
    for (const Tile& t : kTiles) {
      names.push_back(absl::StrCat(v.name, "_", t.name));
      out.push_back(TileCase{names.back().c_str(), v.variant, t.config});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(VariantsAndTiles, GemmCudaBackendTileTest,
                         ::testing::ValuesIn(TileCases()),
                         [](const auto& info) { return std::string(info.param.name); });

// No config: sm_90 runs the wgmma kernel, an sm_89 device the tile GEMM's heuristic shape; either
// way within budget. A tile the device does not run (AMD's 64x64 two-stage tile) runs the
// heuristic's shape instead, counted, and the op still succeeds.
TEST(GemmCudaTest, BackendRunsItsDefaultAndReplacesATileTheDeviceDoesNotRun) {
  if (!HaveFp8Mma()) GTEST_SKIP() << "no GPU with FP8 mma.sync (sm_89 or later)";
  std::unique_ptr<Backend> gpu = CreateCudaBackend(0);
  ASSERT_NE(gpu, nullptr);
  auto stream = gpu->CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const Mix mix = GpuMixes()[0];
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  HostOp op = MakeDense(GemmVariant::kNT, 200, 264, 384, mix, rng);
  CheckAgainstCpu(op, ThroughBackend(*gpu, **stream, GemmKernelConfig{}));
  const uint64_t fallbacks = tile_gemm::TileGemmConfigFallbacks();
  CheckAgainstCpu(op, ThroughBackend(*gpu, **stream, TileGemmConfig{64, 64, 2}));
  EXPECT_EQ(tile_gemm::TileGemmConfigFallbacks(), fallbacks + 1);
}

// e5m2 operands (the gradient format), which the wgmma kernel does not read: the backend runs them
// through the tile GEMM with no config asked for, on sm_90 as on sm_89.
TEST(GemmCudaTest, BackendRunsE5m2OperandsThroughTheTileGemm) {
  if (!HaveFp8Mma()) GTEST_SKIP() << "no GPU with FP8 mma.sync (sm_89 or later)";
  std::unique_ptr<Backend> gpu = CreateCudaBackend(0);
  ASSERT_NE(gpu, nullptr);
  auto stream = gpu->CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const GemmVariant variant : {GemmVariant::kNT, GemmVariant::kTN, GemmVariant::kNN}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << GemmVariantName(variant) << " seed " << seed);
    std::mt19937_64 rng(seed);
    HostOp op = MakeDense(variant, 200, 264, 384, GpuMixes()[0], rng);
    // b's values re-encoded as e5m2 (saturating, round to nearest even).
    HostTensor& b = op.tensors[2];
    for (size_t i = 0; i < b.storage.size() * sizeof(b.storage[0]); ++i) {
      b.bytes()[i] = fp8::Encode<fp8::E5M2>(fp8::Decode<fp8::E4M3FN>(b.bytes()[i]));
    }
    b.t.dtype = DType::kE5M2;
    op.args.b.dtype = DType::kE5M2;
    CheckAgainstCpu(op, ThroughBackend(*gpu, **stream, GemmKernelConfig{}));
  }
}

// The tile GEMM's own rules reach the client through the backend: e4m3fnuz (MI300's format) is
// FAILED_PRECONDITION on NVIDIA's matrix cores.
TEST(GemmCudaTest, BackendAnswersTheTileGemmsRefusalsWithTheirCodes) {
  if (!HaveFp8Mma()) GTEST_SKIP() << "no GPU with FP8 mma.sync (sm_89 or later)";
  std::unique_ptr<Backend> gpu = CreateCudaBackend(0);
  ASSERT_NE(gpu, nullptr);
  std::mt19937_64 rng(7);
  HostOp op = MakeDense(GemmVariant::kNT, 128, 128, 128, GpuMixes()[0], rng);
  std::vector<std::unique_ptr<DeviceTensor>> dev;
  for (const HostTensor& h : op.tensors) dev.push_back(std::make_unique<DeviceTensor>(h));
  GemmArgs g = op.args;
  g.a = dev[0]->t;
  g.a_scales = dev[1]->t;
  g.b = dev[2]->t;
  g.b_scales = dev[3]->t;
  g.d = dev[4]->t;
  g.config = TileGemmConfig{128, 128, 2};
  EXPECT_TRUE(SupportsOp(*gpu, Op(g)).ok());
  g.a.dtype = DType::kE4M3FNUZ;
  g.b.dtype = DType::kE4M3FNUZ;
  // With the tile asked for, and with no config (the wgmma kernel does not read it either).
  for (const GemmKernelConfig& config : {GemmKernelConfig(g.config), GemmKernelConfig()}) {
    g.config = config;
    const absl::Status fnuz = SupportsOp(*gpu, Op(g));
    EXPECT_EQ(fnuz.code(), absl::StatusCode::kFailedPrecondition) << fnuz;
    EXPECT_NE(std::string(fnuz.message()).find("e4m3fnuz"), std::string::npos) << fnuz;
  }
}

}  // namespace
}  // namespace gemm_test
}  // namespace kd
