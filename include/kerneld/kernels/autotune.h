// Autotune: config spaces per kernel and architecture, a noise-robust tuner, and the warm cache
// that serves tuned configs (persisted, validated, never torn). One include for all of it:
//   autotune_key.h    TuneKey, shape classes, the canonical key string
//   autotune_space.h  ConfigSpace, ConfigSpaceRegistry, the built-in spaces and their parsers
//   autotune_tuner.h  TuneHarness, Timer, Tune(), the CPU GEMM harness
//   autotune_cache.h  TuneCache, the cache file format and its atomic write
//   autotune_runner.h TuneKeys (a batch with progress), BackgroundTuner (misses, off the
//                     request path)
//
// How the pieces serve a request: build the op's key (GemmTuneKeyFromArgs with the space's
// kernel_version), look it up (TuneCache::Lookup); on a miss run SelectConfig's default, which
// needs no tuning, and queue the key on a BackgroundTuner (or tune it with `kctl tune`, which
// runs TuneKeys); the tuned config takes over once stored.
#ifndef KERNELD_KERNELS_AUTOTUNE_H_
#define KERNELD_KERNELS_AUTOTUNE_H_

#include <string>

#include "kerneld/kernels/autotune_cache.h"
#include "kerneld/kernels/autotune_key.h"
#include "kerneld/kernels/autotune_runner.h"
#include "kerneld/kernels/autotune_space.h"
#include "kerneld/kernels/autotune_tuner.h"
#include "kerneld/kernels/gemm_config.h"

namespace kd {

struct ConfigSelection {
  // Typed (GemmArgs::config); std::monostate when the key has no space (the kernel is not
  // tunable there) and the backend runs its own default.
  GemmKernelConfig config;
  bool hit = false;  // served from the cache
};

// The config to run `key` with: the cached one, resolved when its entry was stored (a hit), else
// the space's heuristic default, resolved here (a miss, counted and recorded by the cache). Never
// blocks on tuning. Thread-safe.
ConfigSelection SelectConfig(TuneCache& cache, const ConfigSpaceRegistry& spaces,
                             const TuneKey& key);

}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_H_
