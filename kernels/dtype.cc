#include "kerneld/kernels/dtype.h"

namespace kd {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
#define KD_DTYPE_SIZE_(suffix, cpp, value, label, bytes) \
  case DType::cpp:                                       \
    return bytes;
    KD_ENUM_VALUES_DType(KD_DTYPE_SIZE_)
#undef KD_DTYPE_SIZE_
        case DType::kInvalid : break;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
#define KD_DTYPE_NAME_(suffix, cpp, value, label, bytes) \
  case DType::cpp:                                       \
    return label;
    KD_ENUM_VALUES_DType(KD_DTYPE_NAME_)
#undef KD_DTYPE_NAME_
        case DType::kInvalid : break;
  }
  return "invalid";
}

bool IsFp8(DType dtype) {
  return dtype == DType::kE4M3FN || dtype == DType::kE4M3FNUZ || dtype == DType::kE5M2;
}

float Fp8Max(DType dtype) {
  switch (dtype) {
    case DType::kE4M3FN:
      return 448.0f;
    case DType::kE4M3FNUZ:
      return 240.0f;
    case DType::kE5M2:
      return 57344.0f;
    default:
      return 0.0f;
  }
}

}  // namespace kd
