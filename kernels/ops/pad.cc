// The pad and unpad ops: their rules and metric labels (OpTraits<PadArgs>, OpTraits<UnpadArgs>).
// Group ends are data: the backend checks them when it reads them (CheckGroupEnds, or on the
// device).
#include "absl/strings/str_cat.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/ops/checks.h"

namespace kd {
namespace {

using internal::CheckShape;
using internal::CheckTensor;
using internal::Invalid;

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

absl::Status CheckAlignment(int32_t alignment) {
  if (alignment < 1 || alignment > 1024 || !IsPowerOfTwo(alignment)) {
    return Invalid("alignment=", alignment, " must be a power of two in 1..1024 (16, 32, 128)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status OpTraits<PadArgs>::Validate(const PadArgs& a) {
  KD_RETURN_IF_ERROR(CheckTensor(a.input, "input", 2, {}));
  KD_RETURN_IF_ERROR(CheckTensor(a.group_ends, "group_ends", 1, {DType::kI32, DType::kI64}));
  KD_RETURN_IF_ERROR(CheckTensor(a.output, "output", 2, {a.input.dtype}));
  KD_RETURN_IF_ERROR(CheckTensor(a.padded_group_ends, "padded_group_ends", 1, {DType::kI32}));
  KD_RETURN_IF_ERROR(CheckAlignment(a.alignment));
  const int64_t t = a.input.shape[0], h = a.input.shape[1], g = a.group_ends.shape[0];
  if (a.output.shape[1] != h) {
    return Invalid("output.shape[1]=", a.output.shape[1], " must equal input.shape[1]=", h);
  }
  const int64_t bound = t + g * (a.alignment - 1);
  if (a.output.shape[0] < bound) {
    return Invalid("output.shape[0]=", a.output.shape[0], " must be >= input rows + groups * ",
                   "(alignment - 1) = ", bound);
  }
  KD_RETURN_IF_ERROR(CheckShape(a.padded_group_ends, "padded_group_ends", {g}));
  return absl::OkStatus();
}

std::string OpTraits<PadArgs>::VariantLabel(const PadArgs& a) {
  return absl::StrCat("a", a.alignment);
}

uint32_t OpTraits<PadArgs>::VariantKey(const PadArgs& a) {
  return static_cast<uint32_t>(a.alignment);
}

absl::Status OpTraits<UnpadArgs>::Validate(const UnpadArgs& a) {
  KD_RETURN_IF_ERROR(CheckTensor(a.input, "input", 2, {}));
  KD_RETURN_IF_ERROR(CheckTensor(a.group_ends, "group_ends", 1, {DType::kI32, DType::kI64}));
  KD_RETURN_IF_ERROR(CheckTensor(a.output, "output", 2, {a.input.dtype}));
  KD_RETURN_IF_ERROR(CheckAlignment(a.alignment));
  if (a.output.shape[1] != a.input.shape[1]) {
    return Invalid("output.shape[1]=", a.output.shape[1],
                   " must equal input.shape[1]=", a.input.shape[1]);
  }
  if (a.input.shape[0] < a.output.shape[0]) {
    return Invalid("input.shape[0]=", a.input.shape[0],
                   " must be >= output.shape[0]=", a.output.shape[0],
                   " (the padded tensor holds every row)");
  }
  return absl::OkStatus();
}

std::string OpTraits<UnpadArgs>::VariantLabel(const UnpadArgs& a) {
  return absl::StrCat("a", a.alignment);
}

uint32_t OpTraits<UnpadArgs>::VariantKey(const UnpadArgs& a) {
  return static_cast<uint32_t>(a.alignment);
}

}  // namespace kd
