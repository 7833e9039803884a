// The portable tile GEMM's kernel source (tile_gemm_kernel.cuh) run on the host under an
// emulation of both vendors' matrix instructions, against the CPU backend: the tile loop
// (scheduling, staging, NN's in-register transpose, promotion, tails, groups, the epilogue) and
// the two fragments' lane mappings (MmaSyncFragment with 32 lanes, MfmaFragment with 64) are
// checked here, where no GPU is, and in CI.
//
// The emulation: every thread of a CTA is a host thread (barriers for __syncthreads and for the
// warp-collective instructions), CTAs run one after another over one shared-memory array that is
// poisoned before each. The instructions are the fragments' Isa policy, written from the vendors'
// documents independently of the fragments' own lane arithmetic:
//   ldmatrix .x4 (PTX ISA): lanes 8j..8j+7 give matrix j's row addresses; lane l gets 4 bytes
//     at 4(l%4) of row l/4 of matrix j in register j;
//   mma.sync.m16n8k32 .e4m3/.e5m2 (PTX ISA fragment layouts, g = l/4, t = l%4): A element i of
//     lane l at row g + 8((i/4)%2), column 4t + i%4 + 16(i/8); B element i at row 4t + i%4 +
//     16(i/4), column g; C element i at row g + 8(i/2), column 2t + i%2;
//   v_mfma_f32_32x32x16_fp8 (AMD CDNA3 ISA / matrix instruction calculator): lane l's 8 A bytes
//     are row l%32, k = 8(l/32) + byte; B likewise by column; D element (i, j) is register
//     i%4 + 4(i/8) of lane j + 32((i/4)%2). Operands decode as e4m3fnuz (gfx942) or as OCP
//     e4m3fn / e5m2 (gfx950).
// The emulated instructions sum a block exactly (double) and round once to fp32, so the budget is
// the CPU tests' fp32 one (gemm_test_util.h), far tighter than the hardware's.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/tile_gemm/tile_gemm_args.h"
#include "kernels/gpu/tile_gemm/tile_gemm_kernel.cuh"
#include "tests/kernels/gemm/gemm_test_util.h"

#ifndef KD_GPU_EMULATION
#error "build with KD_GPU_EMULATION"
#endif

namespace kd {
namespace tile_gemm {

alignas(16) unsigned char smem[256 * 1024];  // the CTA's shared memory (tile_gemm_kernel.cuh)

namespace {

class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int count_;
  int arrived_ = 0;
  int generation_ = 0;
};

// What the lanes of one warp (wavefront) exchange inside a collective instruction.
struct Warp {
  explicit Warp(int lanes) : barrier(lanes) {}
  Barrier barrier;
  const uint8_t* ptr[64];
  uint32_t a[64][4];
  uint32_t b[64][2];
  uint64_t la[64], lb[64];
};

struct Cta {
  Cta(int threads, int lanes) : barrier(threads), lanes(lanes) {
    for (int w = 0; w < threads / lanes; ++w) warps.push_back(std::make_unique<Warp>(lanes));
  }
  Barrier barrier;
  int lanes;
  std::vector<std::unique_ptr<Warp>> warps;
};

thread_local int t_tid = 0, t_bx = 0, t_by = 0;
thread_local Cta* t_cta = nullptr;

Warp& MyWarp() { return *t_cta->warps[t_tid / t_cta->lanes]; }
int MyLane() { return t_tid % t_cta->lanes; }

}  // namespace
}  // namespace tile_gemm

namespace gpu {
int ThreadIndex() { return tile_gemm::t_tid; }
int BlockIndexX() { return tile_gemm::t_bx; }
int BlockIndexY() { return tile_gemm::t_by; }
void SyncThreads() { tile_gemm::t_cta->barrier.Wait(); }
}  // namespace gpu

namespace tile_gemm {
namespace {

using gemm_test::HostTensor;
using gemm_test::MakeHost;
using gemm_test::Mix;
using gemm_test::Pattern;

double DecodeAs(uint8_t code, Fp8Kind kind, bool fnuz) {
  if (fnuz) return fp8::Decode<fp8::E4M3FNUZ>(code);  // gfx94x: kerneld has no e5m2fnuz
  return kind == Fp8Kind::kE5M2 ? fp8::Decode<fp8::E5M2>(code) : fp8::Decode<fp8::E4M3FN>(code);
}

uint8_t Byte(uint64_t word, int i) { return static_cast<uint8_t>(word >> (8 * i)); }

struct EmuMmaSyncIsa {
  static void LdMatrixX4(uint32_t (&r)[4], const uint8_t* p) {
    Warp& w = MyWarp();
    const int lane = MyLane();
    w.ptr[lane] = p;
    w.barrier.Wait();
    for (int j = 0; j < 4; ++j) std::memcpy(&r[j], w.ptr[8 * j + lane / 4] + 4 * (lane % 4), 4);
    w.barrier.Wait();
  }
  template <Fp8Kind kA, Fp8Kind kB>
  static void Mma16832(float* c, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    Warp& w = MyWarp();
    const int lane = MyLane();
    std::memcpy(w.a[lane], a, sizeof(a));
    w.b[lane][0] = b0;
    w.b[lane][1] = b1;
    w.barrier.Wait();
    double am[16][32], bm[32][8];
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int i = 0; i < 16; ++i) {
        am[g + 8 * ((i / 4) % 2)][4 * t + i % 4 + 16 * (i / 8)] =
            DecodeAs(Byte(w.a[l][i / 4], i % 4), kA, false);
      }
      for (int i = 0; i < 8; ++i) {
        bm[4 * t + i % 4 + 16 * (i / 4)][g] = DecodeAs(Byte(w.b[l][i / 4], i % 4), kB, false);
      }
    }
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
      double sum = 0;
      for (int k = 0; k < 32; ++k) sum += am[row][k] * bm[k][col];
      c[i] += static_cast<float>(sum);
    }
    w.barrier.Wait();
  }
};

template <bool kFnuz>
struct EmuMfmaIsa {
  template <Fp8Kind kA, Fp8Kind kB>
  static MfmaAcc16 Mfma32x32x16(long a, long b, MfmaAcc16 c) {
    Warp& w = MyWarp();
    const int lane = MyLane();
    w.la[lane] = static_cast<uint64_t>(a);
    w.lb[lane] = static_cast<uint64_t>(b);
    w.barrier.Wait();
    double am[32][16], bm[16][32];
    for (int l = 0; l < 64; ++l) {
      for (int e = 0; e < 8; ++e) {
        am[l % 32][8 * (l / 32) + e] = DecodeAs(Byte(w.la[l], e), kA, kFnuz);
        bm[8 * (l / 32) + e][l % 32] = DecodeAs(Byte(w.lb[l], e), kB, kFnuz);
      }
    }
    for (int i = 0; i < 32; ++i) {
      for (int j = 0; j < 32; ++j) {
        if (j + 32 * ((i / 4) % 2) != lane) continue;
        double sum = 0;
        for (int k = 0; k < 16; ++k) sum += am[i][k] * bm[k][j];
        c[i % 4 + 4 * (i / 8)] += static_cast<float>(sum);
      }
    }
    w.barrier.Wait();
    return c;
  }
};

template <Fp8Kind kA, Fp8Kind kB>
using NvidiaFragment = MmaSyncFragment<kA, kB, EmuMmaSyncIsa>;
template <Fp8Kind kA, Fp8Kind kB>
using Gfx942Fragment = MfmaFragment<kA, kB, EmuMfmaIsa<true>>;
template <Fp8Kind kA, Fp8Kind kB>
using Gfx950Fragment = MfmaFragment<kA, kB, EmuMfmaIsa<false>>;

// One emulated launch: the grid tile_gemm_kernels.cu computes, each CTA's threads as host
// threads over poisoned shared memory.
template <template <Fp8Kind, Fp8Kind> class Fragment, int kBM, int kBN, int kS, int kWM, int kWN>
void EmulatedLaunch(const Params& p) {
  using Mma = Fragment<Fp8Kind::kE4M3, Fp8Kind::kE4M3>;
  constexpr int kThreads = kWM * kWN * Mma::kLanes;
  const int num_n = (p.n + kBN - 1) / kBN, num_m = (p.m + kBM - 1) / kBM;
  int grid_x = num_m * num_n, grid_y = 1;
  if (p.mode == Mode::kKGrouped) grid_y = p.num_groups;
  if (p.mode == Mode::kMGrouped) grid_x = (num_m + p.num_groups) * num_n;
  auto body = [&](bool k_major, Fp8Kind a, Fp8Kind b) {
    constexpr Fp8Kind kE4 = Fp8Kind::kE4M3, kE5 = Fp8Kind::kE5M2;
#define KD_EMU_KERNEL(A, B, KM)          \
  if (a == A && b == B && k_major == KM) \
  TileGemmKernel<Fragment<A, B>, kBM, kBN, kS, kWM, kWN, KM>(p)
    KD_EMU_KERNEL(kE4, kE4, true);
    KD_EMU_KERNEL(kE4, kE5, true);
    KD_EMU_KERNEL(kE5, kE4, true);
    KD_EMU_KERNEL(kE5, kE5, true);
    KD_EMU_KERNEL(kE4, kE4, false);
    KD_EMU_KERNEL(kE4, kE5, false);
    KD_EMU_KERNEL(kE5, kE4, false);
    KD_EMU_KERNEL(kE5, kE5, false);
#undef KD_EMU_KERNEL
  };
  for (int by = 0; by < grid_y; ++by) {
    for (int bx = 0; bx < grid_x; ++bx) {
      std::memset(smem, 0xFF, sizeof(smem));
      Cta cta(kThreads, Mma::kLanes);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          t_tid = t;
          t_bx = bx;
          t_by = by;
          t_cta = &cta;
          body(p.b_k_major, p.a_kind, p.b_kind);
        });
      }
      for (std::thread& t : threads) t.join();
    }
  }
}

using Launch = void (*)(const Params&);

struct Emulation {
  const char* name;
  Launch launch;
  bool fnuz;  // gfx942: operands are e4m3fnuz
};

// Tile shapes small enough for host threads: the vendors' fragments at one and at several
// warps per CTA, and one production shape of each (tile_gemm_kernels.cu).
const Emulation kEmulations[] = {
    {"nvidia_32x32_4warps", &EmulatedLaunch<NvidiaFragment, 32, 32, 2, 2, 2>, false},
    {"nvidia_64x32_s3", &EmulatedLaunch<NvidiaFragment, 64, 32, 3, 1, 2>, false},
    {"nvidia_64x128_s3", &EmulatedLaunch<NvidiaFragment, 64, 128, 3, 2, 4>, false},
    {"gfx942_32x32_1wave", &EmulatedLaunch<Gfx942Fragment, 32, 32, 2, 1, 1>, true},
    {"gfx942_64x64", &EmulatedLaunch<Gfx942Fragment, 64, 64, 2, 2, 2>, true},
    {"gfx950_64x32_2waves", &EmulatedLaunch<Gfx950Fragment, 64, 32, 2, 2, 1>, false},
};

// ---- Problems -------------------------------------------------------------------------------

void FillCodes(HostTensor& t, Pattern pattern, std::mt19937_64& rng) {
  const DType dtype = t.t.dtype;
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  uint8_t* codes = t.bytes();
  const int64_t count = t.storage.size() * sizeof(t.storage[0]);
  for (int64_t i = 0; i < count; ++i) {
    const float x = pattern == Pattern::kZeros ? 0.0f : gauss(rng) * 16.0f;
    codes[i] = dtype == DType::kE5M2       ? fp8::Encode<fp8::E5M2>(x)
               : dtype == DType::kE4M3FNUZ ? fp8::Encode<fp8::E4M3FNUZ>(x)
                                           : fp8::Encode<fp8::E4M3FN>(x);
  }
}

struct HostOp {
  std::vector<HostTensor> tensors;  // a, a_scales, b, b_scales, d, [group_ends]
  GemmArgs args;
};

GemmArgs Bind(GemmArgs g, std::vector<HostTensor>& t) {
  g.a = t[0].t;
  g.a_scales = t[1].t;
  g.b = t[2].t;
  g.b_scales = t[3].t;
  g.d = t[4].t;
  if (t.size() > 5) g.group_ends = t[5].t;
  return g;
}

HostTensor Strided(DType dtype, int64_t rows, int64_t cols, int64_t ld) {
  HostTensor h = MakeHost(dtype, {rows, ld});
  h.t.shape[1] = cols;
  return h;
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

struct Case {
  const char* name;
  GemmVariant variant;
  int64_t m, n, k;            // M-grouped: m = T; K-grouped: k = T
  std::vector<int64_t> ends;  // grouped variants
  DType a_type = DType::kE4M3FN, b_type = DType::kE4M3FN;
  DType out = DType::kBF16;
  bool accumulate = false;
  int64_t lda = 0, ldb = 0, ldd = 0;  // padded strides (0: contiguous)
};

HostOp Make(const Case& c, std::mt19937_64& rng) {
  HostOp op;
  const int64_t kb = c.k / 128, nb = (c.n + 127) / 128;
  const int64_t groups = c.ends.size();
  std::vector<HostTensor>& t = op.tensors;
  t.push_back(Strided(c.a_type, c.m, c.k, c.lda ? c.lda : c.k));
  t.push_back(MakeHost(DType::kF32, {c.m, kb}));
  switch (c.variant) {
    case GemmVariant::kNN:
      t.push_back(Strided(c.b_type, c.k, c.n, c.ldb ? c.ldb : c.n));
      t.push_back(MakeHost(DType::kF32, {kb, nb}));
      break;
    case GemmVariant::kMGroupedNT:
      t.push_back(MakeHost(c.b_type, {groups, c.n, c.k}));
      t.push_back(MakeHost(DType::kF32, {groups, nb, kb}));
      break;
    default:
      t.push_back(Strided(c.b_type, c.n, c.k, c.ldb ? c.ldb : c.k));
      t.push_back(MakeHost(DType::kF32, {c.variant == GemmVariant::kNT ? nb : c.n, kb}));
  }
  if (c.variant == GemmVariant::kKGroupedTN) {
    t.push_back(MakeHost(c.out, {groups, c.m, c.n}));
  } else {
    t.push_back(Strided(c.out, c.m, c.n, c.ldd ? c.ldd : c.n));
  }
  if (groups > 0) t.push_back(Ends(c.ends, DType::kI64));
  FillCodes(t[0], Pattern::kGaussian, rng);
  gemm_test::FillScales(t[1], -3, rng);
  FillCodes(t[2], Pattern::kGaussian, rng);
  gemm_test::FillScales(t[3], 0, rng);
  if (c.accumulate) gemm_test::FillGaussian(t[4], rng);
  op.args.variant = c.variant;
  op.args.accumulate = c.accumulate;
  op.args = Bind(op.args, t);
  return op;
}

// Runs `c` under `emu` and on the CPU backend; compares every element of d with the fp32 budget
// of the CPU tests (gemm_test_util.h), against the CPU result and its mass.
void Check(const Case& c, const Emulation& emu) {
  const uint64_t seed = gemm_test::FreshSeed();
  SCOPED_TRACE(testing::Message() << c.name << " under " << emu.name << " seed " << seed);
  std::mt19937_64 rng(seed);
  HostOp op = Make(c, rng);
  std::vector<HostTensor> cpu = op.tensors;
  const GemmArgs cpu_args = Bind(op.args, cpu);
  const absl::Status cpu_ran = gemm_test::RunOnCpu(cpu_args);
  ASSERT_TRUE(cpu_ran.ok()) << cpu_ran;
  std::vector<HostTensor> mass = op.tensors;
  for (int i : {0, 2}) {
    for (size_t j = 0; j < mass[i].storage.size() * 8; ++j) mass[i].bytes()[j] &= 0x7F;
  }
  mass[4] = MakeHost(DType::kF32, {1});
  {
    const Tensor& d = cpu_args.d;
    int64_t count = 1;
    for (int i = d.rank - 1; i >= 0; --i) {
      mass[4].t.shape[i] = d.shape[i];
      mass[4].t.strides[i] = count;
      count *= d.shape[i];
    }
    mass[4].t.rank = d.rank;
    mass[4].storage.assign((count * 4 + 7) / 8, 0);
    mass[4].t.data = mass[4].storage.data();
  }
  GemmArgs mass_args = Bind(op.args, mass);
  mass_args.accumulate = false;
  ASSERT_TRUE(gemm_test::RunOnCpu(mass_args).ok());

  if (!c.accumulate) gemm_test::Poison(op.tensors[4]);
  const HostTensor prior = op.tensors[4];
  op.args = Bind(op.args, op.tensors);
  ASSERT_TRUE(Validate(Op(op.args)).ok());
  const absl::StatusOr<Params> p = TileGemmParams(op.args);
  ASSERT_TRUE(p.ok()) << p.status();
  emu.launch(*p);

  const Tensor& d = op.tensors[4].t;
  const int64_t cols = d.shape[d.rank - 1];
  auto at = [&](const Tensor& t, int64_t i) {
    const int64_t row = i / cols, col = i % cols;
    const int64_t offset =
        t.rank == 3 ? (row / t.shape[1]) * t.strides[0] + (row % t.shape[1]) * t.strides[1] + col
                    : row * t.strides[0] + col;
    return gemm_test::ReadOutput(t, offset);
  };
  const double rel = (c.k / 128 + 24) * std::ldexp(1.0, -24);
  int bad = 0;
  std::string first;
  for (int64_t i = 0; i < d.numel(); ++i) {
    const double got = at(d, i), want = at(cpu[4].t, i), s = at(mass[4].t, i);
    double bound = rel * s + (d.dtype == DType::kBF16 ? std::ldexp(std::fabs(want), -8) : 0.0);
    if (c.accumulate) bound += std::ldexp(std::fabs(at(prior.t, i)) + std::fabs(want), -23);
    if (!(std::fabs(got - want) <= bound) && bad++ == 0) {
      first = absl::StrCat("element ", i, ": emulated ", got, " cpu ", want, " bound ", bound);
    }
  }
  EXPECT_EQ(bad, 0) << bad << " of " << d.numel() << " elements over the bound; first " << first;
}

// The cases every emulation runs: each variant, ragged M and N, strides, f32 and accumulate,
// empty groups and group ends needing no clamping (clamping is the device test's).
std::vector<Case> Cases(bool fnuz) {
  const DType e4 = fnuz ? DType::kE4M3FNUZ : DType::kE4M3FN;
  std::vector<Case> cases = {
      {"nt_ragged", GemmVariant::kNT, 70, 90, 256, {}, e4, e4},
      {"nt_one_row_strided",
       GemmVariant::kNT,
       1,
       40,
       128,
       {},
       e4,
       e4,
       DType::kF32,
       false,
       144,
       160,
       41},
      {"tn_f32_accumulate", GemmVariant::kTN, 40, 72, 256, {}, e4, e4, DType::kF32, true},
      {"nn_ragged_n", GemmVariant::kNN, 40, 37, 256, {}, e4, e4, DType::kBF16, false, 0, 40, 0},
      {"nn_strided", GemmVariant::kNN, 33, 20, 128, {}, e4, e4, DType::kF32, false, 0, 24, 0},
      {"m_grouped", GemmVariant::kMGroupedNT, 100, 40, 128, {0, 30, 30, 95, 100}, e4, e4},
      {"k_grouped", GemmVariant::kKGroupedTN, 40, 36, 512, {128, 128, 512}, e4, e4, DType::kF32},
  };
  if (!fnuz) {
    cases.push_back({"nt_e5m2_e4m3", GemmVariant::kNT, 40, 40, 256, {}, DType::kE5M2, e4});
    cases.push_back({"nn_e4m3_e5m2", GemmVariant::kNN, 40, 40, 128, {}, e4, DType::kE5M2});
    cases.push_back({"tn_e5m2_e5m2",
                     GemmVariant::kTN,
                     40,
                     40,
                     128,
                     {},
                     DType::kE5M2,
                     DType::kE5M2,
                     DType::kF32});
  }
  return cases;
}

void PrintTo(const Emulation& e, std::ostream* os) { *os << e.name; }

class TileGemmEmulationTest : public ::testing::TestWithParam<Emulation> {};

TEST_P(TileGemmEmulationTest, MatchesCpuBackend) {
  const Emulation& emu = GetParam();
  for (const Case& c : Cases(emu.fnuz)) Check(c, emu);
}

INSTANTIATE_TEST_SUITE_P(Fragments, TileGemmEmulationTest, ::testing::ValuesIn(kEmulations),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tile_gemm
}  // namespace kd
