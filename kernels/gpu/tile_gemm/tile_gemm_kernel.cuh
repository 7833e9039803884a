// The portable blockwise-scaled FP8 tile GEMM, written once over the matrix-core fragment of
// mma_fragment.cuh (mma.sync on NVIDIA, MFMA on AMD). Semantics: tile_gemm_params.h.
//
// One CTA computes a kBlockM x kBlockN tile of D with kWarpsM x kWarpsN warps (or wavefronts),
// each a (kBlockM / kWarpsM) x (kBlockN / kWarpsN) sub-tile of fragments. Per 128-wide block of
// the reduction, the matrix cores sum the block into fresh fp32 fragments, which are then scaled
// by SA(i, kb) * SB(j, kb) and added to the running fp32 accumulators ("promotion", outside the
// matrix cores: the in-core FP8 sums keep fewer bits than fp32). kStages blocks are in flight in
// shared memory (tile_stage.cuh). Rows and columns past the problem load as zeros and are not
// stored, so M and N may be anything; the reduction is a multiple of 128.
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_KERNEL_CUH_
#define KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_KERNEL_CUH_

// NOTE: the vendor runtime before fp8.h, whose KD_HOST_DEVICE uses the runtime's __forceinline__.
#if defined(__HIP__) && !defined(KD_GPU_EMULATION)
#include <hip/hip_runtime.h>
#elif !defined(KD_GPU_EMULATION)
#include <cuda_runtime.h>
#endif

#include <cstdint>
#include <type_traits>

#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/tile_gemm/mma_fragment.cuh"
#include "kernels/gpu/tile_gemm/tile_gemm_params.h"
#include "kernels/gpu/tile_gemm/tile_schedule.cuh"
#include "kernels/gpu/tile_gemm/tile_stage.cuh"
#include "kernels/gpu/tile_gemm/vendor_namespace.h"
#include "kernels/gpu/vendor.h"

namespace kd {
namespace tile_gemm {
KD_TILE_GEMM_VENDOR_NS_BEGIN

template <typename Mma, int kBlockM, int kBlockN, int kStages, int kWarpsM, int kWarpsN>
struct TileTraits {
  static constexpr int kThreads = kWarpsM * kWarpsN * Mma::kLanes;
  static constexpr int kWarpM = kBlockM / kWarpsM;
  static constexpr int kWarpN = kBlockN / kWarpsN;
  static constexpr int kFragsM = kWarpM / Mma::kM;
  static constexpr int kFragsN = kWarpN / Mma::kN;
  using Smem = SmemLayout<kBlockM, kBlockN, kStages>;
  static_assert(kFragsM * Mma::kM * kWarpsM == kBlockM, "block_m is whole fragments per warp");
  static_assert(kFragsN * Mma::kN * kWarpsN == kBlockN, "block_n is whole fragments per warp");
  static_assert(kStages >= 2, "the pipeline refills a stage while the other is read");
  static_assert(ScheduleSmemBytes(kMaxGroups, kThreads) <= Smem::kBytes,
                "the group table fits in the stages' shared memory");
};

// Device passes that have FP8 matrix instructions; in the others (gfx90a, or a host-only
// view) the kernel body is a trap and the host never launches it (tile_gemm.h).
#if KD_GPU_NVIDIA || defined(KD_GPU_EMULATION) || defined(__gfx940__) || defined(__gfx941__) || \
    defined(__gfx942__) || defined(__gfx950__)
#define KD_TILE_GEMM_HAS_FP8_MMA 1
#else
#define KD_TILE_GEMM_HAS_FP8_MMA 0
#endif

template <typename Acc, int kAccs>
__device__ __forceinline__ void ZeroAcc(Acc& acc) {
#pragma unroll
  for (int i = 0; i < kAccs; ++i) acc[i] = 0.0f;
}

template <typename Mma, int kBlockM, int kBlockN, int kStages, int kWarpsM, int kWarpsN,
          bool kBKMajor>
__global__ void __launch_bounds__(kWarpsM* kWarpsN* Mma::kLanes, 1) TileGemmKernel(const Params p) {
#if !KD_TILE_GEMM_HAS_FP8_MMA
  __builtin_trap();
#else
  using T = TileTraits<Mma, kBlockM, kBlockN, kStages, kWarpsM, kWarpsN>;
  using Acc = typename Mma::Acc;
  constexpr int kThreads = T::kThreads, kFragsM = T::kFragsM, kFragsN = T::kFragsN;
  extern __shared__ __attribute__((aligned(16))) unsigned char smem[];

  TileCoord t;
  if (!ScheduleTile<kBlockM, kBlockN, kThreads>(p, smem, t)) return;

  const int tid = gpu::ThreadIndex();
  const int lane = tid % Mma::kLanes, warp = tid / Mma::kLanes;
  const int warp_m0 = warp / kWarpsN * T::kWarpM, warp_n0 = warp % kWarpsN * T::kWarpN;
  uint8_t* const tiles = smem;
  float* const scales = reinterpret_cast<float*>(smem + T::Smem::kTileBytes);
  auto a_tile = [&](int s) { return tiles + s * T::Smem::kStageBytes; };
  auto b_tile = [&](int s) { return tiles + s * T::Smem::kStageBytes + kBlockM * kPitch; };
  auto scale_area = [&](int s) { return scales + s * (kBlockM + kBlockN); };

  const int a_valid = t.row_end - t.row0, b_valid = p.n - t.n0;
  RowsLoader<kBlockM, kThreads> a_loader{p.a + static_cast<int64_t>(t.row0) * p.lda, p.lda,
                                         a_valid};
  const uint8_t* b_group = p.b + t.group * p.b_group;
  using BLoader = typename std::conditional<kBKMajor, RowsLoader<kBlockN, kThreads>,
                                            ColumnsLoader<kBlockN, kThreads> >::type;
  BLoader b_loader{kBKMajor ? b_group + static_cast<int64_t>(t.n0) * p.ldb : b_group + t.n0, p.ldb,
                   b_valid};
  ScalesLoader<kBlockM, kBlockN, kThreads> s_loader{p.sa + static_cast<int64_t>(t.row0) * p.sa_ld,
                                                    p.sa_ld,
                                                    a_valid,
                                                    p.sb + t.group * p.sb_group,
                                                    p.sb_row,
                                                    p.sb_col,
                                                    p.sb_shift,
                                                    t.n0,
                                                    b_valid};
  auto issue = [&](int s, int kb) {
    a_loader.Issue(a_tile(s), kb);
    b_loader.Issue(b_tile(s), kb);
    s_loader.Issue(kb);
  };
  auto finish = [&](int s) {
    a_loader.Finish(a_tile(s));
    b_loader.Finish(b_tile(s));
    s_loader.Finish(scale_area(s));
  };

  Acc acc[kFragsM][kFragsN];
#pragma unroll
  for (int fm = 0; fm < kFragsM; ++fm) {
#pragma unroll
    for (int fn = 0; fn < kFragsN; ++fn) ZeroAcc<Acc, Mma::kAccs>(acc[fm][fn]);
  }

  const int blocks = t.kb_end - t.kb_begin;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < blocks) issue(s, t.kb_begin + s);
    CommitAsync();
    if (s < blocks) finish(s);
  }
  for (int i = 0; i < blocks; ++i) {
    WaitAsync<kStages - 2>();
    gpu::SyncThreads();  // block i is in stage i % kStages; the stage read in block i - 1 is free
    const int next = i + kStages - 1, next_stage = next % kStages, cur = i % kStages;
    if (next < blocks) issue(next_stage, t.kb_begin + next);
    CommitAsync();

    Acc part[kFragsM][kFragsN];
#pragma unroll
    for (int fm = 0; fm < kFragsM; ++fm) {
#pragma unroll
      for (int fn = 0; fn < kFragsN; ++fn) ZeroAcc<Acc, Mma::kAccs>(part[fm][fn]);
    }
    const uint8_t* a_warp = a_tile(cur) + warp_m0 * kPitch;
    const uint8_t* b_warp = b_tile(cur) + warp_n0 * kPitch;
// NOTE: on NVIDIA one 32-byte step at a time: unrolled, ptxas kept every step's fragments live
// and spilled (sm_90a, 64x128); hipcc and clang-19 unroll it within their registers.
#if KD_GPU_NVIDIA
#pragma unroll 1
#else
#pragma unroll
#endif
    for (int kk = 0; kk < kBlockK; kk += Mma::kK) {
      typename Mma::FragA fa[kFragsM];
      typename Mma::FragB fb[kFragsN];
#pragma unroll
      for (int fm = 0; fm < kFragsM; ++fm)
        Mma::LoadA(fa[fm], a_warp + fm * Mma::kM * kPitch + kk, kPitch, lane);
#pragma unroll
      for (int fn = 0; fn < kFragsN; ++fn)
        Mma::LoadB(fb[fn], b_warp + fn * Mma::kN * kPitch + kk, kPitch, lane);
#pragma unroll
      for (int fm = 0; fm < kFragsM; ++fm) {
#pragma unroll
        for (int fn = 0; fn < kFragsN; ++fn) Mma::Run(part[fm][fn], fa[fm], fb[fn]);
      }
    }

    // Promotion: acc += part * (SA(row) * SB(col)), the CPU reference's order of operations.
    const float* sa = scale_area(cur);
    const float* sb = sa + kBlockM;
#pragma unroll
    for (int fm = 0; fm < kFragsM; ++fm) {
#pragma unroll
      for (int fn = 0; fn < kFragsN; ++fn) {
#pragma unroll
        for (int e = 0; e < Mma::kAccs; ++e) {
          const float s = sa[warp_m0 + fm * Mma::kM + Mma::AccRow(lane, e)] *
                          sb[warp_n0 + fn * Mma::kN + Mma::AccCol(lane, e)];
          acc[fm][fn][e] += part[fm][fn][e] * s;
        }
      }
    }
    if (next < blocks) finish(next_stage);
  }

  unsigned char* d_group = static_cast<unsigned char*>(p.d) +
                           t.group * p.d_group * static_cast<int64_t>(p.d_f32 ? 4 : 2);
#pragma unroll
  for (int fm = 0; fm < kFragsM; ++fm) {
#pragma unroll
    for (int fn = 0; fn < kFragsN; ++fn) {
#pragma unroll
      for (int e = 0; e < Mma::kAccs; ++e) {
        const int row = t.row0 + warp_m0 + fm * Mma::kM + Mma::AccRow(lane, e);
        const int col = t.n0 + warp_n0 + fn * Mma::kN + Mma::AccCol(lane, e);
        if (row < t.row_end && col < p.n) {
          const int64_t at = static_cast<int64_t>(row) * p.ldd + col;
          const float v = acc[fm][fn][e];
          if (p.d_f32) {
            float* d = reinterpret_cast<float*>(d_group) + at;
            *d = p.accumulate ? *d + v : v;
          } else {
            reinterpret_cast<uint16_t*>(d_group)[at] = fp8::FloatToBF16(v);
          }
        }
      }
    }
  }
#endif
}

KD_TILE_GEMM_VENDOR_NS_END
}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_KERNEL_CUH_
