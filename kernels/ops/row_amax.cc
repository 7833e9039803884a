// The row_amax op's rules (OpTraits<RowAmaxArgs>): those of RowAmaxOp in kerneld.proto.
#include "kerneld/kernels/status_macros.h"
#include "kernels/ops/checks.h"

namespace kd {

absl::Status OpTraits<RowAmaxArgs>::Validate(const RowAmaxArgs& a) {
  KD_RETURN_IF_ERROR(
      internal::CheckTensor(a.input, "input", 2, {DType::kF32, DType::kBF16, DType::kF16}));
  KD_RETURN_IF_ERROR(internal::CheckTensor(a.output, "output", 1, {DType::kF32}));
  if (a.input.shape[1] < 1) {
    return internal::Invalid("input.shape[1]=", a.input.shape[1], " must be >= 1");
  }
  return internal::CheckShape(a.output, "output", {a.input.shape[0]});
}

}  // namespace kd
