// The client library and kctl against the real daemon binary (started once for the suite on a
// temporary socket with the CPU backend): session lifetime as the daemon sees it, buffers,
// status codes as they arrive through the library, and kctl's view of a live session.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/kctl/commands.h"
#include "gtest/gtest.h"
#include "kerneld/client/admin_client.h"
#include "kerneld/client/client.h"
#include "kerneld/client/shm_buffer.h"
#include "kerneld/client/status.h"
#include "kerneld/client/tensor_ref.h"
#include "proto/kerneld/v1/submit_ring.h"

#ifndef KD_KERNELD_PATH
#error "KD_KERNELD_PATH must name the kerneld binary"
#endif

namespace kd {
namespace client {
namespace {

class ClientDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/kerneld-client-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    data_socket_ = dir_ + "/kerneld.sock";
    admin_socket_ = dir_ + "/admin.sock";
    std::vector<std::string> args = {KD_KERNELD_PATH, "--socket=" + data_socket_,
                                     "--admin_socket=" + admin_socket_,
                                     "--metrics_address=", "--backend=cpu"};
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // A hang guard only: far beyond what a loaded machine takes to start the daemon.
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      struct stat st;
      if (stat(admin_socket_.c_str(), &st) == 0) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
    FAIL() << "kerneld did not create " << admin_socket_;
  }

  static void TearDownTestSuite() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    rmdir(dir_.c_str());
  }

  static std::unique_ptr<Client> Connected() {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(data_socket_);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The daemon's view of the session `id`, or nullopt when it does not list it.
  static std::optional<kerneld::v1::SessionInfo> FindSession(const std::string& id) {
    absl::StatusOr<std::unique_ptr<AdminClient>> admin = AdminClient::Connect(admin_socket_);
    EXPECT_TRUE(admin.ok()) << admin.status();
    if (!admin.ok()) return std::nullopt;
    absl::StatusOr<kerneld::v1::StatusResponse> status = (*admin)->Status();
    EXPECT_TRUE(status.ok()) << status.status();
    if (!status.ok()) return std::nullopt;
    for (const auto& s : status->sessions()) {
      if (s.session_id() == id) return s;
    }
    return std::nullopt;
  }

  // How long a wait for something that takes well under a second may take before the test calls
  // it a hang: far beyond a loaded 2-core machine running a sanitizer build.
  static constexpr absl::Duration kHangTimeout = absl::Seconds(60);

  static bool SessionGone(const std::string& id) {
    const absl::Time deadline = absl::Now() + kHangTimeout;
    while (absl::Now() < deadline) {
      if (!FindSession(id).has_value()) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  // Faults the daemon absorbed in clients' shared memory so far.
  static uint64_t ShmFaults() {
    absl::StatusOr<std::unique_ptr<AdminClient>> admin = AdminClient::Connect(admin_socket_);
    if (!admin.ok()) return 0;
    absl::StatusOr<kerneld::v1::StatusResponse> status = (*admin)->Status();
    return status.ok() ? status->shm_faults() : 0;
  }

  static std::string dir_, data_socket_, admin_socket_;
  static pid_t pid_;
};

std::string ClientDaemonTest::dir_, ClientDaemonTest::data_socket_, ClientDaemonTest::admin_socket_;
pid_t ClientDaemonTest::pid_ = -1;

// A registered bf16 input (m x k) with its FP8 output and 1x128 scales.
struct QuantizeBuffers {
  ShmBuffer x, y, s;
  v1::QuantizeOp op;
};

QuantizeBuffers MakeQuantize(Client& client, int64_t m, int64_t k, const ShmOptions& options = {}) {
  QuantizeBuffers q;
  q.x = *ShmBuffer::Create(m * k * 2, options);
  q.y = *ShmBuffer::Create(m * k, options);
  q.s = *ShmBuffer::Create(m * ((k + 127) / 128) * 4, options);
  for (ShmBuffer* b : {&q.x, &q.y, &q.s}) EXPECT_TRUE(client.RegisterBuffer(*b).ok());
  q.op = MakeQuantizeOp(MakeTensorRef(q.x.buffer_id(), v1::DTYPE_BF16, {m, k}),
                        MakeTensorRef(q.y.buffer_id(), v1::DTYPE_E4M3FN, {m, k}),
                        MakeTensorRef(q.s.buffer_id(), v1::DTYPE_F32, {m, (k + 127) / 128}),
                        v1::QUANT_1X128);
  return q;
}

TEST_F(ClientDaemonTest, OpenSessionGivesAnIdTheBackendAndTheDaemonListsIt) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("open-test", 0).ok());
  EXPECT_TRUE(client->has_session());
  EXPECT_FALSE(client->session_id().empty());
  EXPECT_EQ(client->backend(), "cpu");
  EXPECT_TRUE(client->SessionStatus().ok());
  const auto info = FindSession(client->session_id());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->client_name(), "open-test");
  // The peer as the kernel reports it for the data socket's connection.
  EXPECT_EQ(info->pid(), getpid());
  EXPECT_EQ(info->uid(), static_cast<int64_t>(geteuid()));
}

TEST_F(ClientDaemonTest, SecondOpenSessionIsFailedPrecondition) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("twice").ok());
  EXPECT_EQ(client->OpenSession("twice").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ClientDaemonTest, CallsWithoutASessionAreFailedPrecondition) {
  std::unique_ptr<Client> client = Connected();
  EXPECT_EQ(client->Submit({}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->CloseSession().status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<ShmBuffer> b = ShmBuffer::Create(64);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(client->RegisterBuffer(*b).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ClientDaemonTest, CloseSessionReleasesEveryBufferAndEndsTheSession) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("close-test").ok());
  const std::string id = client->session_id();
  QuantizeBuffers q = MakeQuantize(*client, 4, 256);
  ASSERT_TRUE(client->Quantize(q.op).ok());
  const auto info = FindSession(id);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->buffers(), 3u);
  EXPECT_EQ(info->buffer_bytes(), q.x.size() + q.y.size() + q.s.size());
  absl::StatusOr<uint32_t> released = client->CloseSession();
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(*released, 3u);
  EXPECT_FALSE(client->has_session());
  EXPECT_FALSE(FindSession(id).has_value());
}

TEST_F(ClientDaemonTest, DestroyingTheClientEndsItsSession) {
  std::string id;
  {
    std::unique_ptr<Client> client = Connected();
    ASSERT_TRUE(client->OpenSession("destroy-test").ok());
    id = client->session_id();
    QuantizeBuffers q = MakeQuantize(*client, 1, 128);
    ASSERT_TRUE(FindSession(id).has_value());
  }
  EXPECT_TRUE(SessionGone(id));
}

TEST_F(ClientDaemonTest, ExpiredLeaseShowsInSessionStatusAndOpsAreNotFound) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("lease-test", 1).ok());
  EXPECT_EQ(client->lease_seconds(), 1u);
  const absl::Time deadline = absl::Now() + kHangTimeout;
  while (client->SessionStatus().ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(client->SessionStatus().code(), absl::StatusCode::kNotFound) << client->SessionStatus();
  EXPECT_EQ(client->Submit({}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientDaemonTest, AnotherSessionsBufferIsNotFound) {
  std::unique_ptr<Client> owner = Connected();
  std::unique_ptr<Client> other = Connected();
  ASSERT_TRUE(owner->OpenSession("owner").ok());
  ASSERT_TRUE(other->OpenSession("other").ok());
  QuantizeBuffers q = MakeQuantize(*owner, 1, 128);
  EXPECT_TRUE(owner->Quantize(q.op).ok());
  EXPECT_EQ(other->Quantize(q.op).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(other->ReleaseBuffer(q.x.buffer_id()).code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientDaemonTest, InvalidOpIsInvalidArgumentNamingTheField) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("invalid").ok());
  QuantizeBuffers q = MakeQuantize(*client, 2, 100);  // K=100 is not a multiple of 128
  const absl::StatusOr<OpResult> r = client->Quantize(q.op);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("input"), absl::string_view::npos) << r.status();
  EXPECT_TRUE(client->Submit({}).ok());  // the session still works
}

TEST_F(ClientDaemonTest, AllocatedBufferIsMappedAndReleasedOnce) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("allocate").ok());
  absl::StatusOr<ShmBuffer> buffer = client->AllocateBuffer(1 << 16);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_FALSE(buffer->owns_name());
  EXPECT_GE(buffer->size(), uint64_t{1} << 16);
  EXPECT_NE(buffer->buffer_id(), 0u);
  buffer->As<uint8_t>()[(1 << 16) - 1] = 7;
  const uint64_t id = buffer->buffer_id();
  ASSERT_TRUE(client->ReleaseBuffer(*buffer).ok());
  EXPECT_EQ(buffer->buffer_id(), 0u);
  EXPECT_EQ(client->ReleaseBuffer(id).code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientDaemonTest, RegisteringTwiceIsFailedPrecondition) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("register-twice").ok());
  absl::StatusOr<ShmBuffer> b = ShmBuffer::Create(256);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(client->RegisterBuffer(*b).ok());
  EXPECT_EQ(client->RegisterBuffer(*b).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ClientDaemonTest, UnlinkAfterRegisterRemovesTheNameAndTheBufferStillWorks) {
  ClientOptions options;
  options.unlink_after_register = true;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(data_socket_, options);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->OpenSession("unlink").ok());
  ShmOptions named;
  named.named = true;
  QuantizeBuffers q = MakeQuantize(**client, 1, 128, named);
  for (const ShmBuffer* b : {&q.x, &q.y, &q.s}) {
    EXPECT_FALSE(b->owns_name());
    EXPECT_EQ(ShmBuffer::Map(b->name(), b->size()).status().code(), absl::StatusCode::kNotFound);
  }
  q.x.As<uint16_t>()[0] = 0x3F80;  // bf16 1.0: the daemon's mapping sees this write
  ASSERT_TRUE((*client)->Quantize(q.op).ok());
  EXPECT_EQ(q.y.As<uint8_t>()[0], 0x7E);  // 1.0 is the block's amax: it becomes 448 (0x7e)
}

TEST_F(ClientDaemonTest, AdminOnTheDataSocketIsPermissionDenied) {
  absl::StatusOr<std::unique_ptr<AdminClient>> admin = AdminClient::Connect(data_socket_);
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ((*admin)->Status().status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(ClientDaemonTest, HealthOfTheDataSocketIsServing) {
  absl::StatusOr<HealthState> state = CheckHealth(data_socket_);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, HealthState::kServing);
  EXPECT_EQ(CheckHealth(data_socket_, "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClientDaemonTest, KctlStatusJsonListsALiveSessionWithItsBuffers) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("kctl-json").ok());
  QuantizeBuffers q = MakeQuantize(*client, 1, 128);
  std::ostringstream out, err;
  const int code =
      kctl::RunKctl({"--admin_socket=" + admin_socket_, "status", "--json"}, "", out, err);
  EXPECT_EQ(code, kctl::kExitOk) << err.str();
  const std::string json = out.str();
  const size_t at = json.find("\"session_id\": \"" + client->session_id() + "\"");
  ASSERT_NE(at, std::string::npos) << json;
  EXPECT_NE(json.find("\"client_name\": \"kctl-json\"", at), std::string::npos) << json;
  EXPECT_NE(json.find("\"buffers\": 3", at), std::string::npos) << json;
  EXPECT_NE(json.find(absl::StrCat("\"pid\": ", getpid()), at), std::string::npos) << json;
  EXPECT_NE(json.find(absl::StrCat("\"uid\": ", geteuid()), at), std::string::npos) << json;
}

TEST_F(ClientDaemonTest, KctlStatusTableShowsTheSession) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("kctl-table").ok());
  std::ostringstream out, err;
  EXPECT_EQ(kctl::RunKctl({"status"}, admin_socket_, out, err), kctl::kExitOk) << err.str();
  EXPECT_NE(out.str().find("kctl-table"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("cpu:0"), std::string::npos) << out.str();
}

TEST(ClientConnectTest, NoDaemonIsUnavailableNamingTheTarget) {
  ClientOptions options;
  options.connect_timeout = absl::Milliseconds(200);
  const auto client = Client::Connect("/nonexistent/kerneld.sock", options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("unix:/nonexistent/kerneld.sock"),
            absl::string_view::npos);
}

TEST(NormalizeTargetTest, PathsBecomeUnixTargetsAndSchemesStay) {
  EXPECT_EQ(NormalizeTarget("/run/kerneld/kerneld.sock"), "unix:/run/kerneld/kerneld.sock");
  EXPECT_EQ(NormalizeTarget("rel/k.sock"), "unix:rel/k.sock");
  EXPECT_EQ(NormalizeTarget("unix:/x.sock"), "unix:/x.sock");
  EXPECT_EQ(NormalizeTarget("unix-abstract:kd"), "unix-abstract:kd");
  EXPECT_EQ(NormalizeTarget("dns:///node:7070"), "dns:///node:7070");
  EXPECT_EQ(NormalizeTarget(""), "unix:/run/kerneld/kerneld.sock");
}

// ---- Submit rings: the op calls through shared memory (AttachSubmitRing) ----

// Fills the bf16 input of `q` with a pattern of mixed magnitudes and signs.
void FillInput(QuantizeBuffers& q, uint32_t seed) {
  uint16_t* x = q.x.As<uint16_t>();
  const size_t n = q.x.size() / 2;
  uint32_t state = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    // sign, exponent 100..139, 7 mantissa bits: finite bf16 values from ~1e-8 to ~1e3
    const uint16_t sign = (state >> 31) << 15;
    const uint16_t exponent = 100 + (state >> 8) % 40;
    x[i] = static_cast<uint16_t>(sign | (exponent << 7) | ((state >> 16) & 0x7f));
  }
}

TEST_F(ClientDaemonTest, SubmitRingGivesTheSameBytesAndErrorsAsGrpc) {
  std::unique_ptr<Client> plain = Connected();
  std::unique_ptr<Client> ringed = Connected();
  ASSERT_TRUE(plain->OpenSession("ring-peer").ok());
  ASSERT_TRUE(ringed->OpenSession("ring").ok());
  ASSERT_TRUE(ringed->AttachSubmitRing().ok());
  EXPECT_TRUE(ringed->has_submit_ring());
  const auto info = FindSession(ringed->session_id());
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->submit_ring());
  EXPECT_FALSE(FindSession(plain->session_id())->submit_ring());

  QuantizeBuffers a = MakeQuantize(*plain, 64, 512);
  QuantizeBuffers b = MakeQuantize(*ringed, 64, 512);
  FillInput(a, 5);
  FillInput(b, 5);
  ASSERT_TRUE(plain->Quantize(a.op).ok());
  const absl::StatusOr<OpResult> r = ringed->Quantize(b.op);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->kernel_seconds, 0.0);
  EXPECT_EQ(std::memcmp(a.y.data(), b.y.data(), a.y.size()), 0);
  EXPECT_EQ(std::memcmp(a.s.data(), b.s.data(), a.s.size()), 0);
  EXPECT_TRUE(ringed->Submit({AsOp(b.op), AsOp(b.op)}).ok());
  EXPECT_EQ(ringed->submit_ring_counts().ring_calls, 2u);
  EXPECT_EQ(ringed->submit_ring_counts().fallbacks, 0u);

  // Errors: the same code and message as the unary RPC, and the ring keeps serving.
  QuantizeBuffers bad_a = MakeQuantize(*plain, 2, 100);
  QuantizeBuffers bad_b = MakeQuantize(*ringed, 2, 100);
  const absl::Status want = plain->Quantize(bad_a.op).status();
  const absl::Status got = ringed->Quantize(bad_b.op).status();
  EXPECT_EQ(got.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.code(), want.code());
  EXPECT_EQ(got.message(), want.message());
  v1::Op batch_bad = AsOp(bad_b.op);
  const absl::Status batch = ringed->Submit({AsOp(b.op), batch_bad}).status();
  EXPECT_EQ(batch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(batch.message().find("ops[1].quantize."), absl::string_view::npos) << batch;
  v1::Completion async;
  async.set_mode(v1::Completion::ASYNC);
  EXPECT_EQ(ringed->Quantize(b.op, async).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ringed->Quantize(b.op).ok());
  EXPECT_EQ(ringed->submit_ring_counts().fallbacks, 0u);
}

TEST_F(ClientDaemonTest, SubmitRingServesManyThreadsAndFallsBackToGrpcWhenFull) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("ring-threads").ok());
  SubmitRingOptions ring;
  ring.slots = 2;
  ring.spin = absl::ZeroDuration();  // every wait sleeps on the futex
  ASSERT_TRUE(client->AttachSubmitRing(ring).ok());
  constexpr int kThreads = 6, kCalls = 25;
  std::vector<QuantizeBuffers> buffers;
  for (int t = 0; t < kThreads; ++t) {
    buffers.push_back(MakeQuantize(*client, 32, 256));
    FillInput(buffers.back(), t);
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        if (!client->Quantize(buffers[t].op).ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const Client::SubmitRingCounts counts = client->submit_ring_counts();
  EXPECT_EQ(counts.ring_calls + counts.fallbacks, uint64_t{kThreads * kCalls});
  EXPECT_GT(counts.ring_calls, 0u);

  // A request larger than a slot goes over gRPC, with the same result.
  std::unique_ptr<Client> small = Connected();
  ASSERT_TRUE(small->OpenSession("ring-small").ok());
  SubmitRingOptions tiny;
  tiny.slot_bytes = 4096;
  ASSERT_TRUE(small->AttachSubmitRing(tiny).ok());
  QuantizeBuffers q = MakeQuantize(*small, 32, 256);
  std::vector<v1::Op> many(200, AsOp(q.op));  // ~20 KB serialized
  EXPECT_TRUE(small->Submit(many).ok());
  EXPECT_EQ(small->submit_ring_counts().fallbacks, 1u);
  EXPECT_EQ(small->submit_ring_counts().ring_calls, 0u);
}

// A ring made by hand, as a client in another language would make it.
struct RawRing {
  ShmBuffer shm;
  submit_ring::RingHeader* header() { return shm.As<submit_ring::RingHeader>(); }
  submit_ring::SlotHeader* slot(uint32_t i) {
    return submit_ring::Slot(shm.data(), header()->slot_bytes, i);
  }
  // Named, for AttachSubmitRing by name over gRPC (the library sends a memfd instead).
  static RawRing Make(uint32_t slots, uint32_t slot_bytes) {
    ShmOptions named;
    named.named = true;
    RawRing r{*ShmBuffer::Create(submit_ring::RingBytes(slots, slot_bytes), named)};
    r.header()->magic = submit_ring::kMagic;
    r.header()->version = submit_ring::kVersion;
    r.header()->slots = slots;
    r.header()->slot_bytes = slot_bytes;
    return r;
  }
  // Publishes `bytes` in slot i and waits for the reply.
  std::optional<v1::RingReply> Call(uint32_t i, const std::string& bytes,
                                    absl::Duration timeout = absl::Seconds(60)) {
    std::memcpy(submit_ring::Payload(slot(i)), bytes.data(), bytes.size());
    slot(i)->length = static_cast<uint32_t>(bytes.size());
    slot(i)->state.store(submit_ring::kRequest);
    header()->doorbell.fetch_add(1);
    submit_ring::FutexWakeAll(&header()->doorbell);
    const absl::Time deadline = absl::Now() + timeout;
    while (slot(i)->state.load() != submit_ring::kReply) {
      if (absl::Now() > deadline) return std::nullopt;
      absl::SleepFor(absl::Microseconds(100));
    }
    v1::RingReply reply;
    if (!reply.ParseFromArray(submit_ring::Payload(slot(i)), slot(i)->length)) return std::nullopt;
    slot(i)->state.store(submit_ring::kFree);
    return reply;
  }
};

absl::Status Attach(Client& client, RawRing& ring, uint64_t size) {
  v1::AttachSubmitRingRequest request;
  request.set_session_id(client.session_id());
  request.set_shm_name(ring.shm.name());
  request.set_size(size);
  v1::AttachSubmitRingResponse response;
  grpc::ClientContext context;
  return FromGrpcStatus(client.stub()->AttachSubmitRing(&context, request, &response));
}

TEST_F(ClientDaemonTest, AttachSubmitRingRejectsBadRingsNamingTheRule) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("ring-attach").ok());
  const uint64_t size = submit_ring::RingBytes(2, 4096);
  {
    RawRing ring = RawRing::Make(2, 4096);
    ring.header()->magic = 0x12345678;
    const absl::Status s = Attach(*client, ring, size);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("magic"), absl::string_view::npos) << s;
  }
  {
    RawRing ring = RawRing::Make(2, 4096);
    ring.header()->slots = 3;  // the object is sized for 2
    const absl::Status s = Attach(*client, ring, size);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("RingBytes"), absl::string_view::npos) << s;
  }
  {
    RawRing ring = RawRing::Make(2, 4096);
    const absl::Status s = Attach(*client, ring, size + 64);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("size="), absl::string_view::npos) << s;
  }
  {
    RawRing ring = RawRing::Make(2, 1000);  // not a multiple of 64, under the minimum
    const absl::Status s = Attach(*client, ring, submit_ring::RingBytes(2, 1000));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("slot_bytes=1000"), absl::string_view::npos) << s;
  }
  {
    RawRing ring = RawRing::Make(2, 4096);
    ASSERT_TRUE(ring.shm.Unlink().ok());
    const absl::Status s = Attach(*client, ring, size);  // opened as RegisterBuffer opens shm
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("cannot be opened"), absl::string_view::npos) << s;
  }
  RawRing ring = RawRing::Make(2, 4096);
  ASSERT_TRUE(Attach(*client, ring, size).ok());
  RawRing second = RawRing::Make(2, 4096);
  EXPECT_EQ(Attach(*client, second, size).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(client->AttachSubmitRing().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(ClientDaemonTest, GarbageInARingSlotIsAnsweredAndTheRingKeepsServing) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("ring-garbage").ok());
  RawRing ring = RawRing::Make(2, 4096);
  ASSERT_TRUE(Attach(*client, ring, submit_ring::RingBytes(2, 4096)).ok());

  std::optional<v1::RingReply> reply =
      ring.Call(0, std::string("\xff\xff\xff\xff\x0f garbage", 13));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply->message().find("not a RingRequest"), std::string::npos) << reply->message();

  // A length past the slot is refused without reading past it.
  ring.slot(1)->length = 1u << 30;
  ring.slot(1)->state.store(submit_ring::kRequest);
  ring.header()->doorbell.fetch_add(1);
  submit_ring::FutexWakeAll(&ring.header()->doorbell);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (ring.slot(1)->state.load() != submit_ring::kReply && absl::Now() < deadline) {
    absl::SleepFor(absl::Microseconds(100));
  }
  ASSERT_EQ(ring.slot(1)->state.load(), submit_ring::kReply);
  ring.slot(1)->state.store(submit_ring::kFree);

  v1::RingRequest empty_call;
  reply = ring.Call(1, empty_call.SerializeAsString());
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply->message().find("call is not set"), std::string::npos) << reply->message();

  v1::RingRequest round_trip;
  round_trip.mutable_submit();  // an empty batch
  reply = ring.Call(0, round_trip.SerializeAsString());
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(), 0) << reply->message();
  EXPECT_TRUE(client->Submit({}).ok());
}

TEST_F(ClientDaemonTest, EndingTheSessionDetachesItsRing) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("ring-detach").ok());
  RawRing ring = RawRing::Make(2, 4096);
  ASSERT_TRUE(Attach(*client, ring, submit_ring::RingBytes(2, 4096)).ok());
  EXPECT_EQ(ring.header()->detached.load(), 0u);
  ASSERT_TRUE(client->CloseSession().ok());
  EXPECT_EQ(ring.header()->detached.load(), 1u);  // Close stops the ring before it returns
  v1::RingRequest round_trip;
  round_trip.mutable_submit();
  // Nobody serves it any more.
  EXPECT_FALSE(ring.Call(0, round_trip.SerializeAsString(), absl::Milliseconds(300)).has_value());
}

// ---- A client that shrinks a shm object the daemon has mapped ----

// Shrinks the shm object `name` to `bytes`, as a misbehaving owner would.
void Truncate(const std::string& name, off_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << name;
  ASSERT_EQ(ftruncate(fd, bytes), 0);
  close(fd);
}

TEST_F(ClientDaemonTest, TruncatedBufferFailsItsOpsAndTheDaemonKeepsServing) {
  std::unique_ptr<Client> bad = Connected();
  std::unique_ptr<Client> good = Connected();
  ASSERT_TRUE(bad->OpenSession("truncating").ok());
  ASSERT_TRUE(good->OpenSession("bystander").ok());
  ShmOptions named;  // a memfd of the library is sealed against this; a named object is not
  named.named = true;
  QuantizeBuffers q = MakeQuantize(*bad, 64, 1024, named);
  FillInput(q, 3);
  ASSERT_TRUE(bad->Quantize(q.op).ok());
  Truncate(q.x.name(), 0);  // the input, 128 KiB, is gone under the daemon's mapping

  const absl::Status s = bad->Quantize(q.op).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("input: its shared-memory object was truncated"),
            absl::string_view::npos)
      << s;
  EXPECT_EQ(bad->Quantize(q.op).status().code(), absl::StatusCode::kFailedPrecondition)
      << "and stays so";

  QuantizeBuffers other = MakeQuantize(*good, 64, 1024);
  FillInput(other, 3);
  EXPECT_TRUE(good->Quantize(other.op).ok());
  EXPECT_TRUE(bad->ReleaseBuffer(q.x).ok());
  EXPECT_TRUE(bad->Submit({}).ok());
}

TEST_F(ClientDaemonTest, TruncatedRingStopsBeingServedAndTheDaemonKeepsServing) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("ring-truncate").ok());
  RawRing ring = RawRing::Make(2, 4096);
  ASSERT_TRUE(Attach(*client, ring, submit_ring::RingBytes(2, 4096)).ok());
  v1::RingRequest round_trip;
  round_trip.mutable_submit();
  ASSERT_TRUE(ring.Call(0, round_trip.SerializeAsString()).has_value());
  const uint64_t faults = ShmFaults();
  Truncate(ring.shm.name(), 0);  // the ring's thread faults on its next look at the slots
  const absl::Time deadline = absl::Now() + kHangTimeout;
  while (ShmFaults() == faults && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_GT(ShmFaults(), faults) << "the daemon never touched the truncated ring";
  std::unique_ptr<Client> other = Connected();
  ASSERT_TRUE(other->OpenSession("ring-bystander").ok());
  ASSERT_TRUE(other->AttachSubmitRing().ok());
  QuantizeBuffers q = MakeQuantize(*other, 32, 256);
  EXPECT_TRUE(other->Quantize(q.op).ok());
  EXPECT_EQ(other->submit_ring_counts().ring_calls, 1u);
  EXPECT_TRUE(client->Submit({}).ok());  // the session itself still answers over gRPC
  EXPECT_TRUE(client->CloseSession().ok());
}

}  // namespace
}  // namespace client
}  // namespace kd
