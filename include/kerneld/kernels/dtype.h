// Element types that tensors may hold, and their properties.
#ifndef KERNELD_KERNELS_DTYPE_H_
#define KERNELD_KERNELS_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace kd {

// Values match kerneld.v1.DType on the wire.
enum class DType : uint8_t {
  kInvalid = 0,
  kF32 = 1,
  kBF16 = 2,
  kF16 = 3,
  kE4M3FN = 4,
  kE4M3FNUZ = 5,
  kE5M2 = 6,
  kE8M0 = 7,
  kI32 = 8,
  kI64 = 9,
  kU8 = 10,
};

// Bytes per element; 0 for kInvalid.
size_t DTypeSize(DType dtype);
// Lower-case name as used in metric labels and messages ("bf16", "e4m3fn").
absl::string_view DTypeName(DType dtype);
bool IsFp8(DType dtype);
// True for the floating types a quantizer accepts as input (f32, bf16, f16).
bool IsHighPrecisionFloat(DType dtype);
// Largest finite value of an FP8 format (448, 240, 57344); 0 for other types.
float Fp8Max(DType dtype);

}  // namespace kd

#endif  // KERNELD_KERNELS_DTYPE_H_
