// Runs an op on a backend the way the daemon does: Validate first, and the backend only with the
// ValidatedOp that makes. For tests that build ops by hand.
#ifndef KERNELD_TESTS_SUPPORT_RUN_OP_H_
#define KERNELD_TESTS_SUPPORT_RUN_OP_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneld/kernels/backend.h"
#include "kerneld/kernels/ops.h"

namespace kd {

// Validate's error, else the backend's Run.
inline absl::Status RunOp(Backend& backend, Op op, Stream& stream,
                          KernelTimingFn on_timed = nullptr) {
  absl::StatusOr<ValidatedOp> validated = Validate(std::move(op));
  if (!validated.ok()) return validated.status();
  return backend.Run(*validated, stream, std::move(on_timed));
}

// Validate's error, else the backend's Supports.
inline absl::Status SupportsOp(const Backend& backend, Op op) {
  absl::StatusOr<ValidatedOp> validated = Validate(std::move(op));
  if (!validated.ok()) return validated.status();
  return backend.Supports(*validated);
}

}  // namespace kd

#endif  // KERNELD_TESTS_SUPPORT_RUN_OP_H_
