#include "kerneld/kernels/autotune.h"

namespace kd {

ConfigSelection SelectConfig(TuneCache& cache, const ConfigSpaceRegistry& spaces,
                             const TuneKey& key) {
  ConfigSelection s;
  if (std::optional<GemmKernelConfig> cached = cache.Lookup(key)) {
    s.config = *cached;
    s.hit = true;
    return s;
  }
  absl::StatusOr<GemmKernelConfig> fallback = spaces.DefaultConfig(key);
  if (fallback.ok()) s.config = *fallback;
  return s;
}

}  // namespace kd
