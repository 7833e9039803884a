// Blockwise-scaled FP8 GEMM for sm_90a: D = sum over 128-wide K blocks of
// (A_blk · B_blkᵀ) * a_scale * b_scale, fp32 accumulation, bf16 or f32 output.
//
// Structure (one persistent CTA per SM, 128 * (1 + kBlockM / 64) threads):
//   warpgroup 0, the producer (registers cut with setmaxnreg): warp 0 issues the TMA loads of
//     the A and B tiles of each K block into a ring of shared-memory stages, and in the 128x192
//     tile's TMA-scale instantiation (dense problems in clusters of 2 whose scale tensors allow
//     it: KernelParams::scale_tma) those of the scales too, a box of four blocks' at a time
//     (NextScaleSlot); otherwise warps 1..3 copy the scales with cp.async. All complete on the
//     stage's "full" mbarrier.
//   warpgroups 1.., the consumers (registers raised): each owns 64 rows of the tile. Per K
//     block it issues four wgmma m64nNk32 (QGMMA) into one of two fp32 partial sums, and while
//     they run it waits for the previous block's wgmmas (the other partial), multiplies that
//     partial by a_scale(row) * b_scale and adds it to the tile's fp32 accumulator
//     ("promotion": the per-block scale is applied outside the tensor core, whose own FP8
//     accumulation keeps fewer bits), then frees that block's stage. The epilogue stages the
//     tile through shared memory, while the next tile's first block runs on the tensor core,
//     and writes it out with TMA bulk stores that drain while the warpgroup goes on (bf16 D,
//     KernelParams::d_tma) or with 16-byte stores of whole rows. Tiles wider than 128 columns
//     keep one partial sum per warpgroup instead, and so does the 192x128 tile with three
//     consumer warpgroups (512 threads); their warpgroups run free (ConsumerLoopSimple).
// Tiles are walked in a grouped raster order (bands of `raster_group` M tiles) for L2 reuse;
// the producer runs ahead of the consumers across tile boundaries, so the next tile's loads
// overlap this tile's epilogue. Dense problems whose last wave of tiles is part full may split
// that wave's tiles along K ("split tail", PlanSplitTail): the slices run as separate work items
// on otherwise idle CTAs and meet through a workspace in the caller's scratch, in a fixed order.
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>

#include "kernels/cuda/gemm/consumer_one_partial.cuh"
#include "kernels/cuda/gemm/consumer_two_partials.cuh"
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/pipeline.cuh"
#include "kernels/cuda/gemm/ptx_barrier.cuh"
#include "kernels/cuda/gemm/ptx_cp_async.cuh"
#include "kernels/cuda/gemm/ptx_tma.cuh"
#include "kernels/cuda/gemm/ptx_utils.cuh"
#include "kernels/cuda/gemm/smem_layout.cuh"
#include "kernels/cuda/gemm/split_tail.cuh"
#include "kernels/cuda/gemm/tile_scheduler.cuh"
#include "kernels/cuda/gemm/trace.cuh"

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
  // epilogue without spills. At 40 or 48 producer registers ptxas spilled in the producer loops.
  // Three consumer warpgroups (192-row tiles) hold one 64-register partial each beside the
  // accumulator (128) and share what is left: 3 x 152 + 56 = 512 registers per thread slot.
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = kConsumers == 3 ? 152 : 224;
  static constexpr int kEmptyArrivals = 4 * kConsumers;  // one per consumer warp
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= 65536, "register file");
};

// ---- The kernel -----------------------------------------------------------------------------

template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats>
__global__ void __launch_bounds__(Roles<kBlockM>::kThreads, 1)
    GemmFp8Kernel(const __grid_constant__ KernelParams p, const __grid_constant__ CUtensorMap map_a,
                  const __grid_constant__ CUtensorMap map_b,
                  const __grid_constant__ CUtensorMap map_sa,
                  const __grid_constant__ CUtensorMap map_sb,
                  const __grid_constant__ CUtensorMap map_d) {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  using R = Roles<kBlockM>;
  constexpr int kTileABytes = L::kTileABytes;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint8_t* tiles_a = smem + L::kA;
  uint8_t* tiles_b = smem + L::kB;
  float* scales_a = reinterpret_cast<float*>(smem + L::kScaleA);
  float* scales_b = reinterpret_cast<float*>(smem + L::kScaleB);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kFull);
  uint64_t* empty = reinterpret_cast<uint64_t*>(smem + L::kEmpty);
  GroupTable& groups = *reinterpret_cast<GroupTable*>(smem + L::kGroups);

  constexpr int kScaleBlocksB = kBlockN > 128 ? 2 : 1;
  // The instantiation with scale rows of a TMA box loads the scales by TMA: launched for dense
  // problems with 128x128 B scales only (LaunchGemmFp8Kernel); the others copy them with
  // cp.async into rows of one float.
  constexpr bool scale_tma = kRowFloats == kScaleBoxCols;
  constexpr int scale_row = kRowFloats;  // floats per scale row
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
  // NOTE: each role builds its scheduler after setmaxnreg: built before, its fields lived across
  // the register cut, and the 192-row tile's consumers (152 registers) spilled one of them.
  const int first_work = blockIdx.x / kCluster;
  const int work_stride = gridDim.x / kCluster;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R::kProducerRegs));
    const Scheduler<kBlockM, kBlockN, kCluster> sched(p, groups, static_cast<int>(rank));
    int stage = 0;
    uint32_t phase = 0;
    if (warp == 0) {
      // The whole warp walks the loop, so that its values are warp-uniform and live in uniform
      // registers; one elected lane arms the barrier and issues the loads.
      // NOTE: walked by lane 0 alone, ptxas wrapped each TMA issue in a loop over the distinct
      // values of its operands (R2UR, BRA.U.ANY: 38 such loops in the TMA-scale kernel against 3
      // now), which lengthened a stage's refill; the warp-wide loop was 1.2-1.9% faster on dense
      // NT on an H100 (bench/RESULTS.md, session 12 run 8).
      {
        const bool leader = ElectOne();
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)));
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_b)));
        if (scale_tma) {
          asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_sa)));
          asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_sb)));
        }
        // Bytes a stage's full barrier expects: the A and B tiles and, with a box's first block,
        // the scale boxes (all of a box's bytes count, out-of-bounds ones too).
        constexpr uint32_t kTileBytes = kTileABytes + L::kTileBBytes;
        constexpr uint32_t kBoxBytes = (kBlockM + kScaleBlocksB) * kScaleBoxCols * 4;
        int scale_slot = kStages - 1;  // NextScaleSlot
        Tracer tr(p, 2, lane == 0);
        for (int t = first_work; t < sched.total; t += work_stride) {
          const Tile tile = sched.Get(t);
          for (int kb = tile.kb_begin; kb < tile.kb_end; ++kb) {
            tr.Mark(0);
            BarrierWait(&empty[stage], phase ^ 1);
            tr.Mark(1);
            tr.Next();
            const bool box =
                scale_tma && NextScaleSlot<kStages>(scale_slot, ScaleColumn<kScaleBoxCols>(kb),
                                                    kb == tile.kb_begin);
            if (leader) {
              BarrierArriveExpectTx(&full[stage], kTileBytes + (box ? kBoxBytes : 0));
              TmaLoad2d(tiles_a + stage * kTileABytes, &map_a, &full[stage], kb * kBlockK, tile.m0);
              if (box) {
                // Each CTA of a cluster loads its own: the box holding column kb (ScaleColumn),
                // rows from the tile's first row (A) or scale block (B); rows past the tensor and
                // columns past K/128 read zero.
                const int col0 = kb - ScaleColumn<kScaleBoxCols>(kb);
                TmaLoad2d(scales_a + scale_slot * (L::kScaleABytes / 4), &map_sa, &full[stage],
                          col0, tile.m0);
                TmaLoad2d(scales_b + scale_slot * (L::kScaleBBytes / 4), &map_sb, &full[stage],
                          col0, tile.n0 / 128);
              }
              constexpr int kPart = kBlockN / kCluster;  // B rows this CTA loads for all
              constexpr uint16_t kMask = static_cast<uint16_t>((1u << kCluster) - 1);
              if (p.mode == KernelMode::kMGrouped) {
                if constexpr (kCluster > 1) {
                  TmaLoad3dMulticast(tiles_b + stage * L::kTileBBytes + rank * kPart * kBlockK,
                                     &map_b, &full[stage], kb * kBlockK, tile.n0 + rank * kPart,
                                     tile.group, kMask);
                } else {
                  TmaLoad3d(tiles_b + stage * L::kTileBBytes, &map_b, &full[stage], kb * kBlockK,
                            tile.n0, tile.group);
                }
              } else if constexpr (kCluster > 1) {
                TmaLoad2dMulticast(tiles_b + stage * L::kTileBBytes + rank * kPart * kBlockK,
                                   &map_b, &full[stage], kb * kBlockK, tile.n0 + rank * kPart,
                                   kMask);
              } else {
                TmaLoad2d(tiles_b + stage * L::kTileBBytes, &map_b, &full[stage], kb * kBlockK,
                          tile.n0);
              }
            }
            __syncwarp();
            if (++stage == kStages) {
              stage = 0;
              phase ^= 1;
            }
          }
        }
      }
    } else if (!scale_tma) {
      // Warps 1 and 2 copy the A scales (half of the tile's rows each), warp 3 the B scales:
      // spread over three warps, and so over three of the SM's four schedulers, which the
      // consumer warpgroups share (each wgmma waits for all four of a warpgroup's warps).
      const int role = warp - 1;
      Tracer tr(p, 3, role == 2 && lane == 0);
      for (int t = first_work; t < sched.total; t += work_stride) {
        const Tile tile = sched.Get(t);
        for (int kb = tile.kb_begin; kb < tile.kb_end; ++kb) {
          tr.Mark(0);
          BarrierWait(&empty[stage], phase ^ 1);
          tr.Mark(1);
          tr.Next();
          if (role < 2) {
            const int scale_col = scale_row > 1 ? kb % scale_row : 0;  // ScaleColumn
            float* sa = scales_a + stage * (L::kScaleABytes / 4) +
                        role * (kBlockM / 2) * scale_row + scale_col;
#pragma unroll
            for (int i = 0; i < kBlockM / 64; ++i) {
              const int row = tile.m0 + role * (kBlockM / 2) + lane + 32 * i;
              const bool valid = row < p.m;
              CpAsync4(sa + (lane + 32 * i) * scale_row,
                       p.a_scales + (valid ? row * p.sa_row + kb : 0), valid);
            }
          } else {
            float* sb =
                scales_b + stage * (L::kScaleBBytes / 4) + (scale_row > 1 ? kb % scale_row : 0);
            if (p.b_scale_per_row) {
#pragma unroll
              for (int i = 0; i < kBlockN / 32; ++i) {
                const int col = tile.n0 + lane + 32 * i;
                const bool valid = col < p.n;
                CpAsync4(sb + (lane + 32 * i) * scale_row,
                         p.b_scales + (valid ? col * p.sb_row + kb : 0), valid);
              }
            } else if (lane < kScaleBlocksB) {
              // A wide tile's columns span two 128-column scale blocks; one past N reads zero.
              const int nb = tile.n0 / 128 + lane;
              const bool valid = nb * 128 < p.n;
              CpAsync4(sb + lane * scale_row,
                       p.b_scales + (valid ? tile.group * p.sb_group + nb * p.sb_row + kb : 0),
                       valid);
            }
          }
          CpAsyncArrive(&full[stage]);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
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
    // promotion, ptxas spilled about 1 KB of the accumulators.
    // The TMA-scale instantiation never runs with per-row B scales (LaunchGemmFp8Kernel).
    if constexpr (scale_tma) {
      ConsumerLoopSimple<kBlockM, kBlockN, kStages, kCluster, kRowFloats, false>(
          p, sched, first_work, work_stride, smem, rank, &map_d);
    } else if constexpr (kBlockN > 128 || kBlockM > 128) {
      if (p.b_scale_per_row) {
        ConsumerLoopSimple<kBlockM, kBlockN, kStages, kCluster, kRowFloats, true>(
            p, sched, first_work, work_stride, smem, rank, &map_d);
      } else {
        ConsumerLoopSimple<kBlockM, kBlockN, kStages, kCluster, kRowFloats, false>(
            p, sched, first_work, work_stride, smem, rank, &map_d);
      }
    } else if (!scale_tma && p.b_scale_per_row) {
      ConsumerLoop<kBlockM, kBlockN, kStages, kCluster, kRowFloats, !scale_tma>(
          p, sched, first_work, work_stride, smem, rank, &map_d);
    } else {
      ConsumerLoop<kBlockM, kBlockN, kStages, kCluster, kRowFloats, false>(
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
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats>
int ResidentCtas(cudaError_t& err) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices];
  auto* kernel = &GemmFp8Kernel<kBlockM, kBlockN, kStages, kCluster, kRowFloats>;
  int device = 0;
  err = cudaGetDevice(&device);
  if (err != cudaSuccess) return 0;
  int resident = device < kMaxDevices ? cached[device].load(std::memory_order_acquire) : 0;
  if (resident > 0) return resident;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>::kBytes);
  if (err != cudaSuccess) return 0;
  int sms = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return 0;
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config = LaunchConfig<kBlockM, kBlockN, kStages, kCluster, kRowFloats>(
      sms / kCluster * kCluster, &cluster, 0);
  int clusters = 0;
  err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
  if (err != cudaSuccess) return 0;
  resident = std::max(1, clusters) * kCluster;
  if (device < kMaxDevices) cached[device].store(resident, std::memory_order_release);
  return resident;
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

template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats>
cudaError_t Launch(const KernelParams& params, const CUtensorMap& map_a, const CUtensorMap& map_b,
                   const CUtensorMap& map_sa, const CUtensorMap& map_sb, const CUtensorMap& map_d,
                   int num_ctas, int max_useful, void* workspace, uint64_t workspace_bytes,
                   cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  const int resident = ResidentCtas<kBlockM, kBlockN, kStages, kCluster, kRowFloats>(err);
  if (err != cudaSuccess) return err;
  if (params.raster_group < 1 || params.raster_group > kMaxRasterGroup) {
    return cudaErrorInvalidValue;  // the band table's range (GemmConfig validates it first)
  }
  KernelParams p = params;
  p.trace = g_trace;
  if (num_ctas <= 0) {
    num_ctas = resident;
    err = PlanSplitTail<kBlockM, kBlockN, kCluster>(p, resident, num_ctas, workspace,
                                                    workspace_bytes, stream);
    if (err != cudaSuccess) return err;
    if (p.split_k == 1) num_ctas = std::min(resident, max_useful);
  } else if (num_ctas <= resident) {
    // NOTE: an owner slice spins until the other slices of its tile are done, which needs
    // every CTA resident at once: a grid larger than that is never split.
    err = PlanSplitTail<kBlockM, kBlockN, kCluster>(p, num_ctas, num_ctas, workspace,
                                                    workspace_bytes, stream);
    if (err != cudaSuccess) return err;
  }
  num_ctas = std::max(kCluster, num_ctas / kCluster * kCluster);
  SetScheduleDivisors<kBlockM, kBlockN, kCluster>(p);
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config =
      LaunchConfig<kBlockM, kBlockN, kStages, kCluster, kRowFloats>(num_ctas, &cluster, stream);
  return cudaLaunchKernelEx(&config,
                            &GemmFp8Kernel<kBlockM, kBlockN, kStages, kCluster, kRowFloats>, p,
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
// instantiation of the tile, TmaScales; clusters of 2 only: unclustered, TMA scale loads made
// 128x192 7-10% slower on an H100, bench/RESULTS.md).
#define KD_GEMM_INSTANCES(X) \
  X(128, 128, 4, 1, 1)       \
  X(128, 128, 5, 1, 1)       \
  X(128, 128, 6, 1, 1)       \
  X(128, 128, 5, 2, 1)       \
  X(128, 128, 6, 2, 1)       \
  X(128, 192, 4, 1, 1)       \
  X(128, 192, 4, 2, 1)       \
  X(128, 192, 4, 2, 4)       \
  X(128, 64, 6, 1, 1)        \
  X(128, 64, 8, 1, 1)        \
  X(128, 64, 8, 2, 1)        \
  X(64, 64, 8, 1, 1)         \
  X(64, 32, 16, 1, 1)        \
  X(192, 128, 4, 1, 1)       \
  X(192, 128, 4, 2, 1)

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
  if (params.scale_tma && (params.mode != KernelMode::kDense || params.b_scale_per_row ||
                           cluster != 2 || !TmaScales(block_m, block_n, stages))) {
    return cudaErrorInvalidValue;
  }
  // TMA stores: dense and M-grouped problems with bf16 output written, not accumulated.
  if (params.d_tma && (params.mode == KernelMode::kKGrouped || params.d_f32 || params.accumulate ||
                       !TileStoresByTma(block_n))) {
    return cudaErrorInvalidValue;
  }
  const int row = params.scale_tma ? kScaleBoxCols : 1;
#define KD_GEMM_LAUNCH(BM, BN, S, C, R)                                                   \
  if (block_m == BM && block_n == BN && stages == S && cluster == C && row == R) {        \
    return Launch<BM, BN, S, C, R>(params, map_a, map_b, map_sa, map_sb, map_d, num_ctas, \
                                   max_useful_ctas, workspace, workspace_bytes, stream);  \
  }
  KD_GEMM_INSTANCES(KD_GEMM_LAUNCH)
#undef KD_GEMM_LAUNCH
  return cudaErrorInvalidValue;
}

int GemmFp8ResidentCtas(int block_m, int block_n, int stages, int cluster) {
  cudaError_t err = cudaSuccess;
#define KD_GEMM_RESIDENT(BM, BN, S, C, R)                                        \
  if (block_m == BM && block_n == BN && stages == S && cluster == C && R == 1) { \
    const int n = ResidentCtas<BM, BN, S, C, R>(err);                            \
    return err == cudaSuccess ? n : 0;                                           \
  }
  KD_GEMM_INSTANCES(KD_GEMM_RESIDENT)
#undef KD_GEMM_RESIDENT
  return 0;
}

}  // namespace cuda_gemm
}  // namespace kd
