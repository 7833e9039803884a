// A misbehaving client process for the integration tests: for a bounded number of rounds it
// sends malformed requests (unknown sessions, foreign and unknown buffers, out-of-range
// tensors, bad enums, oversized batches, non-monotone group offsets) and abandons sessions with
// buffers still registered. Every malformed request must be refused with the expected code;
// exit 0 when all were.
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "kerneld/client/client.h"
#include "kerneld/client/tensor_ref.h"

ABSL_FLAG(std::string, socket, "", "data socket of the daemon");
ABSL_FLAG(int, rounds, 40, "rounds of malformed requests");

namespace {

namespace v1 = ::kerneld::v1;
using kd::client::Client;
using kd::client::MakeTensorRef;
using kd::client::ShmBuffer;

int wrong = 0;

void Expect(const absl::Status& got, absl::StatusCode want, const char* what) {
  if (got.code() != want) {
    ++wrong;
    std::fprintf(stderr, "malformed_client: %s gave %s, want %s\n", what, got.ToString().c_str(),
                 absl::StatusCodeToString(want).c_str());
  }
}

v1::QuantizeOp Quantize(uint64_t in, uint64_t out, uint64_t scales, int64_t m, int64_t k) {
  return kd::client::MakeQuantizeOp(
      MakeTensorRef(in, v1::DTYPE_BF16, {m, k}), MakeTensorRef(out, v1::DTYPE_E4M3FN, {m, k}),
      MakeTensorRef(scales, v1::DTYPE_F32, {m, k / 128}), v1::QUANT_1X128);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string socket = absl::GetFlag(FLAGS_socket);
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    auto client = Client::Connect(socket);
    if (!client.ok()) {
      std::fprintf(stderr, "malformed_client: connect: %s\n", client.status().ToString().c_str());
      return 1;
    }
    Client& c = **client;
    // Before a session: the client refuses locally; a raw call with a made-up id is NOT_FOUND.
    {
      grpc::ClientContext ctx;
      v1::QuantizeRequest req;
      req.set_session_id("ffffffffffffffffffffffffffffffff");
      *req.mutable_op() = Quantize(1, 2, 3, 8, 128);
      v1::OpResponse resp;
      const grpc::Status s = c.stub()->Quantize(&ctx, req, &resp);
      Expect(absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message()),
             absl::StatusCode::kNotFound, "op with an unknown session");
    }
    if (!c.OpenSession(absl::StrCat("malformed-", round)).ok()) return 1;
    auto buf = ShmBuffer::Create(64 << 10);
    if (!buf.ok() || !c.RegisterBuffer(*buf).ok()) return 1;
    const uint64_t id = buf->buffer_id();

    Expect(c.Quantize(Quantize(id + 7, id, id, 8, 128)).status(), absl::StatusCode::kNotFound,
           "unknown buffer");
    Expect(c.Quantize(Quantize(id, id, id, 8, 100)).status(), absl::StatusCode::kInvalidArgument,
           "K not a multiple of 128");
    Expect(c.Quantize(Quantize(id, id, id, 1 << 20, 128)).status(),
           absl::StatusCode::kInvalidArgument, "tensor beyond the buffer");
    {
      v1::QuantizeOp op = Quantize(id, id, id, 8, 128);
      op.mutable_output()->set_byte_offset(32 << 10);
      op.mutable_scales()->set_byte_offset(48 << 10);
      op.set_granularity(static_cast<v1::QuantGranularity>(1000));
      Expect(c.Quantize(op).status(), absl::StatusCode::kInvalidArgument, "unknown granularity");
    }
    {
      v1::QuantizeOp op = Quantize(id, id, id, 8, 128);  // output aliases input
      Expect(c.Quantize(op).status(), absl::StatusCode::kInvalidArgument, "aliasing output");
    }
    {
      std::vector<v1::Op> ops(300);
      Expect(c.Submit(ops).status(), absl::StatusCode::kResourceExhausted, "oversized batch");
    }
    {
      buf->As<int32_t>(60 << 10)[0] = 5;
      buf->As<int32_t>(60 << 10)[1] = 2;
      v1::PadOp pad =
          kd::client::MakePadOp(MakeTensorRef(id, v1::DTYPE_BF16, {8, 16}),
                                MakeTensorRef(id, v1::DTYPE_I32, {2}, 60 << 10),
                                MakeTensorRef(id, v1::DTYPE_BF16, {8 + 2 * 31, 16}, 4096),
                                MakeTensorRef(id, v1::DTYPE_I32, {2}, 62 << 10), 32);
      Expect(c.Pad(pad).status(), absl::StatusCode::kInvalidArgument, "decreasing group ends");
    }
    Expect(c.RegisterShm("/kerneld-no-such-object", 4096).status(),
           absl::StatusCode::kInvalidArgument, "missing shm object");
    {
      kd::client::ShmOptions named_options;
      named_options.named = true;
      auto named = ShmBuffer::Create(4096, named_options);
      if (!named.ok()) return 1;
      Expect(c.RegisterShm(named->name(), named->size() * 2).status(),
             absl::StatusCode::kInvalidArgument, "size beyond the shm object");
    }
    Expect(c.ReleaseBuffer(id + 1000), absl::StatusCode::kNotFound, "release of an unknown buffer");
    // Every third round: walk away with the session open and the buffer registered.
    if (round % 3 != 0) {
      if (!c.CloseSession().ok()) ++wrong;
    }
  }
  std::printf("malformed_client: %d unexpected answers\n", wrong);
  return wrong == 0 ? 0 : 1;
}
