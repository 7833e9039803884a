#include "kernels/ops/checks.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"

namespace kd {
namespace internal {

absl::Status CheckTensor(const Tensor& t, absl::string_view field, int rank,
                         std::initializer_list<DType> dtypes, Layout layout) {
  if (!t.present()) return Invalid(field, " is required");
  if (t.rank != rank) {
    return Invalid(field, ".shape ", t.ShapeString(), " has rank ", t.rank, "; must be ", rank);
  }
  const bool transposed = layout == Layout::kOrTransposed2d && rank == 2 && t.strides[0] == 1;
  if (t.strides[rank - 1] != 1 && !transposed) {
    return Invalid(field, ".strides[", rank - 1, "]=", t.strides[rank - 1],
                   " must be 1 (the innermost dimension is contiguous)");
  }
  if (dtypes.size() == 0) return absl::OkStatus();
  for (DType d : dtypes) {
    if (t.dtype == d) return absl::OkStatus();
  }
  std::vector<absl::string_view> names;
  for (DType d : dtypes) names.push_back(DTypeName(d));
  return Invalid(field, ".dtype=", DTypeName(t.dtype), " must be one of ",
                 absl::StrJoin(names, ", "));
}

absl::Status CheckShape(const Tensor& t, absl::string_view field,
                        std::initializer_list<int64_t> expected) {
  bool same = static_cast<int>(expected.size()) == t.rank;
  int i = 0;
  for (int64_t e : expected) {
    if (same && t.shape[i] != e) same = false;
    ++i;
  }
  if (same) return absl::OkStatus();
  return Invalid(field, ".shape ", t.ShapeString(), " must be (", absl::StrJoin(expected, ", "),
                 ")");
}

}  // namespace internal
}  // namespace kd
