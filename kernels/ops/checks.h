// Checks shared by the op definitions (kernels/ops/*.cc). Not part of the public API.
#ifndef KERNELD_KERNELS_OPS_CHECKS_H_
#define KERNELD_KERNELS_OPS_CHECKS_H_

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/ops.h"

namespace kd {
namespace internal {

template <typename... Parts>
absl::Status Invalid(Parts&&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(std::forward<Parts>(parts)...));
}

// How a field may lie in memory: its innermost dimension contiguous (every field), or, for a 2-D
// field that says so, also transposed (strides (1, ld): GEMM's K-block-major 1x128 scales).
enum class Layout { kInnermostContiguous, kOrTransposed2d };

// `field` is present, of rank `rank`, of one of `dtypes` (any dtype when empty) and laid out as
// `layout` allows.
absl::Status CheckTensor(const Tensor& t, absl::string_view field, int rank,
                         std::initializer_list<DType> dtypes,
                         Layout layout = Layout::kInnermostContiguous);
// `field` has exactly `expected` as shape.
absl::Status CheckShape(const Tensor& t, absl::string_view field,
                        std::initializer_list<int64_t> expected);

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace internal
}  // namespace kd

#endif  // KERNELD_KERNELS_OPS_CHECKS_H_
