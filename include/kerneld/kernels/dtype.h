// Element types that tensors may hold, and their properties.
#ifndef KERNELD_KERNELS_DTYPE_H_
#define KERNELD_KERNELS_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "kerneld/op_table.h"

namespace kd {

// The element types of kerneld/op_table.h (KD_ENUM_VALUES_DType), with its values.
enum class DType : uint8_t {
  kInvalid = 0,
#define KD_DTYPE_ENUMERATOR_(suffix, cpp, value, ...) cpp = value,
  KD_ENUM_VALUES_DType(KD_DTYPE_ENUMERATOR_)
#undef KD_DTYPE_ENUMERATOR_
};

// Bytes per element; 0 for kInvalid.
size_t DTypeSize(DType dtype);
// Its label in the table, as used in metric labels and messages ("bf16", "e4m3fn"); "invalid"
// for kInvalid.
absl::string_view DTypeName(DType dtype);
bool IsFp8(DType dtype);
// Largest finite value of an FP8 format (448, 240, 57344); 0 for other types.
float Fp8Max(DType dtype);

}  // namespace kd

#endif  // KERNELD_KERNELS_DTYPE_H_
