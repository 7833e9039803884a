// Fuzzes the autotune cache file: ParseCacheFile (what Load and ImportCache read from disk or a
// client), TuneCache::Import with this build's config spaces checking each entry, and the round
// trip: a file that parses serializes to one that parses to as many entries.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kerneld/kernels/autotune.h"
#include "kerneld/kernels/autotune_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kd;
  static TuneCache* cache = [] {
    TuneCacheOptions o;
    o.validators.kerneld_version = KD_VERSION;
    o.validators.device = "cpu (fuzz)";
    o.validators.arch = "x86_64";
    o.spaces = &ConfigSpaceRegistry::Builtin();
    o.log = [](absl::string_view) {};
    return new TuneCache(o);
  }();
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<CacheFile> file = ParseCacheFile(bytes);
  cache->Import(bytes).IgnoreError();
  cache->Clear(/*include_pinned=*/true);
  if (file.ok()) {
    absl::StatusOr<CacheFile> again = ParseCacheFile(SerializeCacheFile(*file));
    if (!again.ok() || again->entries.size() != file->entries.size()) std::abort();
  }
  return 0;
}
