// The fd socket (FdRequest in kerneld.proto) against a real daemon: descriptors in, sealed pool
// memfds out, unusable messages answered without breaking the connection, and no descriptor
// kept that a refused request brought.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "server/unique_fd.h"
#include "tests/support/test_daemon.h"

namespace kd {
namespace testing {
namespace {

int OwnFds() {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

// A raw SOCK_SEQPACKET connection to the fd socket.
class FdSocket {
 public:
  explicit FdSocket(const std::string& path)
      : fd_(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    EXPECT_EQ(connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
  }

  // Sends `bytes` with `fds` attached, reads the reply; `received` gets its descriptor.
  v1::FdReply Call(const std::string& bytes, const std::vector<int>& fds = {},
                   UniqueFd* received = nullptr) {
    iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    EXPECT_EQ(sendmsg(fd_.get(), &msg, MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    std::vector<char> buffer(64 << 10);
    iovec in{buffer.data(), buffer.size()};
    alignas(cmsghdr) char in_control[CMSG_SPACE(sizeof(int))];
    msghdr reply_msg{};
    reply_msg.msg_iov = &in;
    reply_msg.msg_iovlen = 1;
    reply_msg.msg_control = in_control;
    reply_msg.msg_controllen = sizeof(in_control);
    const ssize_t n = recvmsg(fd_.get(), &reply_msg, MSG_CMSG_CLOEXEC);
    EXPECT_GT(n, 0);
    v1::FdReply reply;
    EXPECT_TRUE(reply.ParseFromArray(buffer.data(), static_cast<int>(std::max<ssize_t>(n, 0))));
    cmsghdr* c = CMSG_FIRSTHDR(&reply_msg);
    if (c != nullptr && c->cmsg_type == SCM_RIGHTS) {
      int got;
      std::memcpy(&got, CMSG_DATA(c), sizeof(int));
      if (received != nullptr) {
        received->reset(got);
      } else {
        close(got);
      }
    }
    return reply;
  }
  v1::FdReply Call(const v1::FdRequest& request, const std::vector<int>& fds = {},
                   UniqueFd* received = nullptr) {
    return Call(request.SerializeAsString(), fds, received);
  }

 private:
  UniqueFd fd_;
};

UniqueFd Memfd(size_t size) {
  UniqueFd fd(memfd_create("fd-socket-test", MFD_CLOEXEC));
  EXPECT_EQ(ftruncate(fd.get(), size), 0);
  return fd;
}

class FdSocketTest : public ::testing::Test {
 protected:
  void SetUp() override { session_ = daemon_.Open("fd-socket"); }

  v1::FdRequest Register(uint64_t size) {
    v1::FdRequest r;
    r.mutable_register_buffer()->set_session_id(session_.id);
    r.mutable_register_buffer()->set_attached_fd(true);
    r.mutable_register_buffer()->set_size(size);
    return r;
  }

  TestDaemon daemon_;
  OpenSession session_;
  FdSocket socket_{FdSocketPath(daemon_.data_socket())};
};

TEST_F(FdSocketTest, RegisteredDescriptorIsTheMemoryOpsUse) {
  UniqueFd fd = Memfd(1 << 16);
  auto* x = static_cast<uint16_t*>(
      mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0));
  ASSERT_NE(x, MAP_FAILED);
  x[0] = 0x3F80;  // bf16 1.0
  const v1::FdReply reply = socket_.Call(Register(1 << 16), {fd.get()});
  ASSERT_EQ(reply.code(), 0) << reply.message();
  EXPECT_EQ(reply.register_buffer().backend(), "cpu");
  const uint64_t id = reply.register_buffer().buffer_id();
  grpc::ClientContext ctx;
  v1::QuantizeRequest q;
  q.set_session_id(session_.id);
  *q.mutable_op()->mutable_input() = Ref(id, v1::DTYPE_BF16, {1, 128});
  *q.mutable_op()->mutable_output() = Ref(id, v1::DTYPE_E4M3FN, {1, 128}, 4096);
  *q.mutable_op()->mutable_scales() = Ref(id, v1::DTYPE_F32, {1, 1}, 8192);
  q.mutable_op()->set_granularity(v1::QUANT_1X128);
  v1::OpResponse resp;
  ASSERT_TRUE(daemon_.data().Quantize(&ctx, q, &resp).ok());
  EXPECT_EQ(reinterpret_cast<uint8_t*>(x)[4096], 0x7E);  // 1.0, the block's amax, is 448
  munmap(x, 1 << 16);
}

TEST_F(FdSocketTest, AllocationComesBackAsASealedMemfdOfThatBuffer) {
  v1::FdRequest r;
  r.mutable_allocate_buffer()->set_session_id(session_.id);
  r.mutable_allocate_buffer()->set_size(8192);
  UniqueFd pool;
  const v1::FdReply reply = socket_.Call(r, {}, &pool);
  ASSERT_EQ(reply.code(), 0) << reply.message();
  EXPECT_EQ(reply.allocate_buffer().handle_case(), v1::AllocateBufferResponse::kAttachedFd);
  ASSERT_TRUE(pool.valid());
  EXPECT_EQ(fcntl(pool.get(), F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(ftruncate(pool.get(), 0), 0);
  // The same memory the daemon runs ops on.
  auto* p = static_cast<uint16_t*>(
      mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, pool.get(), 0));
  ASSERT_NE(p, MAP_FAILED);
  p[0] = 0x3F80;
  const uint64_t id = reply.allocate_buffer().buffer_id();
  grpc::ClientContext ctx;
  v1::QuantizeRequest q;
  q.set_session_id(session_.id);
  *q.mutable_op()->mutable_input() = Ref(id, v1::DTYPE_BF16, {1, 128});
  *q.mutable_op()->mutable_output() = Ref(id, v1::DTYPE_E4M3FN, {1, 128}, 4096);
  *q.mutable_op()->mutable_scales() = Ref(id, v1::DTYPE_F32, {1, 1}, 6144);
  q.mutable_op()->set_granularity(v1::QUANT_1X128);
  v1::OpResponse resp;
  ASSERT_TRUE(daemon_.data().Quantize(&ctx, q, &resp).ok());
  EXPECT_EQ(reinterpret_cast<uint8_t*>(p)[4096], 0x7E);
  munmap(p, 8192);
}

TEST_F(FdSocketTest, UnusableMessagesAreAnsweredAndTheConnectionKeepsServing) {
  v1::FdReply reply = socket_.Call(std::string("\xff\xff\xff\xff\x0f not a message", 19));
  EXPECT_EQ(reply.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.message().find("is not an FdRequest"), std::string::npos) << reply.message();

  reply = socket_.Call(v1::FdRequest());
  EXPECT_EQ(reply.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.message().find("call is not set"), std::string::npos) << reply.message();

  UniqueFd a = Memfd(4096), b = Memfd(4096);
  reply = socket_.Call(Register(4096), {a.get(), b.get()});
  EXPECT_EQ(reply.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.message().find("at most one descriptor"), std::string::npos) << reply.message();

  reply = socket_.Call(Register(4096));
  EXPECT_EQ(reply.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.message().find("no descriptor came with the request"), std::string::npos)
      << reply.message();

  v1::FdRequest big = Register(4096);
  big.mutable_register_buffer()->set_session_id(std::string(70 << 10, 's'));
  reply = socket_.Call(big, {a.get()});
  EXPECT_EQ(reply.code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(reply.message().find("larger than 65536 bytes"), std::string::npos) << reply.message();

  reply = socket_.Call(Register(4096), {a.get()});
  EXPECT_EQ(reply.code(), 0) << reply.message();
}

TEST_F(FdSocketTest, DescriptorsOfRefusedRequestsAreNotKept) {
  UniqueFd a = Memfd(4096), b = Memfd(4096);
  socket_.Call(Register(4096), {a.get()});  // warm the connection and the daemon's tables
  const int before = OwnFds();              // the daemon runs in this process
  v1::FdRequest unknown = Register(4096);
  unknown.mutable_register_buffer()->set_session_id(std::string(32, '0'));
  EXPECT_EQ(socket_.Call(unknown, {a.get()}).code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(socket_.Call(Register(4096), {a.get(), b.get()}).code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(socket_.Call(Register(1 << 20), {a.get()}).code(),  // larger than the memfd
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(OwnFds(), before);
}

}  // namespace
}  // namespace testing
}  // namespace kd
