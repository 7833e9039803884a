// A client process that is meant to be killed: from its first instant it connects, opens
// sessions, creates and registers buffers, allocates from the daemon's pool, attaches submit
// rings, runs ops and releases or closes some of it, in a loop that never ends. The kill storm
// test SIGKILLs it at random points of that loop. Any failure ends it with exit code 1 and a
// line on stderr (a refused call is a daemon bug here: nothing it sends is malformed).
#include <cstdio>
#include <deque>
#include <random>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "kerneld/client/client.h"
#include "kerneld/client/tensor_ref.h"

ABSL_FLAG(std::string, socket, "", "data socket of the daemon");
ABSL_FLAG(uint32_t, seed, 1, "random seed");

namespace {

namespace v1 = ::kerneld::v1;
using kd::client::Client;
using kd::client::MakeTensorRef;
using kd::client::ShmBuffer;

#define STORM_CHECK(expr)                                                           \
  do {                                                                              \
    const absl::Status s_ = (expr);                                                 \
    if (!s_.ok()) {                                                                 \
      std::fprintf(stderr, "storm_client: %s: %s\n", #expr, s_.ToString().c_str()); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::mt19937 rng(absl::GetFlag(FLAGS_seed));
  auto client = Client::Connect(absl::GetFlag(FLAGS_socket));
  STORM_CHECK(client.status());
  Client& c = **client;
  STORM_CHECK(c.OpenSession("storm"));
  std::deque<ShmBuffer> held;
  for (uint64_t i = 0;; ++i) {
    // 8 rows x 128 bf16 in, 1 KiB of e4m3 out, 32 bytes of scales: one 64 KiB buffer.
    absl::StatusOr<ShmBuffer> b = ShmBuffer::Create(64 << 10);
    STORM_CHECK(b.status());
    STORM_CHECK(c.RegisterBuffer(*b).status());
    const uint64_t id = b->buffer_id();
    v1::QuantizeOp op = kd::client::MakeQuantizeOp(
        MakeTensorRef(id, v1::DTYPE_BF16, {8, 128}),
        MakeTensorRef(id, v1::DTYPE_E4M3FN, {8, 128}, 16 << 10),
        MakeTensorRef(id, v1::DTYPE_F32, {8, 1}, 32 << 10), v1::QUANT_1X128);
    STORM_CHECK(c.Quantize(op).status());
    if (rng() % 2 == 0) STORM_CHECK(c.AllocateBuffer(32 << 10).status());  // kept by the session
    if (!c.has_submit_ring() && rng() % 4 == 0) {
      kd::client::SubmitRingOptions ring;
      ring.slots = 2;
      ring.slot_bytes = 4096;
      STORM_CHECK(c.AttachSubmitRing(ring));
      STORM_CHECK(c.Quantize(op).status());
    }
    if (rng() % 3 == 0) STORM_CHECK(c.ReleaseBuffer(*b));
    held.push_back(*std::move(b));
    if (held.size() > 6) held.pop_front();
    if (rng() % 8 == 0) {
      STORM_CHECK(c.CloseSession().status());
      held.clear();
      STORM_CHECK(c.OpenSession("storm"));
    }
  }
}
