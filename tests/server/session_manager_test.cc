// SessionManager against the real CPU backend and real shm objects.
#include "kerneld/server/session_manager.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <thread>

#include "gtest/gtest.h"
#include "kerneld/kernels/registry.h"
#include "tests/support/test_daemon.h"

namespace kd {
namespace {

using ::kd::testing::ShmObject;

class SessionManagerTest : public ::testing::Test {
 protected:
  MemoryHandle Handle(const ShmObject& shm) {
    MemoryHandle h;
    h.shm_name = shm.name();
    h.size = shm.size();
    return h;
  }
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
  const std::string pool_name = alloc->second.shm_name;
  alloc = absl::UnknownError("dropped");  // the test's copy must not keep the region alive
  auto released = manager_.Close((*s)->id(), "test");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(*released, 3u);
  EXPECT_EQ(cpu_->Memory(0).imported, 0u);
  EXPECT_EQ(cpu_->Memory(0).used, 0u);
  // The pool's shm object is gone, not just unmapped.
  EXPECT_LT(shm_open(pool_name.c_str(), O_RDONLY, 0), 0);
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
  manager_.ReapExpired();
  EXPECT_EQ(manager_.Stats().sessions, 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  manager_.ReapExpired();
  EXPECT_EQ(manager_.Stats().sessions, 0u);
  EXPECT_EQ(reason, "lease expired");
  EXPECT_EQ(cpu_->Memory(0).imported, 0u);
}

TEST_F(SessionManagerTest, ActivityRenewsTheLease) {
  auto s = manager_.Open("t", 1);
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    ASSERT_TRUE(manager_.Find((*s)->id()).ok());
    manager_.ReapExpired();
  }
  EXPECT_EQ(manager_.Stats().sessions, 1u);
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

}  // namespace
}  // namespace kd
