// Host launchers of the CUDA pad/unpad kernels and the FP8 conversion check, and the device error
// record they share with the jagged quantizers (the quantizers: quantize_params.h,
// quantize_dispatch.h). Parameters are plain structs of device pointers and sizes, filled by the
// backend from a validated op; the launchers enqueue on `stream` and never synchronize. They
// return the launch's cudaError_t (cudaErrorInvalidConfiguration for a shape the grid cannot
// cover). This header is plain C++ (no absl) so that nvcc and the host compiler both read it.
#ifndef KERNELD_KERNELS_GPU_GPU_KERNELS_H_
#define KERNELD_KERNELS_GPU_GPU_KERNELS_H_

#include <cstdint>

#include "kernels/gpu/quantize_params.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {

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

struct RowAmaxParams {
  const void* input = nullptr;  // (rows, cols)
  int32_t input_dtype = 0;      // 0 f32, 1 bf16, 2 f16
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t input_row_stride = 0;  // elements
  float* output = nullptr;       // (rows)
  int64_t output_stride = 0;     // elements
};
// output[r] = the largest |input[r, c]| (NaN if the row holds one), exactly.
cudaError_t LaunchRowAmax(const RowAmaxParams& params, cudaStream_t stream);

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_GPU_KERNELS_H_
