// Blockwise-scaled FP8 GEMM for sm_90a: D = sum over 128-wide K blocks of
// (A_blk · B_blkᵀ) * a_scale * b_scale, fp32 accumulation, bf16 or f32 output.
//
// Structure (one persistent CTA per SM, 128 * (1 + kBlockM / 64) threads):
//   warpgroup 0, the producer (producer.cuh; registers cut with setmaxnreg): warp 0 issues the
//     TMA loads of the A and B tiles of each K block into a ring of shared-memory stages
//     (pipeline.cuh, smem_layout.cuh), and in the 128x192 tile's TMA-scale instantiation those
//     of the scales too; otherwise warps 1..3 copy the scales with cp.async.
//   warpgroups 1.., the consumers (registers raised): each owns 64 rows of the tile, issues each
//     K block's four wgmma m64nNk32 (wgmma.cuh), promotes the block's fp32 partial sum by its
//     scales into the tile's accumulator (scale_promotion.cuh) and frees the stage. Tiles up to
//     128 columns alternate two partial sums (consumer_two_partials.cuh); the 128x192 and 192x128
//     tiles keep one per warpgroup (consumer_one_partial.cuh). The epilogue (epilogue.cuh)
//     writes D by TMA bulk stores or 16-byte stores.
// Tiles are walked in a grouped raster order (tile_scheduler.cuh); the producer runs ahead of the
// consumers across tile boundaries, so the next tile's loads overlap this tile's epilogue. Dense
// problems whose last wave of tiles is part full may split that wave's tiles along K
// (split_tail.cuh). The clock trace of a measuring build is trace.cuh's.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda/gemm/consumer_one_partial.cuh"
#include "kernels/cuda/gemm/consumer_two_partials.cuh"
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/pipeline.cuh"
#include "kernels/cuda/gemm/producer.cuh"
#include "kernels/cuda/gemm/ptx_barrier.cuh"
#include "kernels/cuda/gemm/ptx_cp_async.cuh"
#include "kernels/cuda/gemm/ptx_tma.cuh"
#include "kernels/cuda/gemm/ptx_utils.cuh"
#include "kernels/cuda/gemm/smem_layout.cuh"
#include "kernels/cuda/gemm/split_tail.cuh"
#include "kernels/cuda/gemm/tile_scheduler.cuh"
#include "kernels/cuda/gemm/trace.cuh"
#include "kernels/gpu/device_attributes.h"

namespace kd {
namespace cuda_gemm {
namespace {

// Threads and the setmaxnreg split for a tile of kBlockM rows (64 per consumer warpgroup).
// The register file is 64K 32-bit registers per SM and one CTA runs per SM.
template <int kBlockM>
struct Roles {
  static constexpr int kConsumers = kBlockM / 64;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  // NOTE: with one or two consumer warpgroups each consumer thread holds at most the 64-register
  // accumulator and two 64-register partials (192); 224 leave enough for addressing and the
  // epilogue without spills. At 40 or 48 producer registers ptxas spills in the producer loops.
  // Three consumer warpgroups (192-row tiles) hold one 64-register partial each beside the
  // accumulator (128) and share what is left: 3 x 152 + 56 = 512 registers per thread slot.
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = kConsumers == 3 ? 152 : 224;
  static constexpr int kEmptyArrivals = 4 * kConsumers;  // one per consumer warp
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= 65536, "register file");
};

// The persistent kernel: warpgroup 0 produces (producer.cuh), the others consume
// (consumer_two_partials.cuh, consumer_one_partial.cuh). kAKBlockMajor (the TMA-scale
// instantiation only): map_sa is over K-block-major A scales (KernelParams::scale_tma).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats, bool kAKBlockMajor>
__global__ void __launch_bounds__(Roles<kBlockM>::kThreads, 1)
    GemmFp8Kernel(const __grid_constant__ KernelParams p, const __grid_constant__ CUtensorMap map_a,
                  const __grid_constant__ CUtensorMap map_b,
                  const __grid_constant__ CUtensorMap map_sa,
                  const __grid_constant__ CUtensorMap map_sb,
                  const __grid_constant__ CUtensorMap map_d) {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  using R = Roles<kBlockM>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kFull);
  uint64_t* empty = reinterpret_cast<uint64_t*>(smem + L::kEmpty);
  GroupTable& groups = *reinterpret_cast<GroupTable*>(smem + L::kGroups);

  // The instantiation with scale rows of a TMA box loads the scales by TMA: launched for dense
  // problems with 128x128 B scales only (LaunchGemmFp8Kernel); the others copy them with
  // cp.async into rows of one float.
  constexpr bool scale_tma = kRowFloats == kScaleBoxCols;
  const int warpgroup = threadIdx.x / 128;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      BarrierInit(&full[s], scale_tma ? kFullArrivalsTma : kFullArrivals);
      BarrierInit(&empty[s], R::kEmptyArrivals * kCluster);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  if (p.mode != KernelMode::kDense) {
    BuildGroupTable<kBlockM, kBlockN, kCluster>(p, groups);
  } else {
    __syncthreads();
  }
  // The peer CTA multicasts into this CTA's stages and arrives on its barriers: both must be
  // initialised cluster-wide first.
  if constexpr (kCluster > 1) ClusterSync();
  const uint32_t rank = kCluster > 1 ? ClusterRank() : 0;
  // NOTE: each role builds its scheduler after setmaxnreg: built before, its fields live across
  // the register cut, and the 192-row tile's consumers (152 registers) spill one of them.
  const int first_work = blockIdx.x / kCluster;
  const int work_stride = gridDim.x / kCluster;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R::kProducerRegs));
    const Scheduler<kBlockM, kBlockN, kCluster> sched(p, groups, static_cast<int>(rank));
    if (warp == 0) {
      ProduceTiles<kBlockM, kBlockN, kStages, kCluster, kRowFloats, kAKBlockMajor>(
          p, sched, first_work, work_stride, smem, rank, &map_a, &map_b, &map_sa, &map_sb, lane);
    } else if (!scale_tma) {
      CopyScales<kBlockM, kBlockN, kStages, kCluster, kRowFloats>(p, sched, first_work, work_stride,
                                                                  smem, warp, lane);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R::kConsumerRegs));
    const Scheduler<kBlockM, kBlockN, kCluster> sched(p, groups, static_cast<int>(rank));
    if constexpr (L::kStoreBuffers > 0) {
      if (p.d_tma && threadIdx.x % 128 == 0) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_d)));
      }
    }
    // NOTE: one loop per B scale layout: with the layout as a run-time branch inside the
    // promotion, ptxas spills about 1 KB of the accumulators.
    // The TMA-scale instantiation never runs with per-row B scales (LaunchGemmFp8Kernel).
    if constexpr (scale_tma) {
      ConsumerLoopOnePartial<kBlockM, kBlockN, kStages, kCluster, kRowFloats, false, kAKBlockMajor>(
          p, sched, first_work, work_stride, smem, rank, &map_d);
    } else if constexpr (kBlockN > 128 || kBlockM > 128) {
      if (p.b_scale_per_row) {
        ConsumerLoopOnePartial<kBlockM, kBlockN, kStages, kCluster, kRowFloats, true>(
            p, sched, first_work, work_stride, smem, rank, &map_d);
      } else {
        ConsumerLoopOnePartial<kBlockM, kBlockN, kStages, kCluster, kRowFloats, false>(
            p, sched, first_work, work_stride, smem, rank, &map_d);
      }
    } else if (p.b_scale_per_row) {
      ConsumerLoopTwoPartials<kBlockM, kBlockN, kStages, kCluster, kRowFloats, true>(
          p, sched, first_work, work_stride, smem, rank, &map_d);
    } else {
      ConsumerLoopTwoPartials<kBlockM, kBlockN, kStages, kCluster, kRowFloats, false>(
          p, sched, first_work, work_stride, smem, rank, &map_d);
    }
    // The thread that issued a warpgroup's bulk stores waits for them: shared memory must
    // outlive their reads.
    if constexpr (L::kStoreBuffers > 0) {
      if (p.d_tma) BulkWaitAll(threadIdx.x % 128 == 0);
    }
  }
  // No CTA may leave while its peer can still arrive on its barriers or write its stages.
  if constexpr (kCluster > 1) {
    __syncwarp();
    ClusterSync();
  }
}

template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats>
cudaLaunchConfig_t LaunchConfig(int num_ctas, cudaLaunchAttribute* cluster, cudaStream_t stream) {
  cluster->id = cudaLaunchAttributeClusterDimension;
  cluster->val.clusterDim.x = kCluster;
  cluster->val.clusterDim.y = 1;
  cluster->val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(num_ctas, 1, 1);
  config.blockDim = dim3(Roles<kBlockM>::kThreads, 1, 1);
  config.dynamicSmemBytes = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>::kBytes;
  config.stream = stream;
  config.attrs = cluster;
  config.numAttrs = 1;
  return config;
}

// CTAs of this instantiation that fit on the current device at once (whole clusters), after
// opting in to its shared memory; cached per device. 0 with `err` set on failure.
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats, bool kAKBlockMajor>
int ResidentCtas(cudaError_t& err) {
  static cuda::PerDeviceValue cache;
  int device = 0;
  err = cudaGetDevice(&device);
  if (err != cudaSuccess) return 0;
  int resident = 0;
  err = cache.Get(device, &resident, [](int* value) {
    auto* kernel = &GemmFp8Kernel<kBlockM, kBlockN, kStages, kCluster, kRowFloats, kAKBlockMajor>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>::kBytes);
    int sms = 0;
    if (e == cudaSuccess) e = cuda::CurrentSmCount(&sms);
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute cluster;
    const cudaLaunchConfig_t config = LaunchConfig<kBlockM, kBlockN, kStages, kCluster, kRowFloats>(
        sms / kCluster * kCluster, &cluster, 0);
    int clusters = 0;
    e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
    *value = std::max(1, clusters) * kCluster;
    return e;
  });
  return err == cudaSuccess ? resident : 0;
}

// Sets params' scheduler divisors (KernelParams::div_*) for this tile and cluster: Scheduler
// divides by them at every tile boundary, on the consumers' path between the last K block's
// promotion and the next tile's store.
template <int kBlockM, int kBlockN, int kCluster>
void SetScheduleDivisors(KernelParams& p) {
  const int num_n = std::max(1, (p.n + kBlockN - 1) / kBlockN);
  const int num_m = std::max(1, (p.m + kBlockM - 1) / kBlockM);
  // Work-item rows (dense, K-grouped): clusters of M tiles, M tiles.
  const int rows = p.mode == KernelMode::kKGrouped ? num_m : (num_m + kCluster - 1) / kCluster;
  p.div_band_items.Init(p.raster_group * num_n);
  p.div_band.Init(p.raster_group);
  p.div_last_band.Init(rows % p.raster_group == 0 ? p.raster_group : rows % p.raster_group);
  p.div_group_items.Init(num_m * num_n);
}

uint32_t* g_trace = nullptr;  // SetGemmFp8Trace

template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats, bool kAKBlockMajor>
cudaError_t Launch(const KernelParams& params, const CUtensorMap& map_a, const CUtensorMap& map_b,
                   const CUtensorMap& map_sa, const CUtensorMap& map_sb, const CUtensorMap& map_d,
                   int num_ctas, int max_useful, void* workspace, uint64_t workspace_bytes,
                   cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  const int resident =
      ResidentCtas<kBlockM, kBlockN, kStages, kCluster, kRowFloats, kAKBlockMajor>(err);
  if (err != cudaSuccess) return err;
  if (params.raster_group < 1 || params.raster_group > kMaxRasterGroup) {
    return cudaErrorInvalidValue;  // the band table's range (GemmConfig validates it first)
  }
  KernelParams p = params;
  p.trace = g_trace;
  int sm_count = 0;  // the split workspace's size, read only where a split may be planned
  if (workspace != nullptr) {
    err = cuda::CurrentSmCount(&sm_count);
    if (err != cudaSuccess) return err;
  }
  if (num_ctas <= 0) {
    num_ctas = resident;
    err = PlanSplitTail<kBlockM, kBlockN, kCluster>(p, resident, num_ctas, sm_count, workspace,
                                                    workspace_bytes, stream);
    if (err != cudaSuccess) return err;
    if (p.split_k == 1) num_ctas = std::min(resident, max_useful);
  } else if (num_ctas <= resident) {
    // NOTE: an owner slice spins until the other slices of its tile are done, which needs
    // every CTA resident at once: a grid larger than that is never split.
    err = PlanSplitTail<kBlockM, kBlockN, kCluster>(p, num_ctas, num_ctas, sm_count, workspace,
                                                    workspace_bytes, stream);
    if (err != cudaSuccess) return err;
  }
  num_ctas = std::max(kCluster, num_ctas / kCluster * kCluster);
  SetScheduleDivisors<kBlockM, kBlockN, kCluster>(p);
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config =
      LaunchConfig<kBlockM, kBlockN, kStages, kCluster, kRowFloats>(num_ctas, &cluster, stream);
  return cudaLaunchKernelEx(
      &config, &GemmFp8Kernel<kBlockM, kBlockN, kStages, kCluster, kRowFloats, kAKBlockMajor>, p,
      map_a, map_b, map_sa, map_sb, map_d);
}

}  // namespace

void SetGemmFp8Trace(uint32_t* trace) { g_trace = trace; }

uint64_t GemmFp8SplitWorkspaceBytes(int sm_count) {
  return SplitFlagBytes(sm_count) + static_cast<uint64_t>(sm_count) * 128 * 192 * sizeof(float);
}

bool GemmFp8TmaScales(int block_m, int block_n, int stages) {
  return TmaScales(block_m, block_n, stages);
}

// Tile rows, columns, stages, cluster, floats per scale row (kScaleBoxCols: the TMA-scale
// instantiation of the tile, TmaScales; clusters of 2 only: unclustered, TMA scale loads make
// 128x192 slower), A scales K-block-major (TMA-scale instantiations only).
#define KD_GEMM_INSTANCES(X)  \
  X(128, 128, 4, 1, 1, false) \
  X(128, 128, 5, 1, 1, false) \
  X(128, 128, 6, 1, 1, false) \
  X(128, 128, 5, 2, 1, false) \
  X(128, 128, 6, 2, 1, false) \
  X(128, 192, 4, 1, 1, false) \
  X(128, 192, 4, 2, 1, false) \
  X(128, 192, 4, 2, 4, false) \
  X(128, 192, 4, 2, 4, true)  \
  X(128, 64, 6, 1, 1, false)  \
  X(128, 64, 8, 1, 1, false)  \
  X(128, 64, 8, 2, 1, false)  \
  X(64, 64, 8, 1, 1, false)   \
  X(64, 32, 16, 1, 1, false)  \
  X(192, 128, 4, 1, 1, false) \
  X(192, 128, 4, 2, 1, false)

cudaError_t LaunchGemmFp8Kernel(const KernelParams& params, const CUtensorMap& map_a,
                                const CUtensorMap& map_b, const CUtensorMap& map_sa,
                                const CUtensorMap& map_sb, const CUtensorMap& map_d, int block_m,
                                int block_n, int stages, int cluster, int num_ctas,
                                int max_useful_ctas, void* workspace, uint64_t workspace_bytes,
                                cudaStream_t stream) {
  // K-grouped's scheduler pairs no tiles: in a cluster both CTAs would run the same ones.
  if (params.mode == KernelMode::kKGrouped && cluster != 1) return cudaErrorInvalidValue;
  // TMA scale loads: dense problems with 128x128 B scales, on a tile built for them, in
  // clusters of 2.
  if (params.scale_tma != kScalesByCpAsync &&
      (params.mode != KernelMode::kDense || params.b_scale_per_row || cluster != 2 ||
       !TmaScales(block_m, block_n, stages))) {
    return cudaErrorInvalidValue;
  }
  // TMA stores: dense and M-grouped problems with bf16 output written, not accumulated.
  if (params.d_tma && (params.mode == KernelMode::kKGrouped || params.d_f32 || params.accumulate ||
                       !TileStoresByTma(block_n))) {
    return cudaErrorInvalidValue;
  }
  const int row = params.scale_tma != kScalesByCpAsync ? kScaleBoxCols : 1;
  const bool a_k_block_major = params.scale_tma == kScalesByTmaAKBlockMajor;
#define KD_GEMM_LAUNCH(BM, BN, S, C, R, K)                                                   \
  if (block_m == BM && block_n == BN && stages == S && cluster == C && row == R &&           \
      a_k_block_major == K) {                                                                \
    return Launch<BM, BN, S, C, R, K>(params, map_a, map_b, map_sa, map_sb, map_d, num_ctas, \
                                      max_useful_ctas, workspace, workspace_bytes, stream);  \
  }
  KD_GEMM_INSTANCES(KD_GEMM_LAUNCH)
#undef KD_GEMM_LAUNCH
  return cudaErrorInvalidValue;
}

cudaError_t WarmGemmFp8Kernels() {
  cudaError_t err = cudaSuccess;
#define KD_GEMM_WARM(BM, BN, S, C, R, K)         \
  if (err == cudaSuccess) {                      \
    (void)ResidentCtas<BM, BN, S, C, R, K>(err); \
  }
  KD_GEMM_INSTANCES(KD_GEMM_WARM)
#undef KD_GEMM_WARM
  return err;
}

int GemmFp8ResidentCtas(int block_m, int block_n, int stages, int cluster) {
  cudaError_t err = cudaSuccess;
#define KD_GEMM_RESIDENT(BM, BN, S, C, R, K)                                     \
  if (block_m == BM && block_n == BN && stages == S && cluster == C && R == 1) { \
    const int n = ResidentCtas<BM, BN, S, C, R, K>(err);                         \
    return err == cudaSuccess ? n : 0;                                           \
  }
  KD_GEMM_INSTANCES(KD_GEMM_RESIDENT)
#undef KD_GEMM_RESIDENT
  return 0;
}

}  // namespace cuda_gemm
}  // namespace kd
