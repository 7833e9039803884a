// Status plumbing shared by every layer. Debian's Abseil (20220623) ships no RETURN_IF_ERROR, so
// the project defines its own, once.
#ifndef KERNELD_KERNELS_STATUS_MACROS_H_
#define KERNELD_KERNELS_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define KD_CONCAT_INNER_(a, b) a##b
#define KD_CONCAT_(a, b) KD_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define KD_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status kd_status_ = (expr);      \
    if (!kd_status_.ok()) return kd_status_; \
  } while (0)

// `lhs` = value of `rexpr` (an absl::StatusOr<T>), or returns its status.
#define KD_ASSIGN_OR_RETURN(lhs, rexpr) \
  KD_ASSIGN_OR_RETURN_IMPL_(KD_CONCAT_(kd_statusor_, __LINE__), lhs, rexpr)
#define KD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

namespace kd {

// The same code with `prefix` put before the message, for naming the field a nested check was
// about ("ops[2].quantize." + "input.shape[1]=100 ...").
inline absl::Status PrefixStatus(absl::string_view prefix, const absl::Status& status) {
  if (status.ok() || prefix.empty()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

}  // namespace kd

#endif  // KERNELD_KERNELS_STATUS_MACROS_H_
