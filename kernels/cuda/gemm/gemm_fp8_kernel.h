// Internal interface between the FP8 GEMM host launcher (gemm_fp8.cc, plain C++) and the
// kernel translation unit (gemm_fp8_kernel.cu). Not part of the public API.
#ifndef KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_KERNEL_H_
#define KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_KERNEL_H_

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/gemm/fast_div.h"

namespace kd {
namespace cuda_gemm {

constexpr int kBlockK = 128;  // one scale block per pipeline stage
constexpr int kMaxGroups = 1024;
// The largest raster_group the kernel divides by (its band table's size); GemmConfig's range,
// kMaxGemmRasterGroup (gemm_fp8.cc checks that they agree).
constexpr int kMaxRasterGroup = 64;

// How the kernel walks the problem.
enum class KernelMode : int {
  kDense = 0,     // one (m, n) problem; NT (128x128 B scales) or TN (1x128 B scales)
  kMGrouped = 1,  // rows split by group ends, B and its scales per group
  kKGrouped = 2,  // reduction split by group ends (multiples of 128), one output per group
};

// Everything the kernel reads besides the two tensor maps. Element strides unless noted.
struct KernelParams {
  KernelMode mode = KernelMode::kDense;
  int m = 0;  // output rows (T for M-grouped)
  int n = 0;  // output columns per group
  int k = 0;  // reduction (all groups' tokens for K-grouped)
  // Group ends (i32 or i64) in device memory; only the grouped modes read them. The kernel
  // clamps them to be non-decreasing and within [0, rows] (never out of bounds on bad input).
  const void* group_ends = nullptr;
  int group_ends_i64 = 0;
  int num_groups = 1;
  // a_scales[row * sa_row + kb]
  const float* a_scales = nullptr;
  int64_t sa_row = 0;
  // Per-row B scales (TN, K-grouped): b_scales[col * sb_row + kb]. 128x128 B scales (NT,
  // M-grouped): b_scales[group * sb_group + (col / 128) * sb_row + kb].
  const float* b_scales = nullptr;
  int64_t sb_row = 0;
  int64_t sb_group = 0;
  int b_scale_per_row = 0;
  // Rows of B per group in the B tensor map (M-grouped: B is viewed as (E*N, K)).
  int b_rows_per_group = 0;
  // Output: d[group * d_group + row * d_row + col], bf16 or f32.
  void* d = nullptr;
  int64_t d_row = 0;
  int64_t d_group = 0;
  int d_f32 = 0;
  int accumulate = 0;
  int d_vec_aligned = 0;  // every row (and group) of D starts 16-byte aligned: 16-byte stores
  int raster_group = 8;   // M tiles per band in the tile order (L2 reuse)
  // Split tail (dense mode; set by LaunchGemmFp8Kernel, not by the caller): work items at or
  // past `split_first` are K slices of the last, part-full wave's tiles, `split_k` per tile.
  // Slices 0..split_k-2 write their fp32 partial sums to `split_partials` and count on the
  // tile's flag in `split_flags`; slice split_k-1 (the tile's owner, the highest work item)
  // waits for the count, adds the partials in slice order and stores the tile.
  int split_first = 0;
  int split_k = 1;
  float* split_partials = nullptr;
  unsigned* split_flags = nullptr;
  // The tile scheduler's divisors (set by LaunchGemmFp8Kernel, not by the caller): work items
  // per raster band (raster_group x N tiles), a K-grouped group's work items (M x N tiles), a
  // band's height (raster_group) and the last band's (dense, K-grouped; M-grouped divides by a
  // group's last band through a table in the kernel).
  FastDiv div_band_items;
  FastDiv div_group_items;
  FastDiv div_band;
  FastDiv div_last_band;
  // Clock trace (builds with KD_GEMM_TRACE only; see SetGemmFp8Trace): kTraceWords u32.
  uint32_t* trace = nullptr;
  // How the scales reach shared memory (ScaleLoad): kScalesByCpAsync, producer warps 1..3 copy
  // them with cp.async from a_scales / b_scales (row-major); kScalesByTma, the TMA thread loads
  // boxes of them through map_sa / map_sb on the stage's full barrier (the tile's TMA-scale
  // instantiation; dense mode with 128x128 B scales in clusters of 2 only, else the launch fails);
  // kScalesByTmaAKBlockMajor, the same with map_sa over K-block-major A scales.
  int scale_tma = 0;
  // 1: the consumers store bf16 tiles through map_d (TMA bulk-tensor stores from the epilogue
  // buffers; dense or M-grouped mode, bf16 output, no accumulate, a tile with TileStoresByTma,
  // else the launch fails; M-grouped slices that cross their group's end still use `d`); 0:
  // 16-byte stores to `d`.
  int d_tma = 0;
};

// KernelParams::scale_tma.
enum ScaleLoad : int {
  kScalesByCpAsync = 0,
  kScalesByTma = 1,
  kScalesByTmaAKBlockMajor = 2,
};

// Clock trace, a measuring tool: in a build with KD_GEMM_TRACE defined (CMake option
// KD_GEMM_TRACE; trace.cuh), CTAs 0 and 1 record %clock at marks of the consumer loops and the
// producer, per K block: [cta 0..1][slot 0..3][block 0..kTraceIters-1][mark 0..15]; slots 0 and 1
// are the first two consumer warpgroups (one-partial loop, ConsumerLoopOnePartial: 0 block head,
// 4 block issued, 3 next block's stage full (or the tile's last block), 1 own wgmmas done, 2
// released and promoted, 5 epilogue done, in a tile's last block; in a block that ends a tile
// stored by TMA, per 64-column slice q: 7 + 3q the buffer's last bulk store has read it, 8 + 3q
// the warpgroup met before writing it, 9 + 3q written and fenced, the warpgroup met; the
// two-partial loop's marks: bench/gpu_gemm/trace_summary.py), 2 the TMA thread and 3 the B-scale
// warp's lane 0 (0 before and 1 after the wait for a free stage). Other builds record nothing.
// bench/gpu_gemm/trace_summary.py reads the buffer.
constexpr int kTraceIters = 512;
constexpr int kTraceMarks = 16;
constexpr int kTraceWords = 2 * 4 * kTraceIters * kTraceMarks;

// The device buffer (kTraceWords u32, zeroed by the caller) that the next launches trace into;
// null for none. Host state, not thread safe: for the benchmark's own launches.
void SetGemmFp8Trace(uint32_t* trace);

// Device workspace of the split tail, in bytes, for a device of `sm_count` SMs: the flags and
// one 128 x 192 fp32 partial per SM (at most one non-owner slice per CTA is ever in flight:
// the split items of a launch fit in one wave of its CTAs).
uint64_t GemmFp8SplitWorkspaceBytes(int sm_count);

// The scale maps' boxes (fp32, no swizzle, innermost dimension first): map_sa over a_scales
// (rows, K/128), box {4, block_m}, or over K-block-major a_scales (K/128, rows), box {block_m, 4};
// map_sb over the 128x128 B scales (ceil(N/128), K/128), box {4, block_n > 128 ? 2 : 1}. Four
// K blocks are TMA's 16-byte minimum along a row-major scale row: K block kb's scales come in the
// box at column kb - kb % 4, whose column kb % 4 the kernel uses (K-block-major boxes take the
// same four blocks, for one box per four blocks either way).
constexpr int kScaleBoxCols = 4;

// The output map's box (bf16, 128-byte swizzle, innermost dimension first): 64 columns (128
// bytes) x 64 rows, one consumer warpgroup's slice of a tile.
constexpr int kOutBoxCols = 64;
constexpr int kOutBoxRows = 64;

// Whether tiles `block_n` wide have the epilogue's TMA-store path (KernelParams::d_tma): 128 and
// 192. The 64- and 32-wide tiles (small-M shapes, a tile or two per CTA) are built without it:
// with the path compiled in, though not taken, 128x64 and 64x64 run 3-8% slower on an H100
// (docs/decisions/0003-gemm-tma-store-epilogue.md).
constexpr bool TileStoresByTma(int block_n) { return block_n >= 128; }

// Whether this tile and stage count has an instantiation with the TMA scale tiles (16 bytes per
// row and stage instead of 4), which KernelParams::scale_tma selects: 128x192 only (see
// TmaScales in smem_layout.cuh).
bool GemmFp8TmaScales(int block_m, int block_n, int stages);

// Launches the kernel with a `block_m` x `block_n` tile, `stages` pipeline stages and clusters
// of `cluster` CTAs (2: M-adjacent tiles share their B tile through TMA multicast, in M-grouped
// mode two tiles of one group; dense and M-grouped modes only, and map_b's box must then be
// block_n / 2 rows) on `num_ctas` persistent CTAs, or, when
// `num_ctas` <= 0, on as many as fit at once but at most `max_useful_ctas`. With `workspace`
// (`workspace_bytes` of device memory, 256-byte aligned, stream-ordered, nothing else using it)
// in dense mode, the tiles of a last wave that would leave at least half of the CTAs idle are
// split along K into `s` slices (s * tail tiles <= CTAs, at least 4 K blocks a slice, s <= 8),
// a fixed function of the shape, the config and the CTA count, so a launch gives the same
// bits on every run; the flags are cleared with cudaMemsetAsync on `stream` first. The split
// changes only the fp32 summation order of the split tiles (see KernelParams). Built: 128x128
// with 4..6 stages (cluster 1) or 5..6 (cluster 2), 128x192 with 4 (cluster 1 or 2), 128x64
// with 6 or 8 (cluster 1) or 8 (cluster 2), 64x64 with 8 and 64x32 with 16 (cluster 1), 192x128
// with 4 (cluster 1 or 2; three consumer warpgroups, 512 threads). Returns the launch error
// (cudaSuccess when enqueued; cudaErrorInvalidValue for a combination not built, or K-grouped
// mode in a cluster).
// `map_sa` and `map_sb` are read only with params.scale_tma set, which needs dense mode, 128x128
// B scales, clusters of 2 and a tile with GemmFp8TmaScales (cudaErrorInvalidValue otherwise).
// `map_d` is read only with params.d_tma set, which needs dense or M-grouped mode, bf16 output
// without accumulate and a tile with TileStoresByTma (cudaErrorInvalidValue otherwise): D (rows, N)
// as boxes of 64 x 64 with 128-byte swizzle (kOutBoxCols x kOutBoxRows).
cudaError_t LaunchGemmFp8Kernel(const KernelParams& params, const CUtensorMap& map_a,
                                const CUtensorMap& map_b, const CUtensorMap& map_sa,
                                const CUtensorMap& map_sb, const CUtensorMap& map_d, int block_m,
                                int block_n, int stages, int cluster, int num_ctas,
                                int max_useful_ctas, void* workspace, uint64_t workspace_bytes,
                                cudaStream_t stream);

// How many CTAs of this configuration fit on the current device at once (whole clusters); 0 for
// a configuration not built or on a CUDA error. The cp.async-scale instantiation's; 128x192's
// TMA-scale one (15 KB more shared memory) also runs one CTA per SM.
int GemmFp8ResidentCtas(int block_m, int block_n, int stages, int cluster);

// Fills, on the current device, what every instantiation's first launch would otherwise do once:
// the opt-in to its shared memory (cudaFuncSetAttribute) and its resident-CTA count
// (cudaOccupancyMaxActiveClusters), both cached per instantiation and device. A few driver calls
// per instantiation, no allocation and no launch. The first error, if any.
cudaError_t WarmGemmFp8Kernels();

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_KERNEL_H_
