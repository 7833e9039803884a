#include "kerneld/kernels/autotune.h"

namespace kd {

ConfigSelection SelectConfig(TuneCache& cache, const ConfigSpaceRegistry& spaces,
                             const TuneKey& key) {
  ConfigSelection s;
  if (std::optional<std::string> cached = cache.Lookup(key)) {
    s.config = *std::move(cached);
    s.hit = true;
    return s;
  }
  absl::StatusOr<std::string> fallback = spaces.Default(key);
  if (fallback.ok()) s.config = *std::move(fallback);
  return s;
}

}  // namespace kd
