// The OpenSession stream's life: it ends when the session ends, with the reason, and the session
// ends when the stream does.
#include "gtest/gtest.h"
#include "tests/support/test_daemon.h"
#include "tests/support/wait.h"

namespace kd {
namespace testing {
namespace {

TEST(SessionStreamTest, CloseSessionEndsTheStreamWithItsReason) {
  TestDaemon d;
  OpenSession s = d.Open("closer");
  grpc::ClientContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(s.id);
  v1::CloseSessionResponse resp;
  ASSERT_TRUE(d.data().CloseSession(&ctx, req, &resp).ok());
  v1::SessionEvent last;
  ASSERT_TRUE(s.stream->Read(&last));
  EXPECT_EQ(last.reason(), "closed by the client");
  EXPECT_FALSE(s.stream->Read(&last));
  EXPECT_TRUE(s.stream->Finish().ok());
}

TEST(SessionStreamTest, LeaseExpiryEndsTheStreamWithItsReason) {
  TestDaemon d;
  OpenSession s = d.Open("idle", /*lease_seconds=*/1);
  v1::SessionEvent last;
  ASSERT_TRUE(s.stream->Read(&last));  // blocks until the reaper ends the session
  EXPECT_EQ(last.reason(), "lease expired");
  EXPECT_EQ(d.daemon().sessions().Stats().sessions, 0u);
}

TEST(SessionStreamTest, CancellingTheStreamEndsTheSession) {
  TestDaemon d;
  ShmObject shm(4096);
  {
    OpenSession s = d.Open("leaver");
    d.Register(s, shm);
    EXPECT_EQ(d.daemon().sessions().Stats().buffers, 1u);
  }  // the stream is cancelled here, as when a client process dies
  // The session leaves the table first and its buffers are released right after: wait for both.
  WaitFor([&] {
    return d.daemon().sessions().Stats().sessions == 0 &&
           d.daemon().backends().Default()->Memory(0).imported == 0;
  });
  EXPECT_EQ(d.daemon().sessions().Stats().sessions, 0u);
  EXPECT_EQ(d.daemon().backends().Default()->Memory(0).imported, 0u);
}

}  // namespace
}  // namespace testing
}  // namespace kd
