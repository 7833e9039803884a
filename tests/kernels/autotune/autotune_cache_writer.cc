// Writes the cache file in a loop until killed, for autotune_crash_test:
//   autotune_cache_writer <path> <first generation>
// Before saving generation g it writes "b <g>\n" to stdout, after the save returned "e <g>\n"
// (unbuffered), so the test knows which generations may be on disk when it kills the process.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/kernels/autotune/cache_writer_common.h"

namespace {

void Say(const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(STDOUT_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) std::_Exit(3);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <path> <first generation>\n", argv[0]);
    return 2;
  }
  kd::TuneCacheOptions options;
  options.path = argv[1];
  options.validators = kd::crash_test::Validators();
  kd::TuneCache cache(options);
  for (int64_t g = std::strtoll(argv[2], nullptr, 10);; ++g) {
    cache.Clear(true);
    for (int i = 0; i < kd::crash_test::EntryCount(g); ++i) {
      kd::CacheEntry e;
      e.key = kd::crash_test::KeyFor(i);
      e.config = kd::crash_test::Config(g);
      e.seconds = 1e-3;
      e.updated_unix = g;
      if (!cache.Put(e).ok()) return 4;
    }
    Say(absl::StrCat("b ", g, "\n"));
    const absl::Status s = cache.Save();
    if (!s.ok()) {
      fprintf(stderr, "save: %s\n", s.ToString().c_str());
      return 5;
    }
    Say(absl::StrCat("e ", g, "\n"));
  }
}
