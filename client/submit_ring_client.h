// The client's side of a submit ring (AttachSubmitRing in kerneld.proto, layout in
// proto/kerneld/v1/submit_ring.h). Internal to libkerneld_client; Client::AttachSubmitRing is
// the public way in.
#ifndef KERNELD_CLIENT_SUBMIT_RING_CLIENT_H_
#define KERNELD_CLIENT_SUBMIT_RING_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kerneld/client/client.h"
#include "kerneld/client/shm_buffer.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kd {
namespace client {
namespace internal {

// Thread-safe: every slot is one call in flight.
class SubmitRingClient {
 public:
  // Creates and formats the shm object of the ring.
  static absl::StatusOr<std::unique_ptr<SubmitRingClient>> Create(const SubmitRingOptions& options);

  ShmBuffer& shm() { return shm_; }
  // Calls answered through the ring, and calls handed back to gRPC (no free slot, too large).
  uint64_t ring_calls() const { return ring_calls_.load(); }
  uint64_t fallbacks() const { return fallbacks_.load(); }

  // Runs `request` through a free slot and waits for the reply until `deadline`. nullopt when
  // no slot is free or the request does not fit in one: the caller then uses gRPC. Otherwise
  // the daemon's status and kernel seconds; DEADLINE_EXCEEDED at the deadline (the slot stays
  // taken until the daemon's late reply arrives); the status of `session_status` once it is not
  // OK while waiting (the daemon went away, the session ended); UNAVAILABLE when the daemon
  // detached the ring before it took the request.
  std::optional<absl::StatusOr<double>> Call(const v1::RingRequest& request, absl::Time deadline,
                                             const std::function<absl::Status()>& session_status);

 private:
  enum SlotUse : uint8_t { kUnused = 0, kInUse = 1, kAbandoned = 2 };

  SubmitRingClient(ShmBuffer shm, const SubmitRingOptions& options);
  std::optional<uint32_t> AcquireSlot();
  void ReleaseSlot(uint32_t i, SlotUse use);

  ShmBuffer shm_;
  const uint32_t slots_;
  const uint32_t slot_bytes_;
  const absl::Duration spin_;
  std::atomic<uint64_t> ring_calls_{0};
  std::atomic<uint64_t> fallbacks_{0};
  absl::Mutex mu_;
  std::vector<SlotUse> use_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal
}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_SUBMIT_RING_CLIENT_H_
