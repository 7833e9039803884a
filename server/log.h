// Minimal timestamped logging to stderr (Debian's Abseil 20220623 predates absl/log).
#ifndef KERNELD_SERVER_LOG_H_
#define KERNELD_SERVER_LOG_H_

#include <cstdarg>
#include <cstdio>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kd {

inline void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void Log(const char* fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::fprintf(stderr, "%s kerneld: %s\n", ts.c_str(), line);
}

}  // namespace kd

#endif  // KERNELD_SERVER_LOG_H_
