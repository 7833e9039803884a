// The persistent tile order of the FP8 GEMM: which tile (and K blocks) each work item is, for
// dense, M-grouped and K-grouped problems, in grouped raster bands for L2 reuse, with the split
// tail's slices last.
#ifndef KERNELD_KERNELS_CUDA_GEMM_TILE_SCHEDULER_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_TILE_SCHEDULER_CUH_

#include <cstdint>

#include "kernels/cuda/gemm/fast_div.h"
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"

namespace kd {
namespace cuda_gemm {

// One work item: a tile of D (or, in the split tail, a K slice of one) and its K blocks.
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

// The grouped modes' group rows and, for M-grouped, each group's first work item, built once per
// CTA in shared memory (BuildGroupTable).
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

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_TILE_SCHEDULER_CUH_
