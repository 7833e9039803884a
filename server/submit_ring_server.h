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
#include "kerneld/server/session_manager.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kd {

namespace v1 = ::kerneld::v1;

class SubmitRingServer : public SessionAttachment {
 public:
  // Called exactly once per reply.
  using ReplyFn = std::function<void(const absl::Status& status, double kernel_seconds)>;
  // Runs one request; calls `reply` exactly once, on this thread or later on another.
  using Handler = std::function<void(const v1::RingRequest& request, ReplyFn reply)>;

  // Maps the shm object `shm_name` of `size` bytes and checks its header. INVALID_ARGUMENT
  // naming the rule for a size or header that does not match; NOT_FOUND when there is no such
  // object. The thread starts serving at once. `spin`: how long the thread polls after a
  // request before it sleeps on the doorbell.
  static absl::StatusOr<std::unique_ptr<SubmitRingServer>> Open(const std::string& shm_name,
                                                                uint64_t size, absl::Duration spin,
                                                                Handler handler);
  ~SubmitRingServer() override;

  // Stops taking requests, joins the thread and marks the ring detached (waking the client's
  // waiters). Replies still pending are written when they come. Idempotent.
  void Stop() override;

  uint32_t slots() const { return slots_; }
  uint32_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Mapping;

  SubmitRingServer(std::shared_ptr<Mapping> mapping, uint32_t slots, uint32_t slot_bytes,
                   absl::Duration spin, Handler handler);
  void Serve();
  // Takes slot i's request if it holds one; returns whether it did.
  bool TakeSlot(uint32_t i);
  static void WriteReply(Mapping& mapping, uint32_t slot_bytes, uint32_t i,
                         const absl::Status& status, double kernel_seconds);

  const std::shared_ptr<Mapping> mapping_;
  const uint32_t slots_;
  const uint32_t slot_bytes_;
  const absl::Duration spin_;
  const Handler handler_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kd

#endif  // KERNELD_SERVER_SUBMIT_RING_SERVER_H_
