// ShmWatch against real POSIX shm objects truncated under a live mapping, as a misbehaving
// client would do to a buffer the daemon has mapped.
#include "kerneld/kernels/shm_guard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace kd {
namespace {

constexpr size_t kBytes = 1 << 20;

// A shm object of kBytes mapped shared, its name unlinked at once; the fd stays open so the
// test can shrink the object like another process would.
struct Mapped {
  Mapped() {
    const std::string name =
        "/kd-shm-guard-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0);
    shm_unlink(name.c_str());
    EXPECT_EQ(ftruncate(fd, kBytes), 0);
    data = static_cast<uint8_t*>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(data, MAP_FAILED);
    std::memset(data, 0x5a, kBytes);
  }
  ~Mapped() {
    munmap(data, kBytes);
    close(fd);
  }
  static inline int counter = 0;
  int fd = -1;
  uint8_t* data = nullptr;
};

// Reads through a volatile pointer so the compiler cannot drop or hoist the access.
uint8_t ReadByte(const uint8_t* p) { return *static_cast<const volatile uint8_t*>(p); }

TEST(ShmGuardTest, AccessPastATruncationReadsZerosAndMarksTheWatch) {
  Mapped m;
  ShmWatch watch(m.data, kBytes);
  EXPECT_FALSE(watch.faulted());
  EXPECT_EQ(ReadByte(m.data + 8192), 0x5a);
  EXPECT_FALSE(ShmFaultedAt(m.data + 8192));

  ASSERT_EQ(ftruncate(m.fd, 4096), 0);  // the owner shrinks the object to one page
  const uint64_t faults = ShmFaultCount();
  EXPECT_EQ(ReadByte(m.data + 8192), 0);  // would be SIGBUS without the watch
  EXPECT_TRUE(watch.faulted());
  EXPECT_EQ(ShmFaultCount(), faults + 1);
  EXPECT_TRUE(ShmFaultedAt(m.data));
  EXPECT_TRUE(ShmFaultedAt(m.data + kBytes - 1));
  m.data[100] = 7;  // the range is private zero pages now: writable, and nobody else sees it
  EXPECT_EQ(ReadByte(m.data + 100), 7);

  Mapped other;
  ShmWatch other_watch(other.data, kBytes);
  EXPECT_FALSE(ShmFaultedAt(other.data));
  EXPECT_FALSE(other_watch.faulted());
}

TEST(ShmGuardTest, AReleasedWatchIsReusedClean) {
  Mapped a;
  {
    ShmWatch watch(a.data, kBytes);
    ASSERT_EQ(ftruncate(a.fd, 0), 0);
    EXPECT_EQ(ReadByte(a.data + 10), 0);
    EXPECT_TRUE(watch.faulted());
  }
  Mapped b;
  ShmWatch fresh(b.data, kBytes);
  EXPECT_FALSE(fresh.faulted());
  EXPECT_FALSE(ShmFaultedAt(b.data));
}

TEST(ShmGuardDeathTest, AnUnwatchedTruncatedMappingStillKillsTheProcess) {
  // A watch elsewhere must not swallow faults in memory nobody watches.
  Mapped watched;
  ShmWatch watch(watched.data, kBytes);
  EXPECT_EXIT(
      {
        Mapped m;
        if (ftruncate(m.fd, 0) != 0) _exit(3);
        ReadByte(m.data + 10);
        _exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
  EXPECT_FALSE(watch.faulted());
}

}  // namespace
}  // namespace kd
