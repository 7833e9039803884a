// What autotune_cache_writer writes and autotune_crash_test checks: generation `g` of the cache
// holds EntryCount(g) entries, every one with config "g<g>".
#ifndef KERNELD_TESTS_KERNELS_AUTOTUNE_CACHE_WRITER_COMMON_H_
#define KERNELD_TESTS_KERNELS_AUTOTUNE_CACHE_WRITER_COMMON_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/autotune_cache.h"

namespace kd {
namespace crash_test {

inline CacheValidators Validators() {
  CacheValidators v;
  v.kerneld_version = "crash-test";
  v.device = "cpu (crash test)";
  v.arch = "x86_64";
  return v;
}

// Varies with the generation so that a file mixing two generations cannot pass by its size.
inline int EntryCount(int64_t generation) { return 1500 + static_cast<int>(generation % 13) * 50; }

inline std::string Config(int64_t generation) { return absl::StrCat("g", generation); }

inline TuneKey KeyFor(int i) {
  DeviceProperties p;
  p.name = Validators().device;
  p.arch = Validators().arch;
  return MakeGemmTuneKey(GemmVariant::kNT, DType::kE4M3FN, DType::kBF16, 1 + i, 4096, 4096, 1, p,
                         1);
}

}  // namespace crash_test
}  // namespace kd

#endif  // KERNELD_TESTS_KERNELS_AUTOTUNE_CACHE_WRITER_COMMON_H_
