// The shared-memory layout of a submit ring (AttachSubmitRing in kerneld.proto) and the futex
// calls both sides use on it. Part of the wire contract: the client library writes this layout,
// the daemon reads it, and a client in another language would write the same bytes.
//
//   offset 0                 RingHeader (128 bytes)
//   offset 128 + i * stride  slot i: SlotHeader (64 bytes), then slot_bytes of payload
//                            (stride = 64 + slot_bytes; slot_bytes a multiple of 64)
//
// A slot's `state` moves FREE -> REQUEST (client: payload holds a serialized RingRequest of
// `length` bytes) -> TAKEN (daemon: it copied the request out) -> REPLY (daemon: payload holds a
// serialized RingReply of `length` bytes) -> FREE (client, after reading the reply). The client
// owns a slot in FREE and REPLY, the daemon in TAKEN; REQUEST is the hand-over. Every word is a
// lock-free 32-bit atomic, so both processes may use it through their own mapping. The futex
// words are `doorbell` (the client bumps it after publishing a request and wakes the daemon if
// `daemon_sleeping` is set) and each slot's `state` (the daemon wakes the client after REPLY if
// `client_sleeping` is set). Both sides store their "sleeping" flag and then re-read the other
// word before sleeping, and the other side publishes and then reads the flag, all sequentially
// consistent, so no wake-up is lost.
#ifndef KERNELD_PROTO_SUBMIT_RING_H_
#define KERNELD_PROTO_SUBMIT_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kd {
namespace submit_ring {

inline constexpr uint32_t kMagic = 0x3152444b;  // "KDR1" little-endian
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMaxSlots = 64;
inline constexpr uint32_t kMinSlotBytes = 4096;
inline constexpr uint32_t kMaxSlotBytes = 1u << 20;

enum SlotState : uint32_t {
  kFree = 0,
  kRequest = 1,
  kTaken = 2,
  kReply = 3,
};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "ring words must be address-free");

struct RingHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t slots;
  uint32_t slot_bytes;
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> daemon_sleeping;
  // Set by the daemon when it stops serving the ring (the session ended); a waiting client
  // then stops waiting.
  std::atomic<uint32_t> detached;
};
static_assert(sizeof(RingHeader) == 128, "RingHeader is 128 bytes");

struct SlotHeader {
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> client_sleeping;
  uint32_t length;
  uint32_t reserved;
  uint8_t pad[48];
};
static_assert(sizeof(SlotHeader) == 64, "SlotHeader is 64 bytes");

// Total bytes of a ring of `slots` slots of `slot_bytes` payload.
constexpr uint64_t RingBytes(uint32_t slots, uint32_t slot_bytes) {
  return sizeof(RingHeader) + uint64_t{slots} * (sizeof(SlotHeader) + slot_bytes);
}

// OK when `slots` and `slot_bytes` are within the limits above (slot_bytes a multiple of 64);
// INVALID_ARGUMENT naming the field and the rule otherwise.
absl::Status CheckGeometry(uint32_t slots, uint32_t slot_bytes);

inline SlotHeader* Slot(void* base, uint32_t slot_bytes, uint32_t i) {
  return reinterpret_cast<SlotHeader*>(static_cast<char*>(base) + sizeof(RingHeader) +
                                       uint64_t{i} * (sizeof(SlotHeader) + slot_bytes));
}
inline uint8_t* Payload(SlotHeader* slot) { return reinterpret_cast<uint8_t*>(slot + 1); }

// Sleeps while *word == expected, at most `timeout` (a shared, not process-private, futex).
// Returns early on a wake-up, a changed value or a signal; the caller re-checks the word.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout);
// Wakes every sleeper on `word`.
void FutexWakeAll(std::atomic<uint32_t>* word);

// One step of a spin-wait loop: a CPU pause hint, and every 32nd call a sched_yield so that a
// spinning thread gives its core to runnable threads on a busy host (the other side of the ring
// among them) instead of holding it for the whole spin.
void SpinPause(uint32_t& count);

}  // namespace submit_ring
}  // namespace kd

#endif  // KERNELD_PROTO_SUBMIT_RING_H_
