#include "proto/kerneld/v1/submit_ring.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "absl/strings/str_cat.h"

namespace kd {
namespace submit_ring {

absl::Status CheckGeometry(uint32_t slots, uint32_t slot_bytes) {
  if (slots < 1 || slots > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("slots=", slots, " must be in [1, ", kMaxSlots, "]"));
  }
  if (slot_bytes < kMinSlotBytes || slot_bytes > kMaxSlotBytes || slot_bytes % 64 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("slot_bytes=", slot_bytes,
                                                   " must be a multiple of 64 in [", kMinSlotBytes,
                                                   ", ", kMaxSlotBytes, "]"));
  }
  return absl::OkStatus();
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared with another process.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void SpinPause(uint32_t& count) {
  if (++count % 32 == 0) {
    sched_yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace submit_ring
}  // namespace kd
