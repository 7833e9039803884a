// One quantize op as the CUDA quantizers see it: every tensor and option of a validated
// kd::QuantizeArgs, filled once per op (MakeQuantizeParams, quantize_dispatch.h), with the kernel
// family that runs it. Each family's launcher takes it whole and packs its own kernels' arguments.
// Plain C++ (no absl): nvcc and the host compiler both read it. Strides are in elements; the last
// dimension of every tensor is contiguous.
//
// The families (the recipe of kernels/cpu/quantize.cc, bit-exact, in every one):
//   kBlockwise  1x128 and 128x128 blocks of Y = X (quantize_blockwise.cuh)
//   kTiled      1x128, 128x1 and 128x128 of Y = Xᵀ, 128x1 of Y = X, and the dual passes (1x128,
//               128x128), one read of X per 128x128 tile (quantize_tiled.cu)
//   kRowCol     per_row, per_tensor and mx1x32 of Y = X and of Y = Xᵀ, and the jagged
//               granularities (quantize_rowcol.cu)
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_PARAMS_H_
#define KERNELD_KERNELS_GPU_QUANTIZE_PARAMS_H_

#include <cstdint>

#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {

struct DeviceErrorRecord;  // cuda_kernels.h

enum class InputType : uint8_t { kF32, kBF16, kF16 };
enum class Fp8Format : uint8_t { kE4M3FN, kE4M3FNUZ, kE5M2 };

enum class QuantizeFamily : uint8_t { kBlockwise, kTiled, kRowCol };

// The tiled family's forms (X is (m, k)):
//   k1x128Transposed    1x128 of Y = Xᵀ, m a multiple of 128: output (k, m), scales (k, m/128) or
//                       K-block-major (m/128, k)
//   k128x1              128x1 of Y = X: output (m, k), scales (ceil(m/128), k)
//   k128x1Transposed    128x1 of Y = Xᵀ: output (k, m), scales (ceil(k/128), m)
//   k128x128Transposed  128x128 of Y = Xᵀ, m a multiple of 128: output (k, m), scales
//                       (ceil(k/128), m/128)
//   kDual               m and k multiples of 128: 1x128 of X into output (m, k) / scales (m, k/128)
//                       and 1x128 of Xᵀ into output_t (k, m) / scales_t (k, m/128); K-block-major
//                       scales are (k/128, m) and (m/128, k)
//   k128x128Dual        m and k multiples of 128: 128x128 of X into output (m, k) / scales
//                       (m/128, k/128) and of Xᵀ into output_t (k, m) / scales_t (k/128, m/128),
//                       one amax per tile for both
// Any m, k and row strides otherwise (16-byte loads and stores where alignment allows).
enum class TiledQuantizeMode : uint8_t {
  k1x128Transposed,
  k128x1,
  k128x1Transposed,
  k128x128Transposed,
  kDual,
  k128x128Dual,
};

// The row/column family's kinds: per_row, per_tensor and mx1x32 of Y = X and of Y = Xᵀ (the
// *Transposed kinds), jagged_rowwise (1x128 of X, group ends checked) and jagged_colwise
// (Y = Xᵀ, one scale per (group, column of X)).
enum class RowQuantizeKind : uint8_t {
  kPerRow,
  kPerTensor,
  kMx1x32,
  kJaggedRowwise,
  kJaggedColwise,
  kPerRowTransposed,
  kPerTensorTransposed,
  kMx1x32Transposed
};

struct QuantizeParams {
  // Which kernels run the op, and in which form.
  QuantizeFamily family = QuantizeFamily::kBlockwise;
  bool tile_128x128 = false;  // kBlockwise: 128x128 blocks (else 1x128)
  TiledQuantizeMode tiled_mode = TiledQuantizeMode::k128x1;
  RowQuantizeKind row_kind = RowQuantizeKind::kPerRow;

  const void* input = nullptr;  // X (m, k)
  int64_t input_stride = 0;
  InputType input_type = InputType::kBF16;
  int64_t m = 0;
  int64_t k = 0;
  Fp8Format format = Fp8Format::kE4M3FN;
  uint8_t* output = nullptr;  // Y: (m, k), or (k, m) for the transposed forms
  int64_t output_stride = 0;
  // f32, or u8 e8m0 for mx1x32. kBlockwise: (m, k/128) or K-block-major (k/128, m) [1x128],
  // (ceil(m/128), k/128) [128x128]. kTiled: see TiledQuantizeMode. kRowCol: (m, 1) per_row, (1)
  // per_tensor, (m, k/32) mx1x32, (m, k/128) or (k/128, m) jagged_rowwise, (groups, k)
  // jagged_colwise; of Y = Xᵀ: (k, 1) per_row, (1) per_tensor, (k, m/32) mx1x32.
  void* scales = nullptr;
  int64_t scales_stride = 0;
  uint8_t* output_t = nullptr;  // kDual and k128x128Dual only
  int64_t output_t_stride = 0;
  float* scales_t = nullptr;  // kDual and k128x128Dual only
  int64_t scales_t_stride = 0;
  bool k_block_major_scales = false;  // 1x128 scales (blockwise, k1x128Transposed, kDual, jagged)
  bool pow2_scales = false;
  float eps = 1e-12f;
  bool mx_rceil = false;
  // Jagged: (groups) i32 or i64 row ends in client memory, read once on the device and checked as
  // kd::CheckGroupEnds does; a violation is written to `error` (host-mapped, op 2) and the op then
  // writes nothing.
  const void* group_ends = nullptr;
  int64_t group_ends_stride = 0;
  bool group_ends_i64 = false;
  int64_t groups = 0;
  DeviceErrorRecord* error = nullptr;
  void* scratch = nullptr;  // QuantizeScratchBytes(params) bytes of device memory
};

// The families' launchers (LaunchQuantize in quantize_dispatch.h picks one). Each enqueues on
// `stream` without synchronizing and returns the launch's cudaError_t
// (cudaErrorInvalidConfiguration for a shape the grid cannot cover).
cudaError_t LaunchQuantizeBlockwise(const QuantizeParams& params, cudaStream_t stream);
cudaError_t LaunchQuantizeTiled(const QuantizeParams& params, cudaStream_t stream);
cudaError_t LaunchQuantizeRowCol(const QuantizeParams& params, cudaStream_t stream);
// The tiled and row/column families' per-device first-use work on the current device, for every
// kernel they launch: shared-memory opt-ins and occupancy queries (device_attributes.h's caches).
// Driver calls only. The first error.
cudaError_t WarmQuantizeTiled();
cudaError_t WarmQuantizeRowCol();
// Device scratch the row/column family needs (0: none), 256-byte aligned.
uint64_t RowColQuantizeScratchBytes(const QuantizeParams& params);

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_PARAMS_H_
