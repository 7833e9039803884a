// SessionManager against the real CPU backend and real shm objects.
#include "server/session_manager.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/registry.h"
#include "tests/support/test_daemon.h"

namespace kd {
namespace {

using ::kd::testing::ShmObject;

class SessionManagerTest : public ::testing::Test {
 protected:
  // What the daemon imports for a client: a descriptor of the object (lent for the call).
  MemoryHandle Handle(const ShmObject& shm) {
    fds_.emplace_back(shm_open(shm.name().c_str(), O_RDWR | O_CLOEXEC, 0));
    EXPECT_TRUE(fds_.back().valid());
    MemoryHandle h;
    h.fd = fds_.back().get();
    h.shm_name = shm.name();
    h.size = shm.size();
    return h;
  }
  std::vector<UniqueFd> fds_;
  std::unique_ptr<Backend> cpu_ = CreateCpuBackend(1);
  SessionManager manager_{SessionLimits()};
};

TEST_F(SessionManagerTest, CloseReleasesEveryBuffer) {
  auto s = manager_.Open("t", 0);
  ASSERT_TRUE(s.ok());
  ShmObject a(4096), b(8192);
  ASSERT_TRUE(manager_.Register(**s, *cpu_, Handle(a)).ok());
  ASSERT_TRUE(manager_.Register(**s, *cpu_, Handle(b)).ok());
  auto alloc = manager_.Allocate(**s, *cpu_, 0, 1 << 20);
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  EXPECT_EQ(cpu_->Memory(0).imported, 4096u + 8192u);
  EXPECT_EQ(cpu_->Memory(0).used, 1u << 20);
  // Pool memory is a memfd sealed at its size: its holder cannot shrink it under the daemon.
  ASSERT_TRUE(alloc->fd.valid());
  EXPECT_EQ(fcntl(alloc->fd.get(), F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(ftruncate(alloc->fd.get(), 0), 0);
  EXPECT_TRUE(alloc->handle.shm_name.empty());
  alloc = absl::UnknownError("dropped");  // the test's copy must not keep the region alive
  auto released = manager_.Close((*s)->id(), "test");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(*released, 3u);
  EXPECT_EQ(cpu_->Memory(0).imported, 0u);
  EXPECT_EQ(cpu_->Memory(0).used, 0u);
  EXPECT_EQ(manager_.Stats().sessions, 0u);
}

TEST_F(SessionManagerTest, CloseTwiceIsNotFound) {
  auto s = manager_.Open("t", 0);
  ASSERT_TRUE(manager_.Close((*s)->id(), "test").ok());
  EXPECT_EQ(manager_.Close((*s)->id(), "test").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SessionManagerTest, RegionInUseOutlivesRelease) {
  auto s = manager_.Open("t", 0);
  ShmObject a(4096);
  auto entry = manager_.Register(**s, *cpu_, Handle(a));
  ASSERT_TRUE(entry.ok());
  std::shared_ptr<const Region> held = entry->region;  // what an op in flight holds
  const uint64_t id = entry->id;
  entry = absl::UnknownError("dropped");
  ASSERT_TRUE(manager_.Release(**s, id).ok());
  EXPECT_EQ(cpu_->Memory(0).imported, 4096u);
  static_cast<volatile char*>(held->data())[0] = 1;  // still mapped
  held.reset();
  EXPECT_EQ(cpu_->Memory(0).imported, 0u);
}

TEST_F(SessionManagerTest, LeaseExpiresWithoutActivity) {
  auto s = manager_.Open("t", 1);
  ASSERT_TRUE(s.ok());
  ShmObject a(4096);
  ASSERT_TRUE(manager_.Register(**s, *cpu_, Handle(a)).ok());
  std::string reason;
  (*s)->SetEndHook([&](const std::string& r) { reason = r; });
  const absl::Time registered = absl::Now();
  manager_.ReapExpired();
  // Still open, unless this thread stalled for the whole lease since the registration.
  if (absl::Now() - registered < absl::Seconds(1)) {
    EXPECT_EQ(manager_.Stats().sessions, 1u);
  }
  // Sleeping can only take longer than asked: the lease has run out when it returns.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  manager_.ReapExpired();
  EXPECT_EQ(manager_.Stats().sessions, 0u);
  EXPECT_EQ(reason, "lease expired");
  EXPECT_EQ(cpu_->Memory(0).imported, 0u);
}

TEST_F(SessionManagerTest, ActivityRenewsTheLease) {
  auto s = manager_.Open("t", 1);
  ASSERT_TRUE(s.ok());
  // 1.6 s in all, more than the 1 s lease: only the renewals keep the session open. Each reap
  // follows a renewal at once; a session reaped there is a bug, unless this thread stalled for
  // the whole lease between the two.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const absl::Time renewed = absl::Now();
    ASSERT_TRUE(manager_.Find((*s)->id()).ok()) << "reaped before round " << i;
    manager_.ReapExpired();
    if (absl::Now() - renewed >= absl::Seconds(1)) GTEST_SKIP() << "stalled for the lease";
    ASSERT_EQ(manager_.Stats().sessions, 1u) << "reaped right after a renewal, round " << i;
  }
}

TEST_F(SessionManagerTest, LeaseIsCappedByTheLimit) {
  SessionLimits limits;
  limits.max_lease_seconds = 10;
  SessionManager m(limits);
  auto s = m.Open("t", 100000);
  EXPECT_EQ((*s)->lease_seconds(), 10u);
}

TEST_F(SessionManagerTest, FailedImportLeavesNothingOpen) {
  auto s = manager_.Open("t", 0);
  ShmObject a(4096);
  MemoryHandle h = Handle(a);
  h.size = 8192;
  EXPECT_EQ(manager_.Register(**s, *cpu_, h).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->usage().buffers, 0u);
  EXPECT_EQ(cpu_->Memory(0).imported, 0u);
}

TEST_F(SessionManagerTest, PoolDescriptorIsHandedOutOnce) {
  auto region = cpu_->Allocate(0, 4096);
  ASSERT_TRUE(region.ok());
  auto first = cpu_->Export(**region);
  ASSERT_TRUE(first.ok());
  UniqueFd fd(first->fd);
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(cpu_->Export(**region).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SessionManagerTest, SessionOfAnotherUserIsNotFoundAsAnUnknownOne) {
  PeerCredentials alice;
  alice.pid = 1234;
  alice.uid = 1000;
  alice.gid = 1000;
  auto s = manager_.Open("t", 0, alice);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(manager_.FindForUid((*s)->id(), 1000).ok());
  const absl::Status other = manager_.FindForUid((*s)->id(), 1001).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kNotFound);
  const std::string unknown_id(32, 'f');
  const absl::Status unknown = manager_.FindForUid(unknown_id, 1000).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  std::string expected(unknown.message());
  expected.replace(expected.find(unknown_id), unknown_id.size(), (*s)->id());
  EXPECT_EQ(other.message(), expected);
  // A session with no known peer (TCP) is nobody's.
  auto tcp = manager_.Open("tcp", 0);
  EXPECT_EQ(manager_.FindForUid((*tcp)->id(), 0).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SessionManagerTest, ImportTakesOnlySharedMemoryDescriptors) {
  auto s = manager_.Open("t", 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  MemoryHandle h;
  h.fd = read_end.get();
  h.size = 64;
  absl::Status st = manager_.Register(**s, *cpu_, h).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("is not shared memory"), absl::string_view::npos) << st;
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  h.fd = dir.get();
  EXPECT_EQ(manager_.Register(**s, *cpu_, h).status().code(), absl::StatusCode::kInvalidArgument);
  // A read-only descriptor of shared memory cannot be mapped for writing.
  ShmObject a(4096);
  UniqueFd read_only(shm_open(a.name().c_str(), O_RDONLY | O_CLOEXEC, 0));
  h.fd = read_only.get();
  h.size = 4096;
  st = manager_.Register(**s, *cpu_, h).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("read-write"), absl::string_view::npos) << st;
  h.fd = -1;
  EXPECT_EQ(manager_.Register(**s, *cpu_, h).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->usage().buffers, 0u);
  EXPECT_EQ(cpu_->Memory(0).imported, 0u);
}

}  // namespace
}  // namespace kd
