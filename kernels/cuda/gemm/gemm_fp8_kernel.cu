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

#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/wgmma_ops.cuh"

namespace kd {
namespace cuda_gemm {
namespace {

// Arrivals on a full barrier: the TMA thread's expect_tx arrive, plus, when the scales are
// copied with cp.async, one per lane of producer warps 1..3.
constexpr int kFullArrivals = 1 + 3 * 32;
constexpr int kFullArrivalsTma = 1;

// Dynamic shared memory a CTA may opt in to on sm_90 (227 KB).
constexpr int kMaxSmemBytes = 232448;

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

// ---- PTX wrappers ---------------------------------------------------------------------------

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void BarrierInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(bar)), "r"(count));
}

// Spins until the barrier's phase with this parity has completed. The loop stays inside one
// asm block: as a C++ loop on a per-thread flag, ptxas took the wait for a divergent path and
// serialized wgmmas still in flight across it (C7518).
__device__ __forceinline__ void BarrierWait(uint32_t addr, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void BarrierWait(uint64_t* bar, uint32_t parity) {
  BarrierWait(SmemAddr(bar), parity);
}

__device__ __forceinline__ void BarrierArrive(uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(addr) : "memory");
}

__device__ __forceinline__ void BarrierArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void TmaLoad2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                          int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(SmemAddr(bar))
      : "memory");
}

__device__ __forceinline__ void TmaLoad3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                          int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(SmemAddr(bar))
      : "memory");
}

// The B half this CTA loads lands in every CTA of the cluster (`mask`), completing on the
// barrier at the same shared-memory offset in each.
__device__ __forceinline__ void TmaLoad2dMulticast(void* dst, const CUtensorMap* map, uint64_t* bar,
                                                   int c0, int c1, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(SmemAddr(bar)), "h"(mask)
      : "memory");
}

__device__ __forceinline__ void TmaLoad3dMulticast(void* dst, const CUtensorMap* map, uint64_t* bar,
                                                   int c0, int c1, int c2, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(SmemAddr(bar)), "h"(mask)
      : "memory");
}

// Bulk-tensor store of one box of `map` from shared address `src` to global coordinates (c0,
// c1), as its own bulk group, issued by the threads where `pred` holds. Predicated, not
// branched: the epilogue runs with the next block's wgmmas in flight, and ptxas serializes
// wgmmas across a branch it cannot prove warp-uniform (C7518). Out-of-bounds cells are not
// written.
__device__ __forceinline__ void TmaStore2d(const CUtensorMap* map, uint32_t src, int c0, int c1,
                                           bool pred) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.u32 p, %4, 0;\n"
      "@p cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
      "@p cp.async.bulk.commit_group;\n"
      "}\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(c1), "r"(src), "r"(static_cast<uint32_t>(pred))
      : "memory");
}

// Waits (where `pred` holds) until at most kPending of this thread's bulk groups are still
// reading their shared-memory source.
template <int kPending>
__device__ __forceinline__ void BulkWaitRead(bool pred) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.u32 p, %1, 0;\n"
      "@p cp.async.bulk.wait_group.read %0;\n"
      "}\n" ::"n"(kPending),
      "r"(static_cast<uint32_t>(pred))
      : "memory");
}

// Waits (where `pred` holds) until every bulk group of this thread has completed.
__device__ __forceinline__ void BulkWaitAll(bool pred) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.u32 p, %0, 0;\n"
      "@p cp.async.bulk.wait_group 0;\n"
      "}\n" ::"r"(static_cast<uint32_t>(pred))
      : "memory");
}

// Arrives on the barrier at shared address `addr`'s offset in CTA `cta` of this cluster.
__device__ __forceinline__ void BarrierArriveCluster(uint32_t addr, uint32_t cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(addr),
      "r"(cta)
      : "memory");
}

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
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

// ---- Clock trace (a measuring build: KD_GEMM_TRACE; see gemm_fp8_kernel.h) --------------------

__device__ __forceinline__ uint32_t ClockNow() {
  uint32_t c;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(c)::"memory");
  return c;
}

// One thread's marks: predicated stores (no branch, so no divergent path across wgmmas).
struct Tracer {
  uint32_t* base;
  int on;
  int i = 0;
  __device__ Tracer(const KernelParams& p, int slot, bool thread_ok) {
    on = p.trace != nullptr && thread_ok && blockIdx.x < 2;
    base = p.trace + (on ? (blockIdx.x * 4 + slot) * kTraceIters * kTraceMarks : 0);
  }
  __device__ __forceinline__ void Mark(int j) {
#ifdef KD_GEMM_TRACE
    const uint32_t v = ClockNow();
    const int ok = on && i < kTraceIters;
    uint32_t* ptr = base + (ok ? i * kTraceMarks + j : 0);
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.s32 p, %2, 0;\n"
        "@p st.global.u32 [%0], %1;\n"
        "}\n" ::"l"(ptr),
        "r"(v), "r"(ok)
        : "memory");
#endif
  }
  __device__ __forceinline__ void Next() { ++i; }
};

// Shared-memory matrix descriptor of a K-major tile written by TMA with 128-byte swizzle:
// rows of 128 bytes, 8-row groups 1024 bytes apart (the stride byte offset).
// The low word holds the address / 16 (14 bits: shared addresses stay below 2^18) and the
// leading byte offset (1: unused for swizzled K-major); the high word the stride byte offset and
// the swizzle mode, the same for every tile.
constexpr uint32_t kDescHi = (1024 >> 4) | (1u << 30);  // stride 1024 bytes, 128-byte swizzle

__device__ __forceinline__ uint32_t SmemDescLo(uint32_t addr) { return (addr >> 4) | (1u << 16); }

__device__ __forceinline__ uint64_t SmemDesc(uint32_t lo) {
  uint64_t desc;
  asm("mov.b64 %0, {%1, %2};" : "=l"(desc) : "r"(lo), "r"(kDescHi));
  return desc;
}

// ---- Tile order -----------------------------------------------------------------------------

struct Tile {
  int m0 = 0;       // first row of A (global row; M-grouped: from the group's first row; a
                    // cluster's last tile may start at or past row_end, and then stores nothing)
  int n0 = 0;       // first output column
  int row_end = 0;  // rows at or past this are not stored
  int group = 0;
  int kb_begin = 0;  // K blocks [kb_begin, kb_end)
  int kb_end = 0;
  int slice = 0;      // split tail: this item's K slice of the tile, 0..slices-1
  int slices = 1;     // 1: the whole tile
  int tail_tile = 0;  // split tail: the tile's index among the split tiles
};

struct GroupTable {
  int begin[kMaxGroups + 1];  // begin[g]..begin[g+1] are group g's rows (clamped)
  int tile_start[kMaxGroups + 1];
};

// FastDivs by every raster band height, 1..kMaxRasterGroup.
struct BandDivs {
  FastDiv div[kMaxRasterGroup + 1];
};
constexpr BandDivs MakeBandDivs() {
  BandDivs t{};
  for (int d = 1; d <= kMaxRasterGroup; ++d) t.div[d].Init(d);
  return t;
}
__constant__ BandDivs kBandDivs = MakeBandDivs();

// Work item t's place in the tile order: bands of p.raster_group work-item rows (of `rows_total`),
// each walked column by column. No `/`: the band through the launcher's FastDiv, the position in
// it through the launcher's FastDivs by the band height and the last band's (kTable false: dense
// and K-grouped), or through the table (M-grouped, whose groups end in bands of any height).
// NOTE: the table is in constant memory, whose first read in a launch misses; the dense path
// keeps it off the first tile's critical path.
template <bool kTable>
__device__ __forceinline__ void Raster(const KernelParams& p, int t, int rows_total, int& mi,
                                       int& ni) {
  const int band = p.div_band_items.Div(t);
  const int first_m = band * p.raster_group;
  const int r = p.div_band_items.Mod(t, band);
  const int rows = min(p.raster_group, rows_total - first_m);
  int q;
  if constexpr (kTable) {
    q = kBandDivs.div[rows].Div(r);
  } else {
    const bool full = rows == p.raster_group;
    FastDiv f;
    f.m = full ? p.div_band.m : p.div_last_band.m;
    f.s = full ? p.div_band.s : p.div_last_band.s;
    q = f.Div(r);
  }
  mi = first_m + r - q * rows;
  ni = q;
}

// Work item t of this CTA. With a cluster of kCluster CTAs (dense and M-grouped modes), a work
// item is kCluster M-adjacent tiles sharing one N tile (M-grouped: of one group, so one expert's
// B tile); CTA `rank` of the cluster takes the rank-th. A tile at or past the rows' end (an odd
// tile count) still runs its K blocks, as its B half and stage releases are the peer's, but
// stores nothing: its A rows read as zero past the tensor (TMA) and as the next group's rows
// before it, and its A scales as zero past the tensor.
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
    if (p.mode == KernelMode::kMGrouped)
      total = groups.tile_start[p.num_groups];
    else if (p.mode == KernelMode::kKGrouped)
      total = p.num_groups * num_m * num_n;
    else
      total =
          p.split_first + ((num_m + kCluster - 1) / kCluster * num_n - p.split_first) * p.split_k;
  }

  __device__ Tile Get(int t) const {
    Tile tile;
    int mi = 0, ni = 0;
    if (p.mode == KernelMode::kMGrouped) {
      int lo = 0, hi = p.num_groups - 1;  // the last g with tile_start[g] <= t
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (groups.tile_start[mid] <= t)
          lo = mid;
        else
          hi = mid - 1;
      }
      const int g = lo;
      const int rows = groups.begin[g + 1] - groups.begin[g];
      const int m_tiles = (rows + kBlockM - 1) / kBlockM;
      Raster<true>(p, t - groups.tile_start[g], (m_tiles + kCluster - 1) / kCluster, mi, ni);
      tile.group = g;
      tile.m0 = groups.begin[g] + (mi * kCluster + rank) * kBlockM;
      tile.row_end = groups.begin[g + 1];
      tile.kb_end = p.k / kBlockK;
    } else if (p.mode == KernelMode::kKGrouped) {
      const int g = p.div_group_items.Div(t);
      Raster<false>(p, p.div_group_items.Mod(t, g), num_m, mi, ni);
      tile.group = g;
      tile.m0 = mi * kBlockM;
      tile.row_end = p.m;
      tile.kb_begin = groups.begin[g] / kBlockK;
      tile.kb_end = groups.begin[g + 1] / kBlockK;
    } else {
      // Split tail: work item split_first + j * split_k + s is K slice s of the j-th split tile,
      // so a tile's slices are adjacent work items (one wave) and its owner (the last slice)
      // the highest of them.
      int w = t;
      const int blocks = p.k / kBlockK;
      tile.kb_end = blocks;
      if (t >= p.split_first) {
        // NOTE: `/` here, not a FastDiv by split_k: with one, ptxas spilled 4-8 bytes in the
        // 192x128 and 128x128 instantiations. Only the last wave's items take this path.
        const int j = t - p.split_first;
        tile.tail_tile = j / p.split_k;
        tile.slice = j - tile.tail_tile * p.split_k;
        tile.slices = p.split_k;
        w = p.split_first + tile.tail_tile;
        tile.kb_begin = tile.slice * blocks / p.split_k;
        tile.kb_end = (tile.slice + 1) * blocks / p.split_k;
      }
      Raster<false>(p, w, (num_m + kCluster - 1) / kCluster, mi, ni);
      tile.m0 = (mi * kCluster + rank) * kBlockM;
      tile.row_end = p.m;
    }
    tile.n0 = ni * kBlockN;
    return tile;
  }
};

// Reads and clamps the group ends (non-decreasing, within [0, rows]) and, for M-grouped, counts
// each group's work items (ceil(m tiles / kCluster) per N tile). Called by the whole CTA; ends
// with __syncthreads.
template <int kBlockM, int kBlockN, int kCluster>
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
      const int m_tiles = (size + kBlockM - 1) / kBlockM;
      table.tile_start[g + 1] = table.tile_start[g] + (m_tiles + kCluster - 1) / kCluster * num_n;
    }
  }
  __syncthreads();
}

// The value of lane 0 of the warp. The consumer's control flow depends only on such values, so
// that ptxas sees it as warp-uniform: wgmmas in flight across a branch it takes for divergent are
// serialized (C7518).
__device__ __forceinline__ int Uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }

// ---- Epilogue -------------------------------------------------------------------------------
//
// Each consumer warpgroup writes its 64 x kBlockN fp32 accumulator through 8 KB shared-memory
// buffers of its own, one 128-byte-wide column slice at a time (64 bf16 or 32 f32 columns). The
// 16-byte chunks of a buffer row are XOR-swizzled by the row so that the fragment writes are free
// of bank conflicts. A bf16 slice of a dense or M-grouped problem (KernelParams::d_tma) leaves
// through a TMA bulk-tensor store that one thread issues, and the warpgroup goes on to its next K
// block while the store drains: the bf16 chunk swizzle is TMA's 128-byte swizzle. Otherwise the
// warpgroup reads the slice back row-wise and each warp stores whole 128-byte row segments with
// 16-byte accesses (the row reads are conflict-free too); those stores hold the warpgroup until
// the memory system takes them, which, with a whole wave of CTAs storing at once, was part of a
// per-tile cost above cuBLASLt's (bench/RESULTS.md, session 8).

constexpr int kEpiRowBytes = 128;
constexpr int kEpiBytes = 64 * kEpiRowBytes;  // one buffer: a 64-row slice of 128-byte rows
static_assert(kOutBoxCols * 2 == kEpiRowBytes && kOutBoxRows == 64,
              "a bulk store writes one bf16 buffer");

// One consumer warpgroup's epilogue state.
struct EpiState {
  uint32_t buf = 0;                    // shared address of its first buffer
  const CUtensorMap* map_d = nullptr;  // D as 64 x 64 bf16 boxes (KernelParams::d_tma)
  uint32_t seq = 0;                    // bulk stores issued; the next writes buffer seq % n
};

__device__ __forceinline__ void NamedBarrierSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Chunk swizzle: bf16 fragments put 8 rows of one chunk in a warp access (4-byte stores), f32
// fragments 4 rows of two chunks in each half-warp access (8-byte stores).
__device__ __forceinline__ int EpiSwizzle(int row, bool f32) {
  return f32 ? 2 * (row % 4) : row % 8;
}

__device__ __forceinline__ void StoreVec16(const KernelParams& p, char* d_base, int row, int col,
                                           const uint4& v) {
  if (p.d_f32) {
    float* d = reinterpret_cast<float*>(d_base) + static_cast<int64_t>(row) * p.d_row + col;
    float x[4] = {__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                  __uint_as_float(v.w)};
    if (p.d_vec_aligned && col + 4 <= p.n) {
      if (p.accumulate) {
        const float4 old = *reinterpret_cast<const float4*>(d);
        x[0] += old.x;
        x[1] += old.y;
        x[2] += old.z;
        x[3] += old.w;
      }
      *reinterpret_cast<float4*>(d) = make_float4(x[0], x[1], x[2], x[3]);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (col + e < p.n) d[e] = p.accumulate ? d[e] + x[e] : x[e];
      }
    }
  } else {
    uint16_t* d = reinterpret_cast<uint16_t*>(d_base) + static_cast<int64_t>(row) * p.d_row + col;
    if (p.d_vec_aligned && col + 8 <= p.n) {
      *reinterpret_cast<uint4*>(d) = v;
    } else {
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (col + e < p.n) d[e] = static_cast<uint16_t>(w[e / 2] >> (16 * (e % 2)));
      }
    }
  }
}

// Columns of one bf16 slice of the epilogue: 64 (a 128-byte buffer row), or the whole tile where
// it is narrower (the 32-column tile fills half of each row).
template <int kBlockN>
constexpr int kBf16SliceCols = kBlockN < 64 ? kBlockN : 64;

// Writes column slice `q` (kBf16SliceCols columns) of this thread's fragment of the warpgroup's
// 64 x kBlockN accumulator to the bf16 buffer at shared address `buf` (rows of 128 bytes, chunks
// swizzled by EpiSwizzle); `frag_row` is the thread's first fragment row (and frag_row + 8).
template <int kBlockN>
__device__ __forceinline__ void WriteBf16Slice(const float (&acc)[kBlockN / 2], int q, uint32_t buf,
                                               int frag_row, int lane) {
#pragma unroll
  for (int jj = 0; jj < kBf16SliceCols<kBlockN> / 8; ++jj) {
    const int j = 8 * q + jj;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = frag_row + 8 * h;
      const __nv_bfloat162 pair = __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      const uint32_t bits = *reinterpret_cast<const uint32_t*>(&pair);
      const uint32_t addr =
          buf + r * kEpiRowBytes + (jj ^ EpiSwizzle(r, false)) * 16 + 4 * (lane % 4);
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(bits) : "memory");
    }
  }
}

// Stores this warpgroup's 64 rows of the tile (`acc` in the m64nN fragment layout) to D, rows
// at or past tile.row_end and columns at or past p.n left alone. `epi` holds the warpgroup's
// buffers (kEpiBuffers of kEpiBytes for the TMA-store path, 0 for a tile built without it);
// `tid` its thread index 0..127; `bar_id` its named barrier.
template <int kBlockN, int kEpiBuffers>
__device__ __forceinline__ void StoreTile(const KernelParams& p, const Tile& tile, int consumer,
                                          float (&acc)[kBlockN / 2], EpiState& epi, int tid,
                                          int bar_id, Tracer& tr) {
  const uint32_t buf_addr = epi.buf;
  char* d_base = static_cast<char*>(p.d);
  if (p.mode == KernelMode::kKGrouped) d_base += tile.group * p.d_group * (p.d_f32 ? 4 : 2);
  const int warp = tid / 32, lane = tid % 32;
  const int frag_row = warp * 16 + lane / 4;  // and frag_row + 8
  const int row0 = tile.m0 + consumer * 64;
  // Reads: 4 rows of 8 chunks per warp instruction, 4 instructions per pass.
  const int read_chunk = tid % 8;
  const int read_row = tid / 8;  // + 16 * i
  if constexpr (kEpiBuffers > 0) {
    if (p.d_tma && Uniform(p.mode == KernelMode::kDense || row0 + 64 <= tile.row_end)) {
      // (M-grouped: a slice whose rows all belong to the tile's group; the map would not stop at
      // the group's end.)
#pragma unroll
      for (int q = 0; q < kBlockN / 64; ++q) {
        const uint32_t buf = buf_addr + (epi.seq % kEpiBuffers) * kEpiBytes;
        // The bulk store that last read this buffer (kEpiBuffers stores ago) is done with it; the
        // barrier then holds the warpgroup's writes until thread 0 has seen that.
        BulkWaitRead<kEpiBuffers - 1>(tid == 0);
        tr.Mark(7 + 3 * q);
        NamedBarrierSync(bar_id, 128);
        tr.Mark(8 + 3 * q);
        WriteBf16Slice<kBlockN>(acc, q, buf, frag_row, lane);
        // Each thread's writes are made visible to the async proxy before the store reads them.
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        NamedBarrierSync(bar_id, 128);
        tr.Mark(9 + 3 * q);
        // Rows past D's end (the last M tile, or a cluster's tile past it) and columns past N are
        // clipped by the tensor map.
        TmaStore2d(epi.map_d, buf, tile.n0 + 64 * q, row0, tid == 0);
        ++epi.seq;
      }
      return;
    }
    // A slice that keeps the 16-byte stores (M-grouped, across its group's end) writes the first
    // buffer: no bulk store of an earlier slice may still be reading it.
    if (p.d_tma) BulkWaitRead<0>(tid == 0);
  }
  if (p.d_f32) {
#pragma unroll
    for (int q = 0; q < kBlockN / 32; ++q) {
      NamedBarrierSync(bar_id, 128);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const int j = 4 * q + jj;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = frag_row + 8 * h;
          const int chunk = (2 * jj + (lane % 4) / 2) ^ EpiSwizzle(r, true);
          const uint32_t addr = buf_addr + r * kEpiRowBytes + chunk * 16 + 8 * (lane % 2);
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(acc[4 * j + 2 * h]),
                       "f"(acc[4 * j + 2 * h + 1])
                       : "memory");
        }
      }
      NamedBarrierSync(bar_id, 128);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = read_row + 16 * i;
        const int row = row0 + r;
        uint4 v;
        const uint32_t addr = buf_addr + r * kEpiRowBytes + (read_chunk ^ EpiSwizzle(r, true)) * 16;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(addr)
                     : "memory");
        const int col = tile.n0 + 32 * q + 4 * read_chunk;
        if (row < tile.row_end && col < p.n) StoreVec16(p, d_base, row, col, v);
      }
    }
  } else {
    // Reads: kChunks 16-byte chunks per slice row, 128 / kChunks rows per warpgroup instruction.
    constexpr int kSliceCols = kBf16SliceCols<kBlockN>;
    constexpr int kChunks = kSliceCols / 8;
    constexpr int kRowsPerPass = 128 / kChunks;
    const int chunk = tid % kChunks;
    const int chunk_row = tid / kChunks;  // + kRowsPerPass * i
#pragma unroll
    for (int q = 0; q < kBlockN / kSliceCols; ++q) {
      NamedBarrierSync(bar_id, 128);
      WriteBf16Slice<kBlockN>(acc, q, buf_addr, frag_row, lane);
      NamedBarrierSync(bar_id, 128);
#pragma unroll
      for (int i = 0; i < 64 / kRowsPerPass; ++i) {
        const int r = chunk_row + kRowsPerPass * i;
        const int row = row0 + r;
        uint4 v;
        const uint32_t addr = buf_addr + r * kEpiRowBytes + (chunk ^ EpiSwizzle(r, false)) * 16;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(addr)
                     : "memory");
        const int col = tile.n0 + kSliceCols * q + 8 * chunk;
        if (row < tile.row_end && col < p.n) StoreVec16(p, d_base, row, col, v);
      }
    }
  }
}

// Writes zeros over this warpgroup's 64 rows of the tile (a tile with no K block).
template <int kBlockN>
__device__ __forceinline__ void StoreZeroTile(const KernelParams& p, const Tile& tile, int consumer,
                                              int tid) {
  char* d_base = static_cast<char*>(p.d);
  if (p.mode == KernelMode::kKGrouped) d_base += tile.group * p.d_group * (p.d_f32 ? 4 : 2);
  const int per_chunk = p.d_f32 ? 4 : 8;  // columns per 16 bytes
  const int chunks = kBlockN / per_chunk;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int i = tid; i < 64 * chunks; i += 128) {
    const int row = tile.m0 + consumer * 64 + i / chunks;
    const int col = tile.n0 + (i % chunks) * per_chunk;
    if (row < tile.row_end && col < p.n) StoreVec16(p, d_base, row, col, zero);
  }
}

// ---- Split tail -----------------------------------------------------------------------------
//
// A non-owner slice stores its warpgroup's fp32 accumulator to its slot in the fragment's own
// register order (element i of thread tid at i * 128 + tid: each warp store is 128 contiguous
// bytes), then counts on the flag of (tile, CTA rank, warpgroup). The owner waits until the
// flag has counted every other slice and adds their partials, slice 0 first, to its own
// accumulator (slice split_k-1's blocks), then stores the tile as usual.

// Release-add 1 to `flag` from thread 0 of the warpgroup, once every thread's stores are
// visible (each fences, then the warpgroup meets at the barrier). Predicated, not branched:
// ptxas serializes wgmmas in flight across a branch it cannot prove warp-uniform.
__device__ __forceinline__ void SignalSlice(unsigned* flag, int tid, int bar_id) {
  __threadfence();
  NamedBarrierSync(bar_id, 128);
  asm volatile(
      "{\n"
      ".reg .pred first;\n"
      "setp.eq.u32 first, %1, 0;\n"
      "@first red.release.gpu.global.add.u32 [%0], 1;\n"
      "}\n" ::"l"(flag),
      "r"(tid)
      : "memory");
}

// Every thread spins (acquire loads inside one asm block) until `flag` reaches `count`.
__device__ __forceinline__ void WaitSlices(const unsigned* flag, unsigned count) {
  asm volatile(
      "{\n"
      ".reg .pred wait;\n"
      ".reg .b32 seen;\n"
      "SPIN:\n"
      "ld.acquire.gpu.global.u32 seen, [%0];\n"
      "setp.lt.u32 wait, seen, %1;\n"
      "@wait bra SPIN;\n"
      "}\n" ::"l"(flag),
      "r"(count)
      : "memory");
}

// The end of a work item's K blocks for this warpgroup: stores the tile (whole tile or owner
// slice) and returns, or, for a non-owner slice, hands its partial to the owner.
template <int kBlockM, int kBlockN, int kCluster, int kEpiBuffers>
__device__ __forceinline__ void CompleteTile(const KernelParams& p, const Tile& tile, int consumer,
                                             float (&acc)[kBlockN / 2], EpiState& epi, int tid,
                                             int bar_id, uint32_t rank, Tracer& tr) {
  constexpr int kAcc = kBlockN / 2;
  constexpr int kSlot = kBlockM * kBlockN;  // floats
  const int slices = Uniform(tile.slices);
  if (slices > 1) {
    const int slice = Uniform(tile.slice);
    const int tail = Uniform(tile.tail_tile);
    unsigned* flag = p.split_flags + (tail * kCluster + rank) * (kBlockM / 64) + consumer;
    // Slot of (tail tile, slice < slices - 1, rank): this warpgroup's 64 rows.
    auto slot = [&](int s) {
      return p.split_partials +
             (static_cast<int64_t>(tail * (slices - 1) + s) * kCluster + rank) * kSlot +
             consumer * (64 * kBlockN) + tid;
    };
    if (slice < slices - 1) {
      float* dst = slot(slice);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) __stcg(dst + i * 128, acc[i]);
      SignalSlice(flag, tid, bar_id);
      return;
    }
    WaitSlices(flag, static_cast<unsigned>(slices - 1));
    for (int s = 0; s < slices - 1; ++s) {
      const float* src = slot(s);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] += __ldcg(src + i * 128);
    }
  }
  StoreTile<kBlockN, kEpiBuffers>(p, tile, consumer, acc, epi, tid, bar_id, tr);
}

// `v`, as a value the compiler cannot see through: it keeps it in a register rather than
// recomputing it. The consumer loops' per-thread addresses derive from threadIdx.x, and under
// register pressure ptxas re-read SR_TID.X (S2R) and redid the arithmetic in every K block, on
// the chain from the wgmma wait to the next issue (ncu's PC samples at 8192^3: the S2R's
// consumer stalled 6.7% of all samples; bench/RESULTS.md, session 5).
__device__ __forceinline__ uint32_t Opaque(uint32_t v) {
  asm volatile("" : "+r"(v));
  return v;
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

// Issues one K block (four k32 steps) for this warpgroup's 64 rows (A at shared address
// `a_addr`) and all kBlockN columns (B at `b_addr`) into `part` (overwritten), as one commit
// group.
template <int kBlockN>
__device__ __forceinline__ void IssueBlock(float (&part)[kBlockN / 2], uint32_t a_addr,
                                           uint32_t b_addr) {
  WgmmaFence();
  // Each k32 step is 32 bytes further along the swizzled rows: 2 in the descriptor's address
  // field, which cannot carry out of it.
  const uint32_t lo_a = SmemDescLo(a_addr), lo_b = SmemDescLo(b_addr);
  // NOTE: the first step only writes `part`, so no earlier value of it is live across the
  // loops; with a read-modify-write first step ptxas saw partials flow around the loop and
  // serialized the wgmmas (C7517/C7518).
  if constexpr (kBlockN == 192) {
    WgmmaM64N192K32First(part, SmemDesc(lo_a), SmemDesc(lo_b));
  } else if constexpr (kBlockN == 128) {
    WgmmaM64N128K32First(part, SmemDesc(lo_a), SmemDesc(lo_b));
  } else if constexpr (kBlockN == 64) {
    WgmmaM64N64K32First(part, SmemDesc(lo_a), SmemDesc(lo_b));
  } else {
    WgmmaM64N32K32First(part, SmemDesc(lo_a), SmemDesc(lo_b));
  }
#pragma unroll
  for (int k = 1; k < kBlockK / 32; ++k) {
    if constexpr (kBlockN == 192) {
      WgmmaM64N192K32(part, SmemDesc(lo_a + 2 * k), SmemDesc(lo_b + 2 * k), true);
    } else if constexpr (kBlockN == 128) {
      WgmmaM64N128K32(part, SmemDesc(lo_a + 2 * k), SmemDesc(lo_b + 2 * k), true);
    } else if constexpr (kBlockN == 64) {
      WgmmaM64N64K32(part, SmemDesc(lo_a + 2 * k), SmemDesc(lo_b + 2 * k), true);
    } else {
      WgmmaM64N32K32(part, SmemDesc(lo_a + 2 * k), SmemDesc(lo_b + 2 * k), true);
    }
  }
  WgmmaCommit();
}

__device__ __forceinline__ float LoadSharedF32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ float2 LoadSharedF32x2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}

// The scales of one K block for this thread's two rows, read from the stage before the wait
// for the block's wgmmas so that the promotion does not wait on shared-memory latency. NT: the
// products a_scale(row) * b_scale; per-row B scales: the A scales and the first kColScalesEarly
// column scale pairs (the rest are read during the promotion: holding them all would spill).
// NOTE: reading those four pairs early was +0.2% on TN on an H100, within noise (bench/RESULTS.md,
// session 11 run 4); the PC samples had the first FMUL after the wait stalled on them.
constexpr int kColScalesEarly = 4;  // per-row B: column scale pairs read before the wait
struct BlockScales {
  float s0, s1;
  float2 col[kColScalesEarly];  // per-row B only
};

// Scale tiles hold one row per tile row (or B scale block) of kRow floats, the first used:
// 4 (the TMA box's 16 bytes) where the shared memory has room, else 1 (SmemLayout::kScaleRow).
template <bool kPerRowB, int kRow>
__device__ __forceinline__ BlockScales LoadScales(uint32_t sa, uint32_t sb) {
  BlockScales sc;
  sc.s0 = LoadSharedF32(sa);
  sc.s1 = LoadSharedF32(sa + 8 * 4 * kRow);
  if constexpr (!kPerRowB) {
    const float b = LoadSharedF32(sb);
    sc.s0 *= b;
    sc.s1 *= b;
  } else {
#pragma unroll
    for (int j = 0; j < kColScalesEarly; ++j) {
      sc.col[j] = LoadSharedF32x2(sb + 8 * j * 4);
      FenceOperand(sc.col[j].x);
      FenceOperand(sc.col[j].y);
    }
  }
  // Finished here, before the caller's wgmma wait: ptxas otherwise moved the loads' use and the
  // products after the wait, onto the chain from the wait to the next issue.
  FenceOperand(sc.s0);
  FenceOperand(sc.s1);
  return sc;
}

// acc += part * scale once the wgmmas that wrote `part` completed; `sb` is the shared address
// of this thread's first column scale (per-row B scales only).
template <int kBlockN, bool kPerRowB>
__device__ __forceinline__ void Promote(float (&acc)[kBlockN / 2], float (&part)[kBlockN / 2],
                                        const BlockScales& sc, uint32_t sb) {
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) FenceOperand(part[i]);
  if constexpr (kPerRowB) {
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      const float2 b = j < kColScalesEarly ? sc.col[j] : LoadSharedF32x2(sb + 8 * j * 4);
      acc[4 * j + 0] += part[4 * j + 0] * (sc.s0 * b.x);
      acc[4 * j + 1] += part[4 * j + 1] * (sc.s0 * b.y);
      acc[4 * j + 2] += part[4 * j + 2] * (sc.s1 * b.x);
      acc[4 * j + 3] += part[4 * j + 3] * (sc.s1 * b.y);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      acc[4 * j + 0] += part[4 * j + 0] * sc.s0;
      acc[4 * j + 1] += part[4 * j + 1] * sc.s0;
      acc[4 * j + 2] += part[4 * j + 2] * sc.s1;
      acc[4 * j + 3] += part[4 * j + 3] * sc.s1;
    }
  }
}

// Bytes of dynamic shared memory for a tile, stage count and scale row of `row` floats.
constexpr int SmemBytesWith(int block_m, int block_n, int stages, int row, int epi_buffers) {
  return stages * ((block_m + block_n) * (kBlockK + 4 * row) + 16) +
         (block_m / 64) * epi_buffers * kEpiBytes + static_cast<int>(sizeof(GroupTable)) + 1024;
}

// The L1/shared carve-out step below the largest: a CTA with more shared memory than this leaves
// the SM 28 KB of L1 instead of 60 (sm_90's steps of 132, 164, 196 and 228 KB).
constexpr int kCarveOutStepBytes = 196 * 1024;

// Epilogue buffers per consumer warpgroup: two (a bulk store may still be reading one while the
// other is written) for the tiles with TMA stores where they fit and do not push a layout that was
// under the carve-out step past it; else one. NOTE: the step matters: TN on 128x192 lost 6% on an
// H100 when that layout grew from 190 to 205 KB (bench/RESULTS.md, session 7), likely from the
// smaller L1 under its cp.async scale copies.
constexpr int EpiBuffers(int block_m, int block_n, int stages, int row) {
  return TileStoresByTma(block_n) &&
                 SmemBytesWith(block_m, block_n, stages, row, 2) <= kMaxSmemBytes &&
                 (SmemBytesWith(block_m, block_n, stages, row, 1) > kCarveOutStepBytes ||
                  SmemBytesWith(block_m, block_n, stages, row, 2) <= kCarveOutStepBytes)
             ? 2
             : 1;
}

constexpr int SmemBytes(int block_m, int block_n, int stages, int row) {
  return SmemBytesWith(block_m, block_n, stages, row, EpiBuffers(block_m, block_n, stages, row));
}

// Whether the tile has an instantiation that loads its scales by TMA (launched for dense
// problems with 128x128 B scales in clusters of 2 only, see LaunchGemmFp8Kernel): 128x192 only.
// NOTE: on an H100 (bench/RESULTS.md, branch gemm12 and session 7) TMA scale loads made 128x192
// in clusters of 2 4.6% faster at 8192^3 and 5.5% at 4096x7168x16384, but unclustered 128x192
// 7-10% slower, 192x128 in clusters of 2 2-7% slower (4096^3, 16384x8192x5120, 8192x7168x2048,
// 4096x2112x7168, 4096x24576x1536), 64x64 3% slower (64x4096x7168), M-grouped 128x192 c2 1-3%
// slower; the others were not measured. TN on 128x192 (per-row B scales by TMA too: a 192-row
// box, and two loads per column pair in the promotion) was 4.6% slower at 16640x5120x8192, and
// 6% slower even with cp.async once every 128x192 build had the larger scale rows, hence the
// separate instantiation. The 128x128 tile with 6 stages and 128x64 with 8 have no room for the
// larger scale tiles anyway.
constexpr bool TmaScales(int block_m, int block_n, int stages) {
  return block_m == 128 && block_n == 192 &&
         SmemBytes(block_m, block_n, stages, kScaleBoxCols) <= kMaxSmemBytes;
}

// Per stage: the A and B tiles, a scale row per tile row of A and per column of B (per-row B
// scales; 128x128 B scales use the first one or two rows). A scale row is kRowFloats floats:
// 4, the 16-byte box of the TMA scale loads, in the TMA-scale instantiation, else 1 (those
// instantiations always copy the scales with cp.async, in main's layout).
template <int kBlockM, int kBlockN, int kStages, int kRowFloats>
struct SmemLayout {
  static_assert(kRowFloats == 1 ||
                    (kRowFloats == kScaleBoxCols && TmaScales(kBlockM, kBlockN, kStages)),
                "scale rows of one float, or of a TMA box where the tile has room for it");
  static constexpr int kScaleRow = kRowFloats;
  static constexpr int kTileABytes = kBlockM * kBlockK;  // e4m3: one byte per element
  static constexpr int kTileBBytes = kBlockN * kBlockK;
  static constexpr int kScaleABytes = kBlockM * 4 * kScaleRow;  // per stage
  static constexpr int kScaleBBytes = kBlockN * 4 * kScaleRow;
  static constexpr int kA = 0;
  static constexpr int kB = kA + kStages * kTileABytes;
  // kEpiBuffers buffers of kEpiBytes per consumer, 1024-byte aligned (a TMA source with
  // 128-byte swizzle).
  static constexpr int kEpiBuffers = EpiBuffers(kBlockM, kBlockN, kStages, kRowFloats);
  // The buffers the epilogue's TMA-store path cycles through; 0: the tile is built without it.
  static constexpr int kStoreBuffers = TileStoresByTma(kBlockN) ? kEpiBuffers : 0;
  static constexpr int kEpi = kB + kStages * kTileBBytes;
  static_assert(kEpi % 1024 == 0, "epilogue buffers");
  // 128-byte aligned, as TMA's destinations must be.
  static constexpr int kScaleA = kEpi + (kBlockM / 64) * kEpiBuffers * kEpiBytes;
  static constexpr int kScaleB = kScaleA + kStages * kScaleABytes;
  static constexpr int kFull = kScaleB + kStages * kScaleBBytes;
  static constexpr int kEmpty = kFull + kStages * 8;
  static constexpr int kGroups = kEmpty + kStages * 8;
  // + 1024 so that the base can be rounded up to the 1024-byte alignment of 128-byte swizzle.
  static constexpr int kBytes = kGroups + static_cast<int>(sizeof(GroupTable)) + 1024;
  static_assert(kBytes == SmemBytes(kBlockM, kBlockN, kStages, kScaleRow), "layout");
  static_assert(kScaleA % 128 == 0 && kScaleB % 128 == 0 && kScaleABytes % 128 == 0 &&
                    kScaleBBytes % 128 == 0,
                "TMA destinations");
};

// True in one lane of the (converged) warp: `elect.sync`, which needs no lane index. With the lane
// index, a consumer short of registers (the 192-row tile's, 152) re-read SR_TID.X for it in every
// K block, on the chain from the wgmma wait to the next issue (PC samples, bench/RESULTS.md).
__device__ __forceinline__ bool ElectOne() {
  uint32_t elected;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "elect.sync _|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(elected));
  return elected != 0;
}

// The column of K block `kb`'s scale in a scale row of kRow floats. TMA boxes must start at a
// 16-byte aligned address, so the box of block kb starts at column kb - kb % 4 and holds the
// scales of blocks kb - kb % 4 .. +3: the block's own is column kb % 4 (the cp.async path
// writes it there too).
template <int kRow>
__host__ __device__ constexpr int ScaleColumn(int kb) {
  return kRow > 1 ? kb % kRow : 0;
}

// ScaleSlots: the TMA-scale instantiation loads a scale box (four K blocks' scales) once, with
// the first of its blocks that a tile walks (column 0, or the tile's first block), into the next
// of kStages scale slots; the producer and the consumers step through the slots here, with the
// same blocks. A slot is reloaded kStages box loads later, with a block b whose stage the block
// b - kStages has freed. The kStages - 1 boxes loaded in between serve at least one block each,
// so b - kStages is no earlier than the last block that read the slot, and the consumers free
// stages in block order, each after reading its block's scales: none still reads the slot.
// Returns whether the block at scale column `column` loads a box.
// NOTE: on an H100 this was +0.0-0.8% on the six TMA-scale shapes against a box with every
// block (bench/RESULTS.md, session 13 run 3); the A boxes' rows are 16-byte pieces, 128 L2
// requests per box.
template <int kStages>
__device__ __forceinline__ bool NextScaleSlot(int& slot, int column, bool tile_first) {
  const bool box = column == 0 || tile_first;
  if (box) slot = slot + 1 == kStages ? 0 : slot + 1;
  return box;
}

// Frees stage `s` for the producer(s) once this warp is done with it (its wgmmas completed and
// its lanes read the scales): one arrival per consumer warp, in every CTA of the cluster.
template <int kCluster>
__device__ __forceinline__ void ReleaseStage(uint32_t empty_bar, uint32_t rank) {
  __syncwarp();
  if (ElectOne()) {
    BarrierArrive(empty_bar);
    if constexpr (kCluster > 1) {
      // Both CTAs' producers write this stage (their B halves): free it in each.
#pragma unroll
      for (int c = 1; c < kCluster; ++c) BarrierArriveCluster(empty_bar, (rank + c) % kCluster);
    }
  }
}

// The consumer warpgroups' loop. The warpgroup walks the K blocks of all its tiles as one
// sequence. Two partial sums alternate: block g+1's wgmmas are issued into one before the
// warpgroup waits (wait_group 1) for block g's in the other and promotes it, so the tensor core
// has queued work while the warpgroup scales and adds; the next tile's first block is issued
// before the epilogue of the tile it follows. A stage is freed only once the wgmmas that read it
// have completed and its scales were read.
// NOTE: each issue is followed on every path by a wait that retires the older group before
// either partial is read or issued into again, and each partial is issued into at one place
// inside the loop: otherwise ptxas serializes the wgmmas (C7514/C7517/C7518). A loop per tile
// with the next tile's first block issued in its tail needed copies of in-flight partials at the
// back edge (C7514).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats, bool kPerRowB>
__device__ __forceinline__ void ConsumerLoop(const KernelParams& p,
                                             const Scheduler<kBlockM, kBlockN, kCluster>& sched,
                                             int first_work, int work_stride, uint8_t* smem,
                                             uint32_t rank, const CUtensorMap* map_d) {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  constexpr int kAcc = kBlockN / 2;  // fp32 accumulator registers per thread for m64nN
  const int consumer = Uniform(threadIdx.x / 128) - 1;
  const int tid = threadIdx.x % 128;
  // The per-thread values are pinned in registers (Opaque, see OnePartialFrame): the A scale
  // address always, the lane and B scale address for tiles of 64 columns only (with 128, whose
  // accumulator and two partials take 192 registers, ptxas spilled 120-128 bytes).
  constexpr bool kPin = kBlockN <= 64;
  auto pin = [](uint32_t v) { return kPin ? Opaque(v) : v; };
  const int lane = static_cast<int>(pin(tid % 32));
  // Shared addresses: everything below is the base plus constants and the stage.
  const uint32_t base = SmemAddr(smem);
  const uint32_t a_base = base + L::kA + consumer * 64 * kBlockK;
  // Per-row B scales (TN, K-grouped) are always copied with cp.async, in rows of one float.
  constexpr int kRow = kPerRowB ? 1 : L::kScaleRow;
  const uint32_t sa_base =
      Opaque(base + L::kScaleA + 4 * kRow * (consumer * 64 + (tid / 32) * 16 + lane / 4));
  const uint32_t sb_base = pin(base + L::kScaleB + (kPerRowB ? 4 * 2 * (lane % 4) : 0));
  EpiState epi;
  epi.buf = base + L::kEpi + consumer * L::kEpiBuffers * kEpiBytes;
  epi.map_d = map_d;
  const int total = Uniform(sched.total);
  auto blocks_of = [&](int t) {
    const Tile tile = sched.Get(t);
    return Uniform(tile.kb_end - tile.kb_begin);
  };

  // Issue side: the ring position of the next block to issue, and the tile it comes from.
  int stage = 0;
  uint32_t phase = 0;
  int issue_tile = first_work - work_stride;
  int issue_left = 0;  // blocks of issue_tile not yet issued
  // Moves to the next block to issue; false when none is left. Tiles with no K block (an empty
  // group of K-grouped) are written here: zeros, or left as they are when accumulating.
  auto next_issue = [&]() {
    while (issue_left == 0) {
      issue_tile += work_stride;
      if (issue_tile >= total) return false;
      issue_left = blocks_of(issue_tile);
      if (issue_left == 0 && !p.accumulate) {
        StoreZeroTile<kBlockN>(p, sched.Get(issue_tile), consumer, tid);
      }
    }
    --issue_left;
    return true;
  };
  Tracer tr(p, consumer, tid == 0);
  auto issue = [&](float(&part)[kAcc]) {
    BarrierWait(base + L::kFull + 8 * stage, phase);
    tr.Mark(6);
    IssueBlock<kBlockN>(part, a_base + stage * L::kTileABytes,
                        base + L::kB + stage * L::kTileBBytes);
    Advance<kStages>(stage, phase);
  };

  // Finish side: blocks complete in issue order, so their stages follow the ring.
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  int done_stage = 0;
  int done_tile = first_work - work_stride;
  int done_left = 0;      // blocks of done_tile not yet promoted
  uint32_t done_col = 0;  // the block's column in the scale rows, in bytes (ScaleColumn)
  // One scheduler lookup per tile (each is three divisions; bench/RESULTS.md, session 9).
  Tile done_info;  // done_tile's Tile, for its epilogue (found once per tile)
  auto next_done_tile = [&]() {
    Tile tile;
    do {
      done_tile += work_stride;
      done_left = 0;
      if (done_tile < total) {
        tile = sched.Get(done_tile);
        done_left = Uniform(tile.kb_end - tile.kb_begin);
      }
    } while (done_tile < total && done_left == 0);
    done_info = tile;
    if constexpr (kRow > 1) {
      if (done_tile < total) done_col = 4 * ScaleColumn<kRow>(Uniform(tile.kb_begin));
    }
  };
  next_done_tile();
  // The oldest block's scales, read before the wait for its wgmmas.
  auto scales = [&]() {
    return LoadScales<kPerRowB, kRow>(sa_base + done_stage * L::kScaleABytes + done_col,
                                      sb_base + done_stage * L::kScaleBBytes + done_col);
  };
  auto finish = [&](float(&part)[kAcc], const BlockScales& sc) {
    Promote<kBlockN, kPerRowB>(acc, part, sc, sb_base + done_stage * L::kScaleBBytes + done_col);
    ReleaseStage<kCluster>(base + L::kEmpty + 8 * done_stage, rank);
    if (++done_stage == kStages) done_stage = 0;
    if constexpr (kRow > 1) done_col = (done_col + 4) % (4 * kRow);
    if (--done_left == 0) {
      CompleteTile<kBlockM, kBlockN, kCluster, L::kStoreBuffers>(p, done_info, consumer, acc, epi,
                                                                 tid, 1 + consumer, rank, tr);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
      next_done_tile();
    }
  };

  float part0[kAcc];
  float part1[kAcc];
  if (!next_issue()) return;
  issue(part0);
  while (true) {
    // part0 holds the oldest block in flight.
    tr.Mark(0);
    const bool more = next_issue();
    BlockScales sc;
    if (more) {
      issue(part1);
      tr.Mark(3);
      sc = scales();
      WgmmaWait<1>();
    } else {
      sc = scales();
      WgmmaWait<0>();
    }
    tr.Mark(1);
    finish(part0, sc);
    tr.Mark(2);
    tr.Next();
    if (!more) {
      WgmmaWait<0>();  // retires nothing; tells ptxas that no wgmma is in flight past here
      break;
    }
    // part1 holds the oldest block in flight.
    tr.Mark(0);
    const bool more2 = next_issue();
    if (more2) {
      issue(part0);
      tr.Mark(3);
      sc = scales();
      WgmmaWait<1>();
    } else {
      sc = scales();
      WgmmaWait<0>();
    }
    tr.Mark(1);
    finish(part1, sc);
    tr.Mark(2);
    tr.Next();
    if (!more2) {
      WgmmaWait<0>();
      break;
    }
  }
}

// ---- One partial per warpgroup: wide tiles (kBlockN > 128) and 192-row tiles -------------
//
// A 64 x 192 fp32 partial is 96 registers per thread: two of them and the accumulator would not
// fit beside addressing, so a wide tile keeps ONE partial per warpgroup. The warpgroup issues a
// block's four wgmmas, waits for all of them (wait_group 0), promotes, frees the stage and issues
// the next block into the same partial. While it promotes, the tensor core runs the other
// warpgroups' blocks (ConsumerLoopSimple). Per 128-K block the 128 x 192 tile reads 16 KB of A
// and 2 x 24 KB of B from shared memory and loads 40 KB (A + B) from L2, for 1.5x the FLOPs of a
// 128 x 128 tile's 48 KB read and 32 KB loaded.
// A 192 x 128 tile has three consumer warpgroups of 64 x 128 (one 64-register partial each,
// 512 threads): each warpgroup's per-block chain (wait, 64 promotion FFMAs, release, next
// block's bookkeeping and issue) has the other two's blocks, 512 tensor-core cycles, to hide
// under, where the 128 x 192 tile's had one block of 384 cycles (bench/RESULTS.md, gemm7's
// trace: that chain took longer, so the tensor core idled 35% of the time). Same area per tile
// (24576 outputs), 40 KB loaded per K block (24 KB A + 16 KB B).

// 128x128 B scales of one K block for a wide tile, whose columns span at most two scale blocks.
struct WideScales {
  float s00, s01;  // row 0 (this thread's first row) x scale block 0 / 1
  float s10, s11;  // row 1 (8 rows further)
};

template <int kRow>
__device__ __forceinline__ WideScales LoadWideScales(uint32_t sa, uint32_t sb) {
  const float a0 = LoadSharedF32(sa);
  const float a1 = LoadSharedF32(sa + 8 * 4 * kRow);
  float2 b;
  if constexpr (kRow == 1) {
    b = LoadSharedF32x2(sb);
  } else {
    b.x = LoadSharedF32(sb);
    b.y = LoadSharedF32(sb + 4 * kRow);
  }
  WideScales sc{a0 * b.x, a0 * b.y, a1 * b.x, a1 * b.y};
  // Meant to be finished before the caller's wgmma wait (see LoadScales). NOTE: the fences are
  // empty asm, which order the PTX but do not bind ptxas's schedule: in session 10's build of the
  // TMA-scale kernel (run 3's SASS) the four FMULs came after the WARPGROUP.DEPBAR; in session
  // 12's (runs 1 and 8) they come right after their loads, before it.
  FenceOperand(sc.s00);
  FenceOperand(sc.s01);
  FenceOperand(sc.s10);
  FenceOperand(sc.s11);
  return sc;
}

// acc += part * scale, with 128x128 B scales, for a wide tile: it starts at a multiple of
// kAlign = gcd(kBlockN, 128) columns and spans at most two scale blocks. Fragment column group j
// (8 columns) is in block 0 below kAlign / 8 and in block 1 from 16 on; in between (192-column
// tiles, which start 0 or 64 columns into a scale block) it is in block 0 exactly when the tile
// starts at a block boundary (`mid_first`): one select per row and block instead of one per
// group.
template <int kBlockN>
__device__ __forceinline__ void PromoteWide(float (&acc)[kBlockN / 2], float (&part)[kBlockN / 2],
                                            const WideScales& sc, bool mid_first) {
  constexpr int kAlign = kBlockN % 128 == 0 ? 128 : 64;
  static_assert(kBlockN % 64 == 0 && 128 - kAlign + kBlockN <= 256,
                "a wide tile spans at most two B scale blocks");
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) FenceOperand(part[i]);
  const float m0 = mid_first ? sc.s00 : sc.s01;
  const float m1 = mid_first ? sc.s10 : sc.s11;
#pragma unroll
  for (int j = 0; j < kBlockN / 8; ++j) {
    float r0, r1;
    if (j < kAlign / 8) {
      r0 = sc.s00;
      r1 = sc.s10;
    } else if (j < 16) {
      r0 = m0;
      r1 = m1;
    } else {
      r0 = sc.s01;
      r1 = sc.s11;
    }
    acc[4 * j + 0] += part[4 * j + 0] * r0;
    acc[4 * j + 1] += part[4 * j + 1] * r0;
    acc[4 * j + 2] += part[4 * j + 2] * r1;
    acc[4 * j + 3] += part[4 * j + 3] * r1;
  }
}

// A one-partial loop's per-thread frame (ConsumerLoopSimple): this warpgroup's consumer index,
// its thread's shared-memory addresses of the A tile and of its rows' and columns' scales, and its
// epilogue buffer.
template <int kBlockM, int kBlockN, int kStages, int kRowFloats, bool kPerRowB>
struct OnePartialFrame {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  // Per-row B scales (TN, K-grouped) are always copied with cp.async, in rows of one float.
  static constexpr int kRow = kPerRowB ? 1 : L::kScaleRow;
  int consumer, tid;
  uint32_t base, a_base, sa_base, sb_base;
  EpiState epi;
  __device__ __forceinline__ OnePartialFrame(uint8_t* smem, const CUtensorMap* map_d) {
    consumer = Uniform(threadIdx.x / 128) - 1;
    tid = threadIdx.x % 128;
    // NOTE: the lane and B scale address are pinned in registers (Opaque) for the 128-row tile
    // only: the 192-row tile's consumers (152 registers) spilled ~190 bytes with all three
    // pinned.
    constexpr bool kPin = kBlockM / 64 == 2;
    auto pin = [](uint32_t v) { return kPin ? Opaque(v) : v; };
    const int lane = static_cast<int>(pin(tid % 32));
    base = SmemAddr(smem);
    a_base = base + L::kA + consumer * 64 * kBlockK;
    sa_base = Opaque(base + L::kScaleA + 4 * kRow * (consumer * 64 + (tid / 32) * 16 + lane / 4));
    sb_base = pin(base + L::kScaleB + (kPerRowB ? 4 * 2 * (lane % 4) : 0));
    epi.buf = base + L::kEpi + consumer * L::kEpiBuffers * kEpiBytes;
    epi.map_d = map_d;
  }
};

// The one-partial tiles' loop without turns and without issuing ahead: per K block the warpgroup
// issues the four k32 steps, reads the block's scales and checks the next block's stage while
// they run, waits for them, frees the stage and promotes; the tile's epilogue follows its last
// block. NOTE: the next stage's check before the wait (rather than after the promotion, just
// before its issue) was +3.8% for TN and +2.8-2.9% for M-grouped on an H100 (session 12). The
// warpgroups run free, so the tensor core takes their blocks in whatever order they come. This
// is the order of DeepGEMM's SM90 kernel; on the same bytes at 8192^3 its 128x192 ran level with
// this loop on an H100 (bench/RESULTS.md, session 14 run 3).
// NOTE: on an H100, against a loop in which the warpgroups took turns at issuing (named
// barriers in a ring) and issued the next block before the epilogue of a finished tile
// (ConsumerLoopSingle, removed in session 14), this loop was 5.3% faster for TN (128x192,
// per-row B scales), 1.7-2.8% for M-grouped NT (128x192 c2, cp.async scales), +0.4% with
// 192x128 c2 (session 11, runs 6-7), and, once the TMA-scale instantiation loaded each scale box
// once (ScaleSlots), 1.3-3.2% faster for that one too on the six dense shapes that run it
// (session 14 run 1). There ptxas sets the yield hint on about every other promotion FFMA, and
// set none in the turn loop. DeepGEMM's kernel (the same loop order) lost 9-13.5% on the same
// H100 with the hints cleared in its cubin (session 14 run 1): in a loop without turns the
// warp scheduler's switches during the promotion are what let the other warpgroup issue.
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats, bool kPerRowB>
__device__ __forceinline__ void ConsumerLoopSimple(
    const KernelParams& p, const Scheduler<kBlockM, kBlockN, kCluster>& sched, int first_work,
    int work_stride, uint8_t* smem, uint32_t rank, const CUtensorMap* map_d) {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  constexpr int kAcc = kBlockN / 2;
  constexpr int kWide = kBlockN > 128;
  static_assert(kBlockN == 128 || kBlockN == 192, "one-partial tiles: 128 or 192 columns");
  using F = OnePartialFrame<kBlockM, kBlockN, kStages, kRowFloats, kPerRowB>;
  constexpr int kRow = F::kRow;
  const F f(smem, map_d);
  const int consumer = f.consumer, tid = f.tid;
  const uint32_t base = f.base, a_base = f.a_base, sa_base = f.sa_base, sb_base = f.sb_base;
  EpiState epi = f.epi;
  const int total = Uniform(sched.total);
  Tracer tr(p, consumer, tid == 0 && consumer < 2);
  int stage = 0;
  uint32_t phase = 0;
  float acc[kAcc];
  float part[kAcc];
  int scale_slot = kStages - 1;  // TMA-scale instantiation: the block's (NextScaleSlot)
  for (int t = first_work; t < total; t += work_stride) {
    const Tile tile = sched.Get(t);
    const int blocks = Uniform(tile.kb_end - tile.kb_begin);
    if (blocks == 0) {
      if (!p.accumulate) StoreZeroTile<kBlockN>(p, tile, consumer, tid);
      continue;
    }
    bool mid_first = true;
    if constexpr (kWide) mid_first = Uniform(tile.n0 % 128) == 0;
    uint32_t col = 0;
    if constexpr (kRow > 1) col = 4 * ScaleColumn<kRow>(Uniform(tile.kb_begin));
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
    // Each block's stage is checked before the wait for the previous block's wgmmas (the first
    // one here), so that after that wait only the promotion and the next issue remain.
    BarrierWait(base + L::kFull + 8 * stage, phase);
    for (int b = 0; b < blocks; ++b) {
      if (b > 0) tr.Next();  // a tile's last block keeps its record for the epilogue's marks
      tr.Mark(0);
      const int cur = stage;
      int slot = cur;            // cp.async scales sit in the block's stage
      if constexpr (kRow > 1) {  // TMA-scale: in scale slots, stepped as the producer does
        NextScaleSlot<kStages>(scale_slot, col / 4, b == 0);
        slot = scale_slot;
      }
      const uint32_t sa = sa_base + slot * L::kScaleABytes + col;
      const uint32_t sb = sb_base + slot * L::kScaleBBytes + col;
      IssueBlock<kBlockN>(part, a_base + cur * L::kTileABytes, base + L::kB + cur * L::kTileBBytes);
      tr.Mark(4);
      Advance<kStages>(stage, phase);
      if constexpr (kPerRowB || !kWide) {
        const BlockScales sc = LoadScales<kPerRowB, kRow>(sa, sb);
        if (b + 1 < blocks) BarrierWait(base + L::kFull + 8 * stage, phase);
        tr.Mark(3);
        WgmmaWait<0>();
        tr.Mark(1);
        Promote<kBlockN, kPerRowB>(acc, part, sc, sb);
        ReleaseStage<kCluster>(base + L::kEmpty + 8 * cur, rank);
      } else {
        const WideScales sc = LoadWideScales<kRow>(sa, sb);
        if (b + 1 < blocks) BarrierWait(base + L::kFull + 8 * stage, phase);
        tr.Mark(3);
        WgmmaWait<0>();
        tr.Mark(1);
        ReleaseStage<kCluster>(base + L::kEmpty + 8 * cur, rank);
        PromoteWide<kBlockN>(acc, part, sc, mid_first);
      }
      tr.Mark(2);
      if constexpr (kRow > 1) col = (col + 4) % (4 * kRow);
    }
    // The tile is looked up again rather than kept across its blocks. NOTE: kept, the 192x128
    // consumers (128 registers) spilled 16-24 bytes (192x128 c2 +3.6% all the same), and
    // 128x192 lost 0.6-1.2% on the large NT shapes and 2.4% on TN (bench/RESULTS.md, sessions 9
    // and 11).
    CompleteTile<kBlockM, kBlockN, kCluster, L::kStoreBuffers>(p, sched.Get(t), consumer, acc, epi,
                                                               tid, 1 + consumer, rank, tr);
    tr.Mark(5);
    tr.Next();
  }
}

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

// `num_ctas` <= 0 launches as many CTAs as fit at once; otherwise exactly that many (rounded to
// whole clusters).
constexpr int kMaxSlices = 8;
constexpr int kMinSliceBlocks = 4;  // K blocks: below, the partial's round trip outweighs them

uint64_t SplitFlagBytes(int sm_count) {
  return (static_cast<uint64_t>(3 * sm_count) * sizeof(unsigned) + 255) / 256 * 256;
}

// Splits the last wave of a dense problem when its tiles would leave at least half of the
// `ctas` CTAs idle: `tail` = work items % clusters, each split into s = clusters / tail slices
// (at most kMaxSlices, at least kMinSliceBlocks K blocks each), so the split items fill one wave.
// With fewer work items than clusters, the grid grows to hold them all. Returns the CTA count
// and sets params' split fields (flags cleared on `stream`); leaves them at "no split" when the
// tail fits no split or the workspace is too small.
// NOTE: slices over two waves (tail > clusters / 2, e.g. 88 tiles of 132 in 3 slices each) were
// tried and lost on an H100: 4096x2112x7168 976 TFLOP/s against 1046 unsplit, TN
// 16640x5120x8192 the same (bench/RESULTS.md, branch gemm5): twice the partials' round trips
// cost more than the third of a wave saved.
template <int kBlockM, int kBlockN, int kCluster>
cudaError_t PlanSplitTail(KernelParams& p, int resident, int& num_ctas, void* workspace,
                          uint64_t workspace_bytes, cudaStream_t stream) {
  if (workspace == nullptr || p.mode != KernelMode::kDense) return cudaSuccess;
  const int items =
      (p.m + kBlockM * kCluster - 1) / (kBlockM * kCluster) * ((p.n + kBlockN - 1) / kBlockN);
  const int clusters = std::max(1, std::min(num_ctas, resident) / kCluster);
  const int tail = items % clusters;
  if (tail == 0 && items >= clusters) return cudaSuccess;
  const int tail_items = items < clusters ? items : tail;
  const int slices = std::min({clusters / tail_items, kMaxSlices, p.k / kBlockK / kMinSliceBlocks});
  if (slices < 2) return cudaSuccess;
  int sm_count = 0, device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  }
  if (err != cudaSuccess) return err;
  const uint64_t flag_bytes = SplitFlagBytes(sm_count);
  const uint64_t flags = static_cast<uint64_t>(tail_items) * kCluster * (kBlockM / 64);
  const uint64_t slots = static_cast<uint64_t>(tail_items) * (slices - 1) * kCluster;
  if (flags * sizeof(unsigned) > flag_bytes ||
      flag_bytes + slots * kBlockM * kBlockN * sizeof(float) > workspace_bytes) {
    return cudaSuccess;
  }
  p.split_first = items - tail_items;
  p.split_k = slices;
  p.split_flags = static_cast<unsigned*>(workspace);
  p.split_partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + flag_bytes);
  if (items < clusters) num_ctas = items * slices * kCluster;
  return cudaMemsetAsync(p.split_flags, 0, flags * sizeof(unsigned), stream);
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
