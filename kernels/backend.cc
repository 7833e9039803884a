#include "kerneld/kernels/backend.h"

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/tune_harness.h"

namespace kd {

absl::StatusOr<std::unique_ptr<TuneHarness>> Backend::CreateTuneHarness(
    const TuneKey& key, absl::string_view reference_config, int device) {
  return absl::UnimplementedError(
      absl::StrCat("the ", name(), " backend has no tuning harness yet"));
}

}  // namespace kd
