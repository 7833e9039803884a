#include "kerneld/kernels/dtype.h"

namespace kd {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kE4M3FN:
    case DType::kE4M3FNUZ:
    case DType::kE5M2:
    case DType::kE8M0:
    case DType::kU8:
      return 1;
    case DType::kI64:
      return 8;
    case DType::kInvalid:
      break;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kE4M3FN:
      return "e4m3fn";
    case DType::kE4M3FNUZ:
      return "e4m3fnuz";
    case DType::kE5M2:
      return "e5m2";
    case DType::kE8M0:
      return "e8m0";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU8:
      return "u8";
    case DType::kInvalid:
      break;
  }
  return "invalid";
}

bool IsFp8(DType dtype) {
  return dtype == DType::kE4M3FN || dtype == DType::kE4M3FNUZ || dtype == DType::kE5M2;
}

bool IsHighPrecisionFloat(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
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
