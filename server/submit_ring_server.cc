#include "server/submit_ring_server.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "kerneld/kernels/shm_guard.h"
#include "proto/kerneld/v1/submit_ring.h"

namespace kd {

namespace sr = submit_ring;

absl::StatusOr<std::unique_ptr<SubmitRingServer>> SubmitRingServer::Open(
    std::shared_ptr<const Region> region, absl::Duration spin, Handler handler) {
  const uint64_t size = region->size();
  if (size < sizeof(sr::RingHeader)) {
    return absl::InvalidArgumentError(absl::StrCat("size=", size, " is smaller than the ",
                                                   sizeof(sr::RingHeader), "-byte ring header"));
  }
  // The geometry is read once; the thread never trusts the header's copy again.
  const auto* h = static_cast<const sr::RingHeader*>(region->data());
  const uint32_t magic = h->magic, version = h->version, slots = h->slots,
                 slot_bytes = h->slot_bytes;
  if (magic != sr::kMagic) {
    return absl::InvalidArgumentError(absl::StrCat("ring header: magic=0x", absl::Hex(magic),
                                                   " is not 0x", absl::Hex(sr::kMagic)));
  }
  if (version != sr::kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring header: version=", version, " is not supported (", sr::kVersion, ")"));
  }
  absl::Status geometry = sr::CheckGeometry(slots, slot_bytes);
  if (!geometry.ok())
    return absl::InvalidArgumentError(absl::StrCat("ring header: ", geometry.message()));
  if (sr::RingBytes(slots, slot_bytes) != size) {
    return absl::InvalidArgumentError(absl::StrCat("size=", size, " is not RingBytes(slots=", slots,
                                                   ", slot_bytes=", slot_bytes,
                                                   ")=", sr::RingBytes(slots, slot_bytes)));
  }
  return std::unique_ptr<SubmitRingServer>(
      new SubmitRingServer(std::move(region), slots, slot_bytes, spin, std::move(handler)));
}

SubmitRingServer::SubmitRingServer(std::shared_ptr<const Region> region, uint32_t slots,
                                   uint32_t slot_bytes, absl::Duration spin, Handler handler)
    : region_(std::move(region)),
      slots_(slots),
      slot_bytes_(slot_bytes),
      spin_(spin),
      handler_(std::move(handler)),
      request_bytes_(new char[slot_bytes]),
      arena_block_(new char[kArenaBlockBytes]) {
  static_cast<sr::RingHeader*>(base())->detached.store(0);
  thread_ = std::thread([this] { Serve(); });
}

SubmitRingServer::~SubmitRingServer() { Stop(); }

void SubmitRingServer::Stop() {
  if (stop_.exchange(true)) return;
  auto* h = static_cast<sr::RingHeader*>(base());
  h->doorbell.fetch_add(1);
  sr::FutexWakeAll(&h->doorbell);
  thread_.join();
  h->detached.store(1);
  for (uint32_t i = 0; i < slots_; ++i) sr::FutexWakeAll(&sr::Slot(base(), slot_bytes_, i)->state);
}

void SubmitRingServer::Serve() {
  auto* h = static_cast<sr::RingHeader*>(base());
  absl::Time last_request = absl::InfinitePast();
  uint32_t spins = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    // The client truncated its ring (the CPU backend's watch absorbed the fault): nothing to serve.
    if (ShmFaultedAt(h)) return;
    const uint32_t seen = h->doorbell.load();
    bool took = false;
    for (uint32_t i = 0; i < slots_ && !stop_.load(std::memory_order_relaxed); ++i)
      took |= TakeSlot(i);
    if (took) {
      last_request = absl::Now();
      continue;
    }
    if (absl::Now() - last_request < spin_) {
      sr::SpinPause(spins);
      continue;
    }
    // Sleep until the doorbell moves. The flag is published before the slots are re-read, and
    // a client reads it after publishing its request, so one of the two sees the other.
    h->daemon_sleeping.store(1);
    bool pending = h->doorbell.load() != seen;
    for (uint32_t i = 0; i < slots_ && !pending; ++i) {
      pending = sr::Slot(base(), slot_bytes_, i)->state.load() == sr::kRequest;
    }
    if (!pending) sr::FutexWait(&h->doorbell, seen, absl::Milliseconds(200));
    h->daemon_sleeping.store(0);
  }
}

bool SubmitRingServer::TakeSlot(uint32_t i) {
  sr::SlotHeader* slot = sr::Slot(base(), slot_bytes_, i);
  uint32_t expected = sr::kRequest;
  if (slot->state.load(std::memory_order_relaxed) != sr::kRequest ||
      !slot->state.compare_exchange_strong(expected, sr::kTaken)) {
    return false;
  }
  const uint32_t length = slot->length;  // read once
  ReplyFn reply = [region = region_, slot_bytes = slot_bytes_, i](const absl::Status& status,
                                                                  double seconds) {
    WriteReply(region->data(), slot_bytes, i, status, seconds);
  };
  if (length > slot_bytes_) {
    reply(absl::InvalidArgumentError(absl::StrCat("ring slot ", i, ": length=", length,
                                                  " exceeds slot_bytes=", slot_bytes_)),
          0.0);
    return true;
  }
  // Copied out first: the client can rewrite its slot at any time, the parse must see one
  // version of the bytes. The copy and the parsed messages reuse this thread's memory (the copy
  // buffer and the arena's first block): reading a request allocates only for strings longer
  // than std::string holds inline (event handles).
  std::memcpy(request_bytes_.get(), sr::Payload(slot), length);
  google::protobuf::ArenaOptions arena_options;
  arena_options.initial_block = arena_block_.get();
  arena_options.initial_block_size = kArenaBlockBytes;
  google::protobuf::Arena arena(arena_options);
  auto* request = google::protobuf::Arena::CreateMessage<v1::RingRequest>(&arena);
  if (!request->ParseFromArray(request_bytes_.get(), static_cast<int>(length))) {
    reply(absl::InvalidArgumentError(
              absl::StrCat("ring slot ", i, ": the ", length, " bytes are not a RingRequest")),
          0.0);
    return true;
  }
  handler_(*request, std::move(reply));  // the request dies with the arena, as Handler allows
  return true;
}

void SubmitRingServer::WriteReply(void* base, uint32_t slot_bytes, uint32_t i,
                                  const absl::Status& status, double kernel_seconds) {
  sr::SlotHeader* slot = sr::Slot(base, slot_bytes, i);
  v1::RingReply reply;
  reply.set_code(static_cast<int>(status.code()));
  // A message too long for the slot is cut (it names the field first, so the cut keeps that).
  std::string message(status.message());
  const size_t budget = slot_bytes > 64 ? slot_bytes - 64 : 0;
  if (message.size() > budget) message.resize(budget);
  reply.set_message(std::move(message));
  reply.set_kernel_seconds(kernel_seconds);
  const size_t n = reply.ByteSizeLong();
  if (n <= slot_bytes && reply.SerializeToArray(sr::Payload(slot), static_cast<int>(n))) {
    slot->length = static_cast<uint32_t>(n);
  } else {
    slot->length = 0;  // an empty RingReply: code 0 would read OK, so say INTERNAL instead
    v1::RingReply internal;
    internal.set_code(static_cast<int>(absl::StatusCode::kInternal));
    const size_t m = internal.ByteSizeLong();
    if (internal.SerializeToArray(sr::Payload(slot), static_cast<int>(m)))
      slot->length = static_cast<uint32_t>(m);
  }
  slot->state.store(sr::kReply);
  if (slot->client_sleeping.load() != 0) sr::FutexWakeAll(&slot->state);
}

}  // namespace kd
