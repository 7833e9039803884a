// The client library and kctl against the real daemon binary (started once for the suite on a
// temporary socket with the CPU backend): session lifetime as the daemon sees it, buffers,
// status codes as they arrive through the library, and kctl's view of a live session.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/kctl/commands.h"
#include "gtest/gtest.h"
#include "kerneld/client/admin_client.h"
#include "kerneld/client/client.h"
#include "kerneld/client/shm_buffer.h"
#include "kerneld/client/tensor_ref.h"

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
    for (int i = 0; i < 200; ++i) {
      struct stat st;
      if (stat(admin_socket_.c_str(), &st) == 0) return;
      usleep(50000);
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

  static bool SessionGoneWithin(const std::string& id, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (!FindSession(id).has_value()) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
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

QuantizeBuffers MakeQuantize(Client& client, int64_t m, int64_t k) {
  QuantizeBuffers q;
  q.x = *ShmBuffer::Create(m * k * 2);
  q.y = *ShmBuffer::Create(m * k);
  q.s = *ShmBuffer::Create(m * ((k + 127) / 128) * 4);
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
  EXPECT_TRUE(SessionGoneWithin(id, absl::Seconds(5)));
}

TEST_F(ClientDaemonTest, ExpiredLeaseShowsInSessionStatusAndOpsAreNotFound) {
  std::unique_ptr<Client> client = Connected();
  ASSERT_TRUE(client->OpenSession("lease-test", 1).ok());
  EXPECT_EQ(client->lease_seconds(), 1u);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
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
  QuantizeBuffers q = MakeQuantize(**client, 1, 128);
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

}  // namespace
}  // namespace client
}  // namespace kd
