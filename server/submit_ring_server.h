// The daemon's side of a submit ring (AttachSubmitRing in kerneld.proto, layout in
// proto/kerneld/v1/submit_ring.h): one thread per ring takes requests out of the client's
// shared slots and hands each to a handler; the handler's reply, from whatever thread finishes
// the request, is written back into the slot and the client woken.
//
// Nothing in the mapping is trusted: a request is copied out before it is parsed, every length
// is bounded by slot_bytes, and a client that scribbles over the ring can only make its own
// requests fail. The mapping stays alive while a reply is pending, so a session that ends with
// a request in flight never has a reply written into unmapped memory.
#ifndef KERNELD_SERVER_SUBMIT_RING_SERVER_H_
#define KERNELD_SERVER_SUBMIT_RING_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kerneld/kernels/backend.h"
#include "kerneld/v1/kerneld.pb.h"
#include "server/session_manager.h"

namespace kd {

namespace v1 = ::kerneld::v1;

class SubmitRingServer : public SessionAttachment {
 public:
  // Called exactly once per reply.
  using ReplyFn = std::function<void(const absl::Status& status, double kernel_seconds)>;
  // Runs one request; calls `reply` exactly once, on this thread or later on another.
  // `request` is valid only until the handler returns: what outlives it must be copied.
  using Handler = std::function<void(const v1::RingRequest& request, ReplyFn reply)>;

  // Serves the ring in `region`, the client's shm object as the CPU backend imported it (its
  // mapping, size check and truncation watch), after checking the header against the region's
  // size: INVALID_ARGUMENT naming the rule otherwise. The thread starts serving at once.
  // `spin`: how long the thread polls after a request before it sleeps on the doorbell.
  static absl::StatusOr<std::unique_ptr<SubmitRingServer>> Open(
      std::shared_ptr<const Region> region, absl::Duration spin, Handler handler);
  ~SubmitRingServer() override;

  // Stops taking requests, joins the thread and marks the ring detached (waking the client's
  // waiters). Replies still pending are written when they come. Idempotent; not called from the
  // ring's own thread.
  void Stop() override;

  uint32_t slots() const { return slots_; }
  uint32_t slot_bytes() const { return slot_bytes_; }

 private:
  SubmitRingServer(std::shared_ptr<const Region> region, uint32_t slots, uint32_t slot_bytes,
                   absl::Duration spin, Handler handler);
  void* base() const { return region_->data(); }
  void Serve();
  // Takes slot i's request if it holds one; returns whether it did.
  bool TakeSlot(uint32_t i);
  static void WriteReply(void* base, uint32_t slot_bytes, uint32_t i, const absl::Status& status,
                         double kernel_seconds);

  // Held by every pending reply too, so a reply never lands in unmapped memory.
  const std::shared_ptr<const Region> region_;
  const uint32_t slots_;
  const uint32_t slot_bytes_;
  const absl::Duration spin_;
  const Handler handler_;
  // The ring thread's: the copy of the slot being parsed (slot_bytes) and the first block of
  // the arena its message is parsed into (a larger request spills into blocks the arena
  // allocates and frees itself).
  static constexpr size_t kArenaBlockBytes = 16 << 10;
  const std::unique_ptr<char[]> request_bytes_;
  const std::unique_ptr<char[]> arena_block_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kd

#endif  // KERNELD_SERVER_SUBMIT_RING_SERVER_H_
