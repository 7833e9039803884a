// Blockwise-scaled FP8 GEMM for sm_90a: D = sum over 128-wide K blocks of
// (A_blk · B_blkᵀ) * a_scale * b_scale, fp32 accumulation, bf16 or f32 output.
//
// Structure (one persistent CTA per SM, 128 * (1 + kBlockM / 64) threads):
//   warpgroup 0, the producer (registers cut with setmaxnreg): warp 0 issues the TMA loads of
//     the A and B tiles of each K block into a ring of shared-memory stages; warp 1 copies the
//     matching scales with cp.async. Both complete on the stage's "full" mbarrier.
//   warpgroups 1.., the consumers (registers raised): each owns 64 rows of the tile. Per K
//     block it issues four wgmma m64nNk32 (QGMMA) into a fresh fp32 partial sum, waits for
//     them, multiplies the partial by a_scale(row) * b_scale and adds it to the tile's fp32
//     accumulator ("promotion": the per-block scale is applied outside the tensor core, whose
//     own FP8 accumulation keeps fewer bits), then frees the stage. While one warpgroup
//     promotes, the others' wgmmas keep the tensor core busy.
// Tiles are walked in a grouped raster order (bands of `raster_group` M tiles) for L2 reuse;
// the producer runs ahead of the consumers across tile boundaries, so the next tile's loads
// overlap this tile's epilogue.
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>

#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/wgmma_ops.cuh"

namespace kd {
namespace cuda_gemm {
namespace {

// Producer warp 1 (32 lanes, one cp.async arrive each) plus the TMA thread's expect_tx arrive.
constexpr int kFullArrivals = 1 + 32;

// Threads and the setmaxnreg split for a tile of kBlockM rows (64 per consumer warpgroup; 128
// is the only tile height built: a third consumer warpgroup left too few registers and spilled).
// The register file is 64K 32-bit registers per SM and one CTA runs per SM.
template <int kBlockM>
struct Roles {
  static constexpr int kConsumers = kBlockM / 64;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  // NOTE: at 40 producer registers ptxas spilled in the producer loops; 56 leaves the two
  // consumer warpgroups 224, enough for the 64 + 64 accumulator registers without spills.
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = 224;
  static constexpr int kEmptyArrivals = 4 * kConsumers;  // one per consumer warp
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= 65536, "register file");
};

// ---- PTX wrappers ---------------------------------------------------------------------------

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void BarrierInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(bar)), "r"(count));
}

__device__ __forceinline__ void BarrierWait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = SmemAddr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

__device__ __forceinline__ void BarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SmemAddr(bar)) : "memory");
}

__device__ __forceinline__ void BarrierArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void TmaLoad2d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                          int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(SmemAddr(bar))
      : "memory");
}

__device__ __forceinline__ void TmaLoad3d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                          int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(SmemAddr(bar))
      : "memory");
}

// The B half this CTA loads lands in every CTA of the cluster (`mask`), completing on the
// barrier at the same shared-memory offset in each.
__device__ __forceinline__ void TmaLoad2dMulticast(void* dst, const CUtensorMap* map,
                                                   uint64_t* bar, int c0, int c1, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(SmemAddr(bar)), "h"(mask)
      : "memory");
}

// Arrives on the barrier at `bar`'s offset in CTA `cta` of this cluster.
__device__ __forceinline__ void BarrierArriveCluster(uint64_t* bar, uint32_t cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(SmemAddr(bar)),
      "r"(cta)
      : "memory");
}

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" :::
                   "memory");
}

// 4-byte asynchronous copy; `valid` false writes zero without reading `src`.
__device__ __forceinline__ void CpAsync4(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}

// The barrier counts one arrival once this thread's earlier cp.async copies have landed.
__device__ __forceinline__ void CpAsyncArrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(SmemAddr(bar))
               : "memory");
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Keeps the compiler from moving reads of an accumulator register across a wgmma wait.
__device__ __forceinline__ void FenceOperand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Shared-memory matrix descriptor of a K-major tile written by TMA with 128-byte swizzle:
// rows of 128 bytes, 8-row groups 1024 bytes apart (the stride byte offset).
__device__ __forceinline__ uint64_t SmemDesc(uint32_t addr) {
  uint64_t desc = (addr & 0x3FFFF) >> 4;
  desc |= uint64_t{1} << 16;            // leading byte offset: unused for swizzled K-major
  desc |= uint64_t{1024 >> 4} << 32;    // stride byte offset
  desc |= uint64_t{1} << 62;            // 128-byte swizzle
  return desc;
}

// ---- Tile order -----------------------------------------------------------------------------

struct Tile {
  int m0 = 0;        // first row of A (global row; for M-grouped inside the group's rows)
  int n0 = 0;        // first output column
  int row_end = 0;   // rows at or past this are not stored
  int group = 0;
  int kb_begin = 0;  // K blocks [kb_begin, kb_end)
  int kb_end = 0;
};

struct GroupTable {
  int begin[kMaxGroups + 1];  // begin[g]..begin[g+1] are group g's rows (clamped)
  int tile_start[kMaxGroups + 1];
};

__device__ __forceinline__ void Raster(int t, int num_m, int num_n, int band, int& mi, int& ni) {
  const int per_band = band * num_n;
  const int first_m = (t / per_band) * band;
  const int rows = min(band, num_m - first_m);
  const int r = t % per_band;
  mi = first_m + r % rows;
  ni = r / rows;
}

// Work item t of this CTA. With a cluster of kCluster CTAs (dense mode only), a work item is
// kCluster M-adjacent tiles sharing one N tile; CTA `rank` of the cluster takes the rank-th.
template <int kBlockM, int kBlockN, int kCluster>
struct Scheduler {
  const KernelParams& p;
  const GroupTable& groups;
  int rank;
  int num_n;
  int num_m;
  int total;

  __device__ Scheduler(const KernelParams& params, const GroupTable& table, int cta_rank)
      : p(params), groups(table), rank(cta_rank) {
    num_n = (p.n + kBlockN - 1) / kBlockN;
    num_m = (p.m + kBlockM - 1) / kBlockM;
    if (p.mode == KernelMode::kMGrouped) total = groups.tile_start[p.num_groups];
    else if (p.mode == KernelMode::kKGrouped) total = p.num_groups * num_m * num_n;
    else total = (num_m + kCluster - 1) / kCluster * num_n;
  }

  __device__ Tile Get(int t) const {
    Tile tile;
    int mi = 0, ni = 0;
    if (p.mode == KernelMode::kMGrouped) {
      int lo = 0, hi = p.num_groups - 1;  // the last g with tile_start[g] <= t
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (groups.tile_start[mid] <= t) lo = mid;
        else hi = mid - 1;
      }
      const int g = lo;
      const int rows = groups.begin[g + 1] - groups.begin[g];
      Raster(t - groups.tile_start[g], (rows + kBlockM - 1) / kBlockM, num_n, p.raster_group, mi,
             ni);
      tile.group = g;
      tile.m0 = groups.begin[g] + mi * kBlockM;
      tile.row_end = groups.begin[g + 1];
      tile.kb_end = p.k / kBlockK;
    } else if (p.mode == KernelMode::kKGrouped) {
      const int per_group = num_m * num_n;
      const int g = t / per_group;
      Raster(t % per_group, num_m, num_n, p.raster_group, mi, ni);
      tile.group = g;
      tile.m0 = mi * kBlockM;
      tile.row_end = p.m;
      tile.kb_begin = groups.begin[g] / kBlockK;
      tile.kb_end = groups.begin[g + 1] / kBlockK;
    } else {
      Raster(t, (num_m + kCluster - 1) / kCluster, num_n, p.raster_group, mi, ni);
      tile.m0 = (mi * kCluster + rank) * kBlockM;
      tile.row_end = p.m;
      tile.kb_end = p.k / kBlockK;
    }
    tile.n0 = ni * kBlockN;
    return tile;
  }
};

// Reads and clamps the group ends (non-decreasing, within [0, rows]) and, for M-grouped, counts
// each group's tiles. Called by the whole CTA; ends with __syncthreads.
template <int kBlockM, int kBlockN>
__device__ void BuildGroupTable(const KernelParams& p, GroupTable& table) {
  const int rows = p.mode == KernelMode::kKGrouped ? p.k : p.m;
  for (int g = threadIdx.x; g < p.num_groups; g += blockDim.x) {
    const int64_t end = p.group_ends_i64 ? static_cast<const int64_t*>(p.group_ends)[g]
                                         : static_cast<const int32_t*>(p.group_ends)[g];
    table.begin[g + 1] = static_cast<int>(max(int64_t{0}, min(end, int64_t{rows})));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int num_n = (p.n + kBlockN - 1) / kBlockN;
    table.begin[0] = 0;
    table.tile_start[0] = 0;
    for (int g = 0; g < p.num_groups; ++g) {
      table.begin[g + 1] = max(table.begin[g + 1], table.begin[g]);
      const int size = table.begin[g + 1] - table.begin[g];
      table.tile_start[g + 1] = table.tile_start[g] + (size + kBlockM - 1) / kBlockM * num_n;
    }
  }
  __syncthreads();
}

// ---- Epilogue -------------------------------------------------------------------------------

__device__ __forceinline__ void StorePair(const KernelParams& p, char* base, int64_t offset,
                                          float v0, float v1, bool two) {
  if (p.d_f32) {
    float* d = reinterpret_cast<float*>(base) + offset;
    if (p.accumulate) {
      v0 += d[0];
      if (two) v1 += d[1];
    }
    if (two && p.d_pairs_aligned) {
      *reinterpret_cast<float2*>(d) = make_float2(v0, v1);
    } else {
      d[0] = v0;
      if (two) d[1] = v1;
    }
  } else {
    __nv_bfloat16* d = reinterpret_cast<__nv_bfloat16*>(base) + offset;
    if (two && p.d_pairs_aligned) {
      *reinterpret_cast<__nv_bfloat162*>(d) = __floats2bfloat162_rn(v0, v1);
    } else {
      d[0] = __float2bfloat16_rn(v0);
      if (two) d[1] = __float2bfloat16_rn(v1);
    }
  }
}

// ---- Consumer pieces ------------------------------------------------------------------------

template <int kStages>
__device__ __forceinline__ void Advance(int& stage, uint32_t& phase) {
  if (++stage == kStages) {
    stage = 0;
    phase ^= 1;
  }
}

template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Issues one K block (four k32 steps) for this warpgroup's 64 rows and all kBlockN columns into
// `part` (overwritten), as one commit group.
template <int kBlockM, int kBlockN>
__device__ __forceinline__ void IssueBlock(float (&part)[kBlockN / 2], const uint8_t* tiles_a,
                                           const uint8_t* tiles_b, int stage, int consumer) {
  const uint32_t a_addr = SmemAddr(tiles_a + stage * kBlockM * kBlockK) + consumer * 64 * kBlockK;
  const uint32_t b_addr = SmemAddr(tiles_b + stage * kBlockN * kBlockK);
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) FenceOperand(part[i]);
  WgmmaFence();
#pragma unroll
  for (int k = 0; k < kBlockK / 32; ++k) {
    if constexpr (kBlockN == 128) {
      WgmmaM64N128K32(part, SmemDesc(a_addr + 32 * k), SmemDesc(b_addr + 32 * k), k > 0);
    } else {
      WgmmaM64N64K32(part, SmemDesc(a_addr + 32 * k), SmemDesc(b_addr + 32 * k), k > 0);
    }
  }
  WgmmaCommit();
}

// acc += part * a_scale(row) * b_scale (per column for 1x128 B scales), once the wgmmas that
// wrote `part` completed.
template <int kBlockN>
__device__ __forceinline__ void Promote(float (&acc)[kBlockN / 2], float (&part)[kBlockN / 2],
                                        const float* sa, const float* sb, int b_scale_per_row,
                                        int row_in_tile, int col_in_frag) {
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) FenceOperand(part[i]);
  const float scale_a0 = sa[row_in_tile];
  const float scale_a1 = sa[row_in_tile + 8];
  if (b_scale_per_row) {
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      const float2 b = *reinterpret_cast<const float2*>(sb + 8 * j + col_in_frag);
      acc[4 * j + 0] += part[4 * j + 0] * (scale_a0 * b.x);
      acc[4 * j + 1] += part[4 * j + 1] * (scale_a0 * b.y);
      acc[4 * j + 2] += part[4 * j + 2] * (scale_a1 * b.x);
      acc[4 * j + 3] += part[4 * j + 3] * (scale_a1 * b.y);
    }
  } else {
    const float scale0 = scale_a0 * sb[0];
    const float scale1 = scale_a1 * sb[0];
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      acc[4 * j + 0] += part[4 * j + 0] * scale0;
      acc[4 * j + 1] += part[4 * j + 1] * scale0;
      acc[4 * j + 2] += part[4 * j + 2] * scale1;
      acc[4 * j + 3] += part[4 * j + 3] * scale1;
    }
  }
}

// ---- The kernel -----------------------------------------------------------------------------

template <int kBlockM, int kBlockN, int kStages>
struct SmemLayout {
  static constexpr int kTileABytes = kBlockM * kBlockK;  // e4m3: one byte per element
  static constexpr int kTileBBytes = kBlockN * kBlockK;
  static constexpr int kA = 0;
  static constexpr int kB = kA + kStages * kTileABytes;
  static constexpr int kScaleA = kB + kStages * kTileBBytes;
  static constexpr int kScaleB = kScaleA + kStages * kBlockM * 4;
  static constexpr int kFull = kScaleB + kStages * kBlockN * 4;
  static constexpr int kEmpty = kFull + kStages * 8;
  static constexpr int kGroups = kEmpty + kStages * 8;
  // + 1024 so that the base can be rounded up to the 1024-byte alignment of 128-byte swizzle.
  static constexpr int kBytes = kGroups + static_cast<int>(sizeof(GroupTable)) + 1024;
};

template <int kBlockM, int kBlockN, int kStages, int kCluster>
__global__ void __launch_bounds__(Roles<kBlockM>::kThreads, 1)
    GemmFp8Kernel(const __grid_constant__ KernelParams p,
                  const __grid_constant__ CUtensorMap map_a,
                  const __grid_constant__ CUtensorMap map_b) {
  using L = SmemLayout<kBlockM, kBlockN, kStages>;
  using R = Roles<kBlockM>;
  constexpr int kTileABytes = L::kTileABytes;
  constexpr int kAcc = kBlockN / 2;  // fp32 accumulator registers per thread for m64nN
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint8_t* tiles_a = smem + L::kA;
  uint8_t* tiles_b = smem + L::kB;
  float* scales_a = reinterpret_cast<float*>(smem + L::kScaleA);
  float* scales_b = reinterpret_cast<float*>(smem + L::kScaleB);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kFull);
  uint64_t* empty = reinterpret_cast<uint64_t*>(smem + L::kEmpty);
  GroupTable& groups = *reinterpret_cast<GroupTable*>(smem + L::kGroups);

  const int warpgroup = threadIdx.x / 128;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      BarrierInit(&full[s], kFullArrivals);
      BarrierInit(&empty[s], R::kEmptyArrivals * kCluster);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  if (p.mode != KernelMode::kDense) {
    BuildGroupTable<kBlockM, kBlockN>(p, groups);
  } else {
    __syncthreads();
  }
  // The peer CTA multicasts into this CTA's stages and arrives on its barriers: both must be
  // initialised cluster-wide first.
  if constexpr (kCluster > 1) ClusterSync();
  const uint32_t rank = kCluster > 1 ? ClusterRank() : 0;
  const Scheduler<kBlockM, kBlockN, kCluster> sched(p, groups, static_cast<int>(rank));
  const int first_work = blockIdx.x / kCluster;
  const int work_stride = gridDim.x / kCluster;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R::kProducerRegs));
    int stage = 0;
    uint32_t phase = 0;
    if (warp == 0) {
      if (lane == 0) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)));
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_b)));
        for (int t = first_work; t < sched.total; t += work_stride) {
          const Tile tile = sched.Get(t);
          for (int kb = tile.kb_begin; kb < tile.kb_end; ++kb) {
            BarrierWait(&empty[stage], phase ^ 1);
            BarrierArriveExpectTx(&full[stage], kTileABytes + L::kTileBBytes);
            TmaLoad2d(tiles_a + stage * kTileABytes, &map_a, &full[stage], kb * kBlockK, tile.m0);
            if (p.mode == KernelMode::kMGrouped) {
              TmaLoad3d(tiles_b + stage * L::kTileBBytes, &map_b, &full[stage], kb * kBlockK,
                        tile.n0, tile.group);
            } else if constexpr (kCluster > 1) {
              constexpr int kPart = kBlockN / kCluster;  // B rows this CTA loads for all
              TmaLoad2dMulticast(tiles_b + stage * L::kTileBBytes + rank * kPart * kBlockK,
                                 &map_b, &full[stage], kb * kBlockK, tile.n0 + rank * kPart,
                                 static_cast<uint16_t>((1u << kCluster) - 1));
            } else {
              TmaLoad2d(tiles_b + stage * L::kTileBBytes, &map_b, &full[stage], kb * kBlockK,
                        tile.n0);
            }
            if (++stage == kStages) {
              stage = 0;
              phase ^= 1;
            }
          }
        }
      }
    } else if (warp == 1) {
      for (int t = first_work; t < sched.total; t += work_stride) {
        const Tile tile = sched.Get(t);
        for (int kb = tile.kb_begin; kb < tile.kb_end; ++kb) {
          BarrierWait(&empty[stage], phase ^ 1);
          float* sa = scales_a + stage * kBlockM;
          float* sb = scales_b + stage * kBlockN;
#pragma unroll
          for (int i = 0; i < kBlockM / 32; ++i) {
            const int row = tile.m0 + lane + 32 * i;
            const bool valid = row < p.m;
            CpAsync4(sa + lane + 32 * i, p.a_scales + (valid ? row * p.sa_row + kb : 0), valid);
          }
          if (p.b_scale_per_row) {
#pragma unroll
            for (int i = 0; i < kBlockN / 32; ++i) {
              const int col = tile.n0 + lane + 32 * i;
              const bool valid = col < p.n;
              CpAsync4(sb + lane + 32 * i, p.b_scales + (valid ? col * p.sb_row + kb : 0), valid);
            }
          } else if (lane == 0) {
            CpAsync4(sb, p.b_scales + tile.group * p.sb_group + (tile.n0 / 128) * p.sb_row + kb,
                     true);
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
    const int consumer = warpgroup - 1;
    const int row_in_tile = consumer * 64 + (warp % 4) * 16 + lane / 4;
    const int col_in_frag = 2 * (lane % 4);
    int stage = 0;
    uint32_t phase = 0;
    for (int t = first_work; t < sched.total; t += work_stride) {
      const Tile tile = sched.Get(t);
      float acc[kAcc];
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
      float part[kAcc];
      for (int kb = tile.kb_begin; kb < tile.kb_end; ++kb) {
        BarrierWait(&full[stage], phase);
        IssueBlock<kBlockM, kBlockN>(part, tiles_a, tiles_b, stage, consumer);
        WgmmaWait<0>();
        Promote<kBlockN>(acc, part, scales_a + stage * kBlockM, scales_b + stage * kBlockN,
                         p.b_scale_per_row, row_in_tile, col_in_frag);
        __syncwarp();
        if (lane == 0) {
          if constexpr (kCluster > 1) {
            // Both CTAs' producers write this stage (their B halves): free it in each.
            BarrierArrive(&empty[stage]);
#pragma unroll
            for (int c = 1; c < kCluster; ++c) {
              BarrierArriveCluster(&empty[stage], (rank + c) % kCluster);
            }
          } else {
            BarrierArrive(&empty[stage]);
          }
        }
        Advance<kStages>(stage, phase);
      }

      // K-grouped writes one output matrix per group; the other modes index rows globally.
      char* d_base = static_cast<char*>(p.d);
      if (p.mode == KernelMode::kKGrouped) d_base += tile.group * p.d_group * (p.d_f32 ? 4 : 2);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = tile.m0 + row_in_tile + 8 * h;
        if (row >= tile.row_end) continue;
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) {
          const int col = tile.n0 + 8 * j + col_in_frag;
          if (col >= p.n) continue;
          StorePair(p, d_base, row * p.d_row + col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1],
                    col + 1 < p.n);
        }
      }
    }
  }
  // No CTA may leave while its peer can still arrive on its barriers or write its stages.
  if constexpr (kCluster > 1) {
    __syncwarp();
    ClusterSync();
  }
}

template <int kBlockM, int kBlockN, int kStages, int kCluster>
cudaLaunchConfig_t LaunchConfig(int num_ctas, cudaLaunchAttribute* cluster, cudaStream_t stream) {
  cluster->id = cudaLaunchAttributeClusterDimension;
  cluster->val.clusterDim.x = kCluster;
  cluster->val.clusterDim.y = 1;
  cluster->val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(num_ctas, 1, 1);
  config.blockDim = dim3(Roles<kBlockM>::kThreads, 1, 1);
  config.dynamicSmemBytes = SmemLayout<kBlockM, kBlockN, kStages>::kBytes;
  config.stream = stream;
  config.attrs = cluster;
  config.numAttrs = 1;
  return config;
}

// CTAs of this instantiation that fit on the current device at once (whole clusters), after
// opting in to its shared memory; cached per device. 0 with `err` set on failure.
template <int kBlockM, int kBlockN, int kStages, int kCluster>
int ResidentCtas(cudaError_t& err) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices];
  auto* kernel = &GemmFp8Kernel<kBlockM, kBlockN, kStages, kCluster>;
  int device = 0;
  err = cudaGetDevice(&device);
  if (err != cudaSuccess) return 0;
  int resident = device < kMaxDevices ? cached[device].load(std::memory_order_acquire) : 0;
  if (resident > 0) return resident;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            SmemLayout<kBlockM, kBlockN, kStages>::kBytes);
  if (err != cudaSuccess) return 0;
  int sms = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return 0;
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config =
      LaunchConfig<kBlockM, kBlockN, kStages, kCluster>(sms / kCluster * kCluster, &cluster, 0);
  int clusters = 0;
  err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
  if (err != cudaSuccess) return 0;
  resident = std::max(1, clusters) * kCluster;
  if (device < kMaxDevices) cached[device].store(resident, std::memory_order_release);
  return resident;
}

// `num_ctas` <= 0 launches as many CTAs as fit at once; otherwise exactly that many (rounded to
// whole clusters).
template <int kBlockM, int kBlockN, int kStages, int kCluster>
cudaError_t Launch(const KernelParams& params, const CUtensorMap& map_a, const CUtensorMap& map_b,
                   int num_ctas, int max_useful, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  const int resident = ResidentCtas<kBlockM, kBlockN, kStages, kCluster>(err);
  if (err != cudaSuccess) return err;
  if (num_ctas <= 0) num_ctas = std::min(resident, max_useful);
  num_ctas = std::max(kCluster, num_ctas / kCluster * kCluster);
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config =
      LaunchConfig<kBlockM, kBlockN, kStages, kCluster>(num_ctas, &cluster, stream);
  return cudaLaunchKernelEx(&config, &GemmFp8Kernel<kBlockM, kBlockN, kStages, kCluster>, params,
                            map_a, map_b);
}

}  // namespace

int GemmFp8SmemBytes(int block_m, int block_n, int stages) {
  const int per_stage = (block_m + block_n) * kBlockK + (block_m + block_n) * 4 + 16;
  return stages * per_stage + static_cast<int>(sizeof(GroupTable)) + 1024;
}

#define KD_GEMM_INSTANCES(X) \
  X(128, 128, 4, 1)            \
  X(128, 128, 5, 1)            \
  X(128, 128, 6, 1)            \
  X(128, 128, 5, 2)            \
  X(128, 128, 6, 2)            \
  X(128, 64, 6, 1)             \
  X(128, 64, 8, 1)             \
  X(128, 64, 8, 2)

cudaError_t LaunchGemmFp8Kernel(const KernelParams& params, const CUtensorMap& map_a,
                                const CUtensorMap& map_b, int block_m, int block_n, int stages,
                                int cluster, int num_ctas, int max_useful_ctas,
                                cudaStream_t stream) {
#define KD_GEMM_LAUNCH(BM, BN, S, C)                                                          \
  if (block_m == BM && block_n == BN && stages == S && cluster == C) {                        \
    return Launch<BM, BN, S, C>(params, map_a, map_b, num_ctas, max_useful_ctas, stream);     \
  }
  KD_GEMM_INSTANCES(KD_GEMM_LAUNCH)
#undef KD_GEMM_LAUNCH
  return cudaErrorInvalidValue;
}

int GemmFp8ResidentCtas(int block_m, int block_n, int stages, int cluster) {
  cudaError_t err = cudaSuccess;
#define KD_GEMM_RESIDENT(BM, BN, S, C)                                \
  if (block_m == BM && block_n == BN && stages == S && cluster == C) { \
    const int n = ResidentCtas<BM, BN, S, C>(err);                    \
    return err == cudaSuccess ? n : 0;                                \
  }
  KD_GEMM_INSTANCES(KD_GEMM_RESIDENT)
#undef KD_GEMM_RESIDENT
  return 0;
}

}  // namespace cuda_gemm
}  // namespace kd
