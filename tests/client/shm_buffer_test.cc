#include "kerneld/client/shm_buffer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace kd {
namespace client {
namespace {

// True when a shm object of that name exists, looked up independently of ShmBuffer.
bool ShmExists(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

// Options for a named object (the default is a memfd).
ShmOptions Named() {
  ShmOptions options;
  options.named = true;
  return options;
}

// What /proc/self/fd/<fd> points to ("/memfd:<label> (deleted)" for a memfd).
std::string FdTarget(int fd) {
  char target[512];
  const ssize_t n =
      readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), target, sizeof(target));
  return n > 0 ? std::string(target, n) : std::string();
}

struct stat StatShm(const std::string& name) {
  struct stat st {};
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  EXPECT_GE(fd, 0) << name << ": " << std::strerror(errno);
  if (fd >= 0) {
    fstat(fd, &st);
    close(fd);
  }
  return st;
}

TEST(ShmBufferTest, CreateMakesASealedMemfdWithNoName) {
  absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Create(10000);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_TRUE(buffer->name().empty());
  EXPECT_FALSE(buffer->owns_name());
  ASSERT_GE(buffer->fd(), 0);
  EXPECT_EQ(FdTarget(buffer->fd()).rfind("/memfd:kerneld-client-", 0), 0u)
      << FdTarget(buffer->fd());
  EXPECT_EQ(fcntl(buffer->fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  struct stat st;
  ASSERT_EQ(fstat(buffer->fd(), &st), 0);
  EXPECT_EQ(st.st_size, 10000);
  // Sealed at its size: nobody can shrink it under another mapping.
  EXPECT_EQ(fcntl(buffer->fd(), F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW),
            F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_NE(ftruncate(buffer->fd(), 0), 0);
  EXPECT_TRUE(buffer->Unlink().ok());  // nothing to unlink
  // What the daemon does with the descriptor it is sent: map it and see the same bytes.
  buffer->As<uint32_t>()[5] = 0xFEEDu;
  void* other = mmap(nullptr, 10000, PROT_READ | PROT_WRITE, MAP_SHARED, buffer->fd(), 0);
  ASSERT_NE(other, MAP_FAILED);
  EXPECT_EQ(static_cast<uint32_t*>(other)[5], 0xFEEDu);
  munmap(other, 10000);
}

TEST(ShmBufferTest, AdoptMapsAndOwnsADescriptor) {
  absl::StatusOr<ShmBuffer> source = ShmBuffer::Create(8192);
  ASSERT_TRUE(source.ok());
  source->As<int32_t>()[7] = -9;
  absl::StatusOr<ShmBuffer> adopted = ShmBuffer::Adopt(dup(source->fd()), 8192);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(adopted->As<int32_t>()[7], -9);
  EXPECT_TRUE(adopted->name().empty());
  EXPECT_EQ(ShmBuffer::Adopt(dup(source->fd()), 8193).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ShmBuffer::Adopt(-1, 64).status().code(), absl::StatusCode::kInvalidArgument);
  const int fd = adopted->fd();
  *adopted = ShmBuffer();
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the adopted descriptor is closed with its buffer";
}

TEST(ShmBufferTest, NamedCreateMakesASizedPrivateObjectAndDestructionUnlinksIt) {
  std::string name;
  {
    absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Create(10000, Named());
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    name = buffer->name();
    EXPECT_TRUE(buffer->owns_name());
    EXPECT_EQ(buffer->size(), 10000u);
    EXPECT_EQ(buffer->buffer_id(), 0u);
    ASSERT_TRUE(ShmExists(name));
    const struct stat st = StatShm(name);
    EXPECT_EQ(st.st_size, 10000);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
  EXPECT_FALSE(ShmExists(name));
}

TEST(ShmBufferTest, MemoryIsZeroedAndSharedWithOtherMappings) {
  absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Create(4096, Named());
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  for (uint8_t b : buffer->Span<uint8_t>()) ASSERT_EQ(b, 0);
  buffer->As<uint32_t>()[3] = 0xCAFEF00Du;

  // What another process does: open the name and map it.
  const int fd = shm_open(buffer->name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  void* other = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(other, MAP_FAILED);
  EXPECT_EQ(static_cast<uint32_t*>(other)[3], 0xCAFEF00Du);
  static_cast<float*>(other)[10] = 1.5f;
  EXPECT_EQ(buffer->Span<float>(40, 1)[0], 1.5f);
  munmap(other, 4096);
}

TEST(ShmBufferTest, ModeIsAppliedDespiteTheUmask) {
  const mode_t old_umask = umask(077);
  ShmOptions options = Named();
  options.mode = 0660;
  absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Create(64, options);
  umask(old_umask);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(StatShm(buffer->name()).st_mode & 07777, 0660u);
}

TEST(ShmBufferTest, GroupIsApplied) {
  ShmOptions options = Named();
  options.group = getegid();
  absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Create(64, options);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(StatShm(buffer->name()).st_gid, getegid());
}

TEST(ShmBufferTest, NamesAreUniqueAndCarryThePrefix) {
  ShmOptions options = Named();
  options.name_prefix = "/kerneld-client-test";
  absl::StatusOr<ShmBuffer> a = ShmBuffer::Create(64, options);
  absl::StatusOr<ShmBuffer> b = ShmBuffer::Create(64, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->name(), b->name());
  EXPECT_EQ(a->name().rfind("/kerneld-client-test-", 0), 0u) << a->name();
}

TEST(ShmBufferTest, ZeroSizeIsInvalidArgument) {
  EXPECT_EQ(ShmBuffer::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShmBufferTest, PrefixWithoutLeadingSlashOrWithInnerSlashIsInvalidArgument) {
  ShmOptions options;
  options.name_prefix = "kerneld";
  EXPECT_EQ(ShmBuffer::Create(64, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.name_prefix = "/a/b";
  EXPECT_EQ(ShmBuffer::Create(64, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShmBufferTest, UnlinkRemovesTheNameButKeepsTheMemory) {
  absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Create(64, Named());
  ASSERT_TRUE(buffer.ok());
  const std::string name = buffer->name();
  ASSERT_TRUE(buffer->Unlink().ok());
  EXPECT_FALSE(ShmExists(name));
  EXPECT_FALSE(buffer->owns_name());
  buffer->As<char>()[63] = 'x';
  EXPECT_EQ(buffer->As<char>()[63], 'x');
  EXPECT_TRUE(buffer->Unlink().ok());
}

TEST(ShmBufferTest, MapSharesMemoryAndDoesNotUnlink) {
  absl::StatusOr<ShmBuffer> owner = ShmBuffer::Create(8192, Named());
  ASSERT_TRUE(owner.ok());
  {
    absl::StatusOr<ShmBuffer> mapped = ShmBuffer::Map(owner->name(), 4096);
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    EXPECT_FALSE(mapped->owns_name());
    EXPECT_EQ(mapped->size(), 4096u);
    mapped->As<int64_t>()[1] = -77;
    EXPECT_EQ(owner->As<int64_t>()[1], -77);
  }
  EXPECT_TRUE(ShmExists(owner->name()));
}

TEST(ShmBufferTest, MapOfAMissingObjectIsNotFound) {
  EXPECT_EQ(ShmBuffer::Map("/kerneld-client-test-no-such-object", 64).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ShmBufferTest, MapBeyondTheObjectIsOutOfRange) {
  absl::StatusOr<ShmBuffer> owner = ShmBuffer::Create(100, Named());
  ASSERT_TRUE(owner.ok());
  EXPECT_EQ(ShmBuffer::Map(owner->name(), 101).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(ShmBufferTest, MapOfAMalformedNameIsInvalidArgument) {
  EXPECT_EQ(ShmBuffer::Map("no-slash", 64).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShmBufferTest, MoveTransfersOwnershipAndTheId) {
  absl::StatusOr<ShmBuffer> created = ShmBuffer::Create(64, Named());
  ASSERT_TRUE(created.ok());
  created->set_buffer_id(42);
  const std::string name = created->name();
  ShmBuffer moved = *std::move(created);
  EXPECT_FALSE(created->valid());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.name(), name);
  EXPECT_EQ(moved.buffer_id(), 42u);
  ShmBuffer assigned;
  assigned = std::move(moved);
  EXPECT_TRUE(ShmExists(name));
  assigned = ShmBuffer();
  EXPECT_FALSE(ShmExists(name));
}

}  // namespace
}  // namespace client
}  // namespace kd
