// Which output tile a CTA computes, for the three modes of the portable tile GEMM. Dense and
// K-grouped tiles follow from the block index; M-grouped tiles from a table of group rows and
// tile counts that every CTA builds in shared memory from the group ends on the device (no host
// synchronisation). Group ends are clamped as the CUDA backend documents (GemmOp in
// proto/kerneld/v1/kerneld.proto): each end into [previous end, rows]; K-grouped blocks are the
// clamped ends divided by 128, rounded down.
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_TILE_SCHEDULE_CUH_
#define KERNELD_KERNELS_GPU_TILE_GEMM_TILE_SCHEDULE_CUH_

#include <cstdint>

#include "kernels/gpu/tile_gemm/tile_gemm_params.h"
#include "kernels/gpu/tile_gemm/vendor_namespace.h"
#include "kernels/gpu/vendor.h"

namespace kd {
namespace tile_gemm {
KD_TILE_GEMM_VENDOR_NS_BEGIN

constexpr int kBlockK = 128;  // one scale block of the reduction per pipeline stage
constexpr int kRasterBand = 8;

__device__ __forceinline__ int Min(int a, int b) { return a < b ? a : b; }

struct TileCoord {
  int row0 = 0;     // first row of A and D
  int row_end = 0;  // rows at or past this are neither loaded nor stored
  int n0 = 0;       // first column of D
  int group = 0;
  int kb_begin = 0;  // reduction blocks [kb_begin, kb_end)
  int kb_end = 0;
};

// Shared-memory bytes ScheduleTile needs for `groups` groups and `threads` threads.
constexpr int ScheduleSmemBytes(int groups, int threads) {
  return static_cast<int>(sizeof(int)) * (2 * (groups + 1) + threads);
}

// Tile t of a num_m x num_n grid, walked in bands of kRasterBand tile rows so that the CTAs
// running together share A and B tiles in L2.
__device__ __forceinline__ void Raster(int t, int num_m, int num_n, int& mi, int& ni) {
  const int band = t / (kRasterBand * num_n);
  const int first = band * kRasterBand;
  const int height = Min(kRasterBand, num_m - first);
  const int local = t - band * kRasterBand * num_n;
  mi = first + local % height;
  ni = local / height;
}

// Exclusive scan of one int per thread under `op` (Hillis-Steele in `scratch`, kThreads ints).
// Called by every thread of the CTA; the barriers make it safe to call again right after.
template <int kThreads, typename Op>
__device__ int BlockExclusiveScan(int value, int identity, int* scratch, Op op) {
  const int tid = gpu::ThreadIndex();
  scratch[tid] = value;
  gpu::SyncThreads();
  for (int offset = 1; offset < kThreads; offset <<= 1) {
    const int other = tid >= offset ? scratch[tid - offset] : identity;
    gpu::SyncThreads();
    scratch[tid] = op(scratch[tid], other);
    gpu::SyncThreads();
  }
  const int result = tid > 0 ? scratch[tid - 1] : identity;
  gpu::SyncThreads();
  return result;
}

struct MaxOp {
  __device__ int operator()(int a, int b) const { return a > b ? a : b; }
};
struct SumOp {
  __device__ int operator()(int a, int b) const { return a + b; }
};

__device__ __forceinline__ int64_t GroupEnd(const Params& p, int g) {
  return p.group_ends_i64 ? static_cast<const int64_t*>(p.group_ends)[g]
                          : static_cast<const int32_t*>(p.group_ends)[g];
}

// Fills begin[0..E]: begin[g]..begin[g+1] are group g's rows (or tokens), clamped. Each thread
// takes a run of consecutive groups; a max-scan carries the running maximum across runs.
template <int kThreads>
__device__ void BuildGroupBegins(const Params& p, int rows, int* begin, int* scratch) {
  const int groups = p.num_groups;
  const int per = (groups + kThreads - 1) / kThreads;
  const int g0 = Min(groups, gpu::ThreadIndex() * per), g1 = Min(groups, g0 + per);
  int running = 0;
  for (int g = g0; g < g1; ++g) {
    const int64_t end = GroupEnd(p, g);
    const int clamped = static_cast<int>(end < 0 ? 0 : (end > rows ? rows : end));
    running = running > clamped ? running : clamped;
    begin[g + 1] = running;
  }
  const int before = BlockExclusiveScan<kThreads>(running, 0, scratch, MaxOp());
  for (int g = g0; g < g1; ++g) begin[g + 1] = begin[g + 1] > before ? begin[g + 1] : before;
  if (gpu::ThreadIndex() == 0) begin[0] = 0;
  gpu::SyncThreads();
}

// The tile this CTA computes; false when it has none (an M-grouped launch is sized for the most
// tiles any group ends could need). Called by every thread; uses `smem` (ScheduleSmemBytes) and
// leaves it free for reuse.
template <int kBlockM, int kBlockN, int kThreads>
__device__ bool ScheduleTile(const Params& p, unsigned char* smem, TileCoord& t) {
  const int num_n = (p.n + kBlockN - 1) / kBlockN;
  int mi = 0, ni = 0;
  if (p.mode == Mode::kDense) {
    Raster(gpu::BlockIndexX(), (p.m + kBlockM - 1) / kBlockM, num_n, mi, ni);
    t.row0 = mi * kBlockM;
    t.row_end = p.m;
    t.n0 = ni * kBlockN;
    t.kb_end = p.k / kBlockK;
    return true;
  }
  int* begin = reinterpret_cast<int*>(smem);
  int* start = begin + p.num_groups + 1;
  int* scratch = start + p.num_groups + 1;
  const bool k_grouped = p.mode == Mode::kKGrouped;
  BuildGroupBegins<kThreads>(p, k_grouped ? p.k : p.m, begin, scratch);
  if (k_grouped) {
    const int g = gpu::BlockIndexY();
    Raster(gpu::BlockIndexX(), (p.m + kBlockM - 1) / kBlockM, num_n, mi, ni);
    t.row0 = mi * kBlockM;
    t.row_end = p.m;
    t.n0 = ni * kBlockN;
    t.group = g;
    t.kb_begin = begin[g] / kBlockK;
    t.kb_end = begin[g + 1] / kBlockK;
    gpu::SyncThreads();
    return true;
  }
  // M-grouped: start[g] = tiles of the groups before g (each ceil(rows / kBlockM) x num_n).
  const int groups = p.num_groups;
  const int per = (groups + kThreads - 1) / kThreads;
  const int g0 = Min(groups, gpu::ThreadIndex() * per), g1 = Min(groups, g0 + per);
  int count = 0;
  for (int g = g0; g < g1; ++g) count += (begin[g + 1] - begin[g] + kBlockM - 1) / kBlockM * num_n;
  int running = BlockExclusiveScan<kThreads>(count, 0, scratch, SumOp());
  for (int g = g0; g < g1; ++g) {
    start[g] = running;
    running += (begin[g + 1] - begin[g] + kBlockM - 1) / kBlockM * num_n;
  }
  if (gpu::ThreadIndex() == kThreads - 1) start[groups] = running;
  gpu::SyncThreads();
  const int tile = gpu::BlockIndexX();
  const bool found = tile < start[groups];
  if (found) {
    int lo = 0, hi = groups - 1;  // the last g with start[g] <= tile (skips empty groups)
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (start[mid] <= tile)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int local = tile - start[lo];
    t.group = lo;
    t.row0 = begin[lo] + local / num_n * kBlockM;
    t.row_end = begin[lo + 1];
    t.n0 = local % num_n * kBlockN;
    t.kb_end = p.k / kBlockK;
  }
  gpu::SyncThreads();
  return found;
}

KD_TILE_GEMM_VENDOR_NS_END
}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_TILE_SCHEDULE_CUH_
