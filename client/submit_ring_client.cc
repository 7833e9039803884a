#include "client/submit_ring_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/kerneld/v1/submit_ring.h"

namespace kd {
namespace client {
namespace internal {

namespace sr = submit_ring;

absl::StatusOr<std::unique_ptr<SubmitRingClient>> SubmitRingClient::Create(
    const SubmitRingOptions& options) {
  if (absl::Status s = sr::CheckGeometry(options.slots, options.slot_bytes); !s.ok()) return s;
  absl::StatusOr<ShmBuffer> shm =
      ShmBuffer::Create(sr::RingBytes(options.slots, options.slot_bytes), options.shm);
  if (!shm.ok()) return shm.status();
  // Zero-filled by Create: every slot FREE, doorbell 0, nobody sleeping.
  auto* header = shm->As<sr::RingHeader>();
  header->magic = sr::kMagic;
  header->version = sr::kVersion;
  header->slots = options.slots;
  header->slot_bytes = options.slot_bytes;
  return std::unique_ptr<SubmitRingClient>(new SubmitRingClient(*std::move(shm), options));
}

SubmitRingClient::SubmitRingClient(ShmBuffer shm, const SubmitRingOptions& options)
    : shm_(std::move(shm)),
      slots_(options.slots),
      slot_bytes_(options.slot_bytes),
      spin_(options.spin),
      use_(options.slots, kUnused) {}

std::optional<uint32_t> SubmitRingClient::AcquireSlot() {
  absl::MutexLock lock(&mu_);
  for (uint32_t i = 0; i < slots_; ++i) {
    if (use_[i] == kAbandoned) {
      // A call that gave up (deadline) left it; the daemon's late reply frees it.
      sr::SlotHeader* slot = sr::Slot(shm_.data(), slot_bytes_, i);
      if (slot->state.load() == sr::kReply) {
        slot->state.store(sr::kFree);
        use_[i] = kUnused;
      }
    }
    if (use_[i] == kUnused) {
      use_[i] = kInUse;
      return i;
    }
  }
  return std::nullopt;
}

void SubmitRingClient::ReleaseSlot(uint32_t i, SlotUse use) {
  absl::MutexLock lock(&mu_);
  use_[i] = use;
}

std::optional<absl::StatusOr<double>> SubmitRingClient::Call(
    const v1::RingRequest& request, absl::Time deadline,
    const std::function<absl::Status()>& session_status) {
  const size_t n = request.ByteSizeLong();
  std::optional<uint32_t> index;
  if (n <= slot_bytes_) index = AcquireSlot();
  if (!index) {
    ++fallbacks_;
    return std::nullopt;
  }
  ++ring_calls_;
  const uint32_t i = *index;
  auto* header = shm_.As<sr::RingHeader>();
  sr::SlotHeader* slot = sr::Slot(shm_.data(), slot_bytes_, i);
  if (!request.SerializeToArray(sr::Payload(slot), static_cast<int>(n))) {
    ReleaseSlot(i, kUnused);
    return absl::StatusOr<double>(absl::InternalError("could not serialize the ring request"));
  }
  slot->length = static_cast<uint32_t>(n);
  slot->client_sleeping.store(0);
  slot->state.store(sr::kRequest);
  // Publish, then read the daemon's flag (the daemon sets its flag, then re-reads the slots).
  header->doorbell.fetch_add(1);
  if (header->daemon_sleeping.load() != 0) sr::FutexWakeAll(&header->doorbell);

  const absl::Time spin_end = absl::Now() + spin_;
  absl::Time next_session_check = absl::Now() + absl::Milliseconds(50);
  uint32_t spins = 0;
  for (;;) {
    uint32_t state = slot->state.load();
    if (state == sr::kReply) break;
    if (state != sr::kRequest && state != sr::kTaken) {
      ReleaseSlot(i, kAbandoned);
      return absl::StatusOr<double>(absl::InternalError(absl::StrCat(
          "submit ring slot ", i, " is in state ", state, ", neither REQUEST, TAKEN nor REPLY")));
    }
    if (state == sr::kRequest && header->detached.load() != 0) {
      uint32_t expected = sr::kRequest;
      if (slot->state.compare_exchange_strong(expected, sr::kFree)) {
        ReleaseSlot(i, kUnused);
        absl::Status s = session_status();
        return absl::StatusOr<double>(
            s.ok() ? absl::UnavailableError(
                         "the daemon detached the submit ring before it took the request")
                   : s);
      }
      continue;  // taken meanwhile: its reply comes
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      ReleaseSlot(i, kAbandoned);
      return absl::StatusOr<double>(
          absl::DeadlineExceededError("the op's deadline passed while it ran on the submit ring"));
    }
    if (now < spin_end) {
      sr::SpinPause(spins);
      continue;
    }
    if (now >= next_session_check) {
      if (absl::Status s = session_status(); !s.ok()) {
        ReleaseSlot(i, kAbandoned);
        return absl::StatusOr<double>(s);
      }
      next_session_check = now + absl::Milliseconds(50);
    }
    slot->client_sleeping.store(1);
    state = slot->state.load();
    if (state != sr::kReply) {
      sr::FutexWait(&slot->state, state, std::min(deadline - now, absl::Milliseconds(50)));
    }
    slot->client_sleeping.store(0);
  }

  const uint32_t length = slot->length;
  v1::RingReply reply;
  const bool parsed =
      length <= slot_bytes_ && reply.ParseFromArray(sr::Payload(slot), static_cast<int>(length));
  slot->state.store(sr::kFree);
  ReleaseSlot(i, kUnused);
  if (!parsed)
    return absl::StatusOr<double>(absl::InternalError(
        absl::StrCat("submit ring slot ", i, ": the reply is not a RingReply")));
  if (reply.code() != 0) {
    return absl::StatusOr<double>(
        absl::Status(static_cast<absl::StatusCode>(reply.code()), reply.message()));
  }
  return absl::StatusOr<double>(reply.kernel_seconds());
}

}  // namespace internal
}  // namespace client
}  // namespace kd
