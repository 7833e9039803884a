// The row/column family's kernel arguments and launch constants (quantize_rowcol.cu and its
// kernels: quantize_group_ends.cuh, quantize_rowwise.cuh, quantize_colwise.cuh,
// quantize_transposed.cuh).
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_ROWCOL_CUH_
#define KERNELD_KERNELS_GPU_QUANTIZE_ROWCOL_CUH_

#include <cstdint>

#include "kernels/gpu/quantize_common.cuh"
#include "kernels/gpu/quantize_params.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {

// What the family's kernels take by value: the fields of QuantizeParams they read, in the layout
// their machine code was built for.
struct RowColKernelArgs {
  RowQuantizeKind kind = RowQuantizeKind::kPerRow;
  const void* input = nullptr;  // X (m, k)
  int64_t input_stride = 0;
  InputType input_type = InputType::kBF16;
  int64_t m = 0, k = 0;
  uint8_t* output = nullptr;  // Y: (m, k), or (k, m) for jagged_colwise and *Transposed
  int64_t output_stride = 0;
  Fp8Format format = Fp8Format::kE4M3FN;
  void* scales = nullptr;  // see QuantizeParams::scales
  int64_t scales_stride = 0;
  bool k_block_major_scales = false;  // jagged_rowwise
  bool pow2_scales = false;
  float eps = 1e-12f;
  bool mx_rceil = false;
  const void* group_ends = nullptr;  // jagged: see QuantizeParams::group_ends
  int64_t group_ends_stride = 0;
  bool group_ends_i64 = false;
  int64_t groups = 0;
  DeviceErrorRecord* error = nullptr;
  void* scratch = nullptr;  // RowColQuantizeScratchBytes bytes of device memory
};

inline RowColKernelArgs RowColArgsOf(const QuantizeParams& q) {
  RowColKernelArgs a;
  a.kind = q.row_kind;
  a.input = q.input;
  a.input_stride = q.input_stride;
  a.input_type = q.input_type;
  a.m = q.m;
  a.k = q.k;
  a.output = q.output;
  a.output_stride = q.output_stride;
  a.format = q.format;
  a.scales = q.scales;
  a.scales_stride = q.scales_stride;
  a.k_block_major_scales = q.k_block_major_scales;
  a.pow2_scales = q.pow2_scales;
  a.eps = q.eps;
  a.mx_rceil = q.mx_rceil;
  a.group_ends = q.group_ends;
  a.group_ends_stride = q.group_ends_stride;
  a.group_ends_i64 = q.group_ends_i64;
  a.groups = q.groups;
  a.error = q.error;
  a.scratch = q.scratch;
  return a;
}

constexpr int kRowThreads = 128;  // row-block and per_tensor kernels
constexpr int kBlockRows = 4;     // rows a row-block CTA loads before it computes
constexpr int kRowsInFlight = 8;  // the same for the per_tensor and column amax kernels
constexpr int kPerRowChunks = 4;  // per_row: chunks of a row per thread per pass
constexpr int kMaxPerRowThreads = 512;
constexpr int64_t kMaxPartials = 8192;  // per_tensor amax partials (more only for huge rows)
constexpr int kCheckThreads = 1024;
// jagged_rowwise with at most this many groups: every row-block CTA checks the ends itself.
constexpr int64_t kFusedCheckGroups = 1024;
constexpr int kColThreads = 256;  // jagged_colwise scale and encode kernels
constexpr int kColAmaxThreads = 128;
constexpr int kColAmaxRows = 64;   // rows of X one amax thread walks
constexpr int kColTileRows = 128;  // encode tile: rows of X (columns of Y)
constexpr int kColTileCols = 64;   // encode tile: columns of X (rows of Y)
constexpr int64_t kScratchAlign = 256;

inline int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

}  // namespace quant
}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_ROWCOL_CUH_
