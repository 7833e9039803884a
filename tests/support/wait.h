// Test support: waiting for a condition rather than for a length of time.
#ifndef KERNELD_TESTS_SUPPORT_WAIT_H_
#define KERNELD_TESTS_SUPPORT_WAIT_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kd {
namespace testing {

// How long a test waits for something that takes well under a second on an idle machine before
// it calls it a hang: far beyond a loaded 2-core machine (2x) running a sanitizer build (2-5x).
// It bounds a wait, never asserts a speed.
inline constexpr absl::Duration kHangTimeout = absl::Seconds(60);

// Polls `condition` every `poll` until it holds; false when `limit` passed first (the condition
// is tried once more at the limit, so a slow last poll is not a false timeout).
inline bool WaitFor(const std::function<bool()>& condition, absl::Duration limit = kHangTimeout,
                    absl::Duration poll = absl::Milliseconds(20)) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(poll);
  }
  return condition();
}

}  // namespace testing
}  // namespace kd

#endif  // KERNELD_TESTS_SUPPORT_WAIT_H_
