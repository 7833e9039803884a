// Host launchers of the CUDA kernels. Parameters are plain structs of device pointers and sizes,
// filled by the backend from a validated op; the launchers enqueue on `stream` and never
// synchronize. They return the launch's cudaError_t (cudaErrorInvalidConfiguration for a shape
// the grid cannot cover). This header is plain C++ (no absl) so that nvcc and the host compiler
// both read it.
#ifndef KERNELD_KERNELS_CUDA_CUDA_KERNELS_H_
#define KERNELD_KERNELS_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kd {
namespace cuda {

enum class InputType : uint8_t { kF32, kBF16, kF16 };
enum class Fp8Format : uint8_t { kE4M3FN, kE4M3FNUZ, kE5M2 };

// Blockwise FP8 quantization (1x128 or 128x128 blocks of Y = X), the recipe of
// kernels/cpu/quantize.cc. Strides are in elements; the last dimension of every tensor is
// contiguous.
struct QuantizeParams {
  const void* input = nullptr;  // (m, k)
  int64_t input_stride = 0;
  InputType input_type = InputType::kBF16;
  uint8_t* output = nullptr;  // (m, k)
  int64_t output_stride = 0;
  Fp8Format format = Fp8Format::kE4M3FN;
  float* scales = nullptr;  // (m, k/128) or (k/128, m) [1x128]; (ceil(m/128), k/128) [128x128]
  int64_t scales_stride = 0;
  int64_t m = 0;
  int64_t k = 0;              // a multiple of 128
  bool tile_128x128 = false;  // false: 1x128 blocks
  bool k_block_major_scales = false;
  bool pow2_scales = false;
  float eps = 1e-12f;
};
cudaError_t LaunchQuantize(const QuantizeParams& params, cudaStream_t stream);

// The tiled one-pass quantizer (quantize_tiled.cu): one read of X (m, k) and one write of each
// output, a CTA per 128x128 tile of X, the recipe of kernels/cpu/quantize.cc (bit-exact).
//   k1x128Transposed    1x128 of Y = Xᵀ (k, m), m a multiple of 128: output (k, m), scales
//                       (k, m/128) or K-block-major (m/128, k)
//   k128x1              128x1 of Y = X: output (m, k), scales (ceil(m/128), k)
//   k128x1Transposed    128x1 of Y = Xᵀ: output (k, m), scales (ceil(k/128), m)
//   k128x128Transposed  128x128 of Y = Xᵀ, m a multiple of 128: output (k, m), scales
//                       (ceil(k/128), m/128)
//   kDual               m and k multiples of 128: 1x128 of X into output (m, k) / scales (m, k/128)
//                       and 1x128 of Xᵀ into output_t (k, m) / scales_t (k, m/128); K-block-major
//                       scales are (k/128, m) and (m/128, k)
// Any m, k and row strides otherwise (16-byte loads and stores where alignment allows).
enum class TiledQuantizeMode : uint8_t {
  k1x128Transposed,
  k128x1,
  k128x1Transposed,
  k128x128Transposed,
  kDual,
};
struct TiledQuantizeParams {
  TiledQuantizeMode mode = TiledQuantizeMode::k128x1;
  const void* input = nullptr;  // X (m, k)
  int64_t input_stride = 0;     // elements
  InputType input_type = InputType::kBF16;
  int64_t m = 0, k = 0;
  Fp8Format format = Fp8Format::kE4M3FN;
  uint8_t* output = nullptr;
  int64_t output_stride = 0;
  float* scales = nullptr;
  int64_t scales_stride = 0;
  uint8_t* output_t = nullptr;  // kDual only
  int64_t output_t_stride = 0;
  float* scales_t = nullptr;  // kDual only
  int64_t scales_t_stride = 0;
  bool k_block_major_scales = false;  // k1x128Transposed and kDual
  bool pow2_scales = false;
  float eps = 1e-12f;
};
cudaError_t LaunchQuantizeTiled(const TiledQuantizeParams& params, cudaStream_t stream);

// Compares the quantizer's hardware FP8 conversion (fp8::EncodeFinite4 in fp8_encode.h) with
// fp8::Encode on all 2^32 - 2^24 + 2 non-NaN floats for `format`: adds the number of differing
// bytes to *mismatches and lowers *first_bad (initialise it to 0xffffffff) to the smallest
// differing input's bit pattern. Both pointers are device memory.
cudaError_t LaunchFp8EncodeCheck(Fp8Format format, unsigned long long* mismatches,
                                 uint32_t* first_bad, cudaStream_t stream);

// What a kernel found wrong in data it read from device memory (group offsets), written to host-
// mapped memory that the backend reads once the stream's work completed. The first violation
// wins; `code` is 0 while nothing was found.
struct DeviceErrorRecord {
  enum Code : int32_t {
    kNone = 0,
    kGroupEndDecreasing = 1,  // ends[group] < ends[group-1] (or < 0 for group 0): value, bound
    kGroupEndTotal = 2,       // ends[last] != total rows: value, bound
    kPaddedRowsExceed = 3,    // unpad: padded row count (value) > input rows (bound)
  };
  int32_t code;
  int32_t op;  // 0: pad, 1: unpad, 2: quantize (jagged)
  int64_t group;
  int64_t value;
  int64_t bound;
};

// Device scratch the pad/unpad launchers need for `groups` groups, in bytes (a copy of the
// group ends, the padded ends and a validity word), 16-byte aligned.
uint64_t PadScratchBytes(int64_t groups);

struct PadParams {
  const void* input = nullptr;  // (in_rows, row_bytes / elem) rows of bytes
  int64_t input_stride_bytes = 0;
  void* output = nullptr;
  int64_t output_stride_bytes = 0;
  int64_t in_rows = 0;
  int64_t out_rows = 0;
  int64_t row_bytes = 0;
  const void* group_ends = nullptr;  // (groups) i32 or i64, client memory, read once
  int64_t group_ends_stride = 0;     // elements
  bool group_ends_i64 = false;
  int64_t groups = 0;
  int32_t* padded_group_ends = nullptr;  // pad only: (groups) i32
  int64_t padded_group_ends_stride = 0;
  int32_t alignment = 0;
  void* scratch = nullptr;             // PadScratchBytes(groups) bytes of device memory
  DeviceErrorRecord* error = nullptr;  // host-mapped
};
// Pad: output rows of group g start at a multiple of `alignment`; rows past a group's data and
// past the last group are zero. Group ends are copied to scratch and checked on the device
// (non-decreasing, non-negative, last == in_rows); on a violation the record is written and no
// output row is touched.
cudaError_t LaunchPad(const PadParams& params, cudaStream_t stream);
// Unpad: the reverse (in_rows padded rows to out_rows rows). Checks as Pad with last ==
// out_rows, and that the padded row count fits in in_rows.
cudaError_t LaunchUnpad(const PadParams& params, cudaStream_t stream);

// The row- and column-wise quantizers (quantize_rows.cu), the recipes of
// kernels/cpu/quantize.cc: per_row, per_tensor and mx1x32 of Y = X and of Y = Xᵀ (the
// *Transposed kinds), jagged_rowwise (1x128 of X, group ends checked) and jagged_colwise (Y = Xᵀ,
// one scale per (group, column of X)). Strides are in elements.
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
struct RowQuantizeParams {
  RowQuantizeKind kind = RowQuantizeKind::kPerRow;
  const void* input = nullptr;  // X (m, k)
  int64_t input_stride = 0;
  InputType input_type = InputType::kBF16;
  int64_t m = 0, k = 0;
  uint8_t* output = nullptr;  // Y: (m, k), or (k, m) for jagged_colwise and *Transposed
  int64_t output_stride = 0;
  Fp8Format format = Fp8Format::kE4M3FN;
  // f32, or u8 e8m0 for mx1x32: (m, 1) per_row, (1) per_tensor, (m, k/32) mx1x32, (m, k/128) or
  // (k/128, m) jagged_rowwise, (groups, k) jagged_colwise; of Y = Xᵀ: (k, 1) per_row, (1)
  // per_tensor, (k, m/32) mx1x32.
  void* scales = nullptr;
  int64_t scales_stride = 0;
  bool k_block_major_scales = false;  // jagged_rowwise
  bool pow2_scales = false;
  float eps = 1e-12f;
  bool mx_rceil = false;
  // Jagged: (groups) i32 or i64 row ends in client memory, read once on the device and checked
  // as kd::CheckGroupEnds does; a violation is written to `error` (host-mapped, op 2) and the op
  // then writes nothing.
  const void* group_ends = nullptr;
  int64_t group_ends_stride = 0;
  bool group_ends_i64 = false;
  int64_t groups = 0;
  DeviceErrorRecord* error = nullptr;
  void* scratch = nullptr;  // RowQuantizeScratchBytes(params) bytes of device memory
};
// Device scratch LaunchRowQuantize needs for `params` (0: none), 256-byte aligned.
uint64_t RowQuantizeScratchBytes(const RowQuantizeParams& params);
cudaError_t LaunchRowQuantize(const RowQuantizeParams& params, cudaStream_t stream);

}  // namespace cuda
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_CUDA_KERNELS_H_
