// Peer credentials, the name check against them, and the socket paths' lock and binding.
#include "server/peer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/host_memory.h"
#include "server/unix_socket.h"
#include "tests/support/test_daemon.h"

namespace kd {
namespace {

struct stat Object(uid_t uid, gid_t gid, mode_t mode) {
  struct stat st {};
  st.st_uid = uid;
  st.st_gid = gid;
  st.st_mode = S_IFREG | mode;
  return st;
}

PeerCredentials Peer(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  PeerCredentials p;
  p.pid = 1;
  p.uid = uid;
  p.gid = gid;
  p.groups = std::move(groups);
  return p;
}

TEST(PeerMayReadWriteTest, DecidesByTheClassThePeerFallsIn) {
  // Owner: only the owner bits count, even when group or other bits would allow.
  EXPECT_TRUE(PeerMayReadWrite(Peer(1000, 1000), Object(1000, 50, 0600)));
  EXPECT_FALSE(PeerMayReadWrite(Peer(1000, 1000), Object(1000, 50, 0466)));
  EXPECT_FALSE(PeerMayReadWrite(Peer(1000, 1000), Object(1000, 50, 0400)));
  // Group, primary or supplementary.
  EXPECT_TRUE(PeerMayReadWrite(Peer(1001, 50), Object(1000, 50, 0660)));
  EXPECT_TRUE(PeerMayReadWrite(Peer(1001, 1001, {7, 50}), Object(1000, 50, 0660)));
  EXPECT_FALSE(PeerMayReadWrite(Peer(1001, 50), Object(1000, 50, 0606)));
  EXPECT_FALSE(PeerMayReadWrite(Peer(1001, 1001, {7}), Object(1000, 50, 0660)));
  // Everyone else.
  EXPECT_TRUE(PeerMayReadWrite(Peer(1001, 1001), Object(1000, 50, 0606)));
  EXPECT_FALSE(PeerMayReadWrite(Peer(1001, 1001), Object(1000, 50, 0604)));
  // Root.
  EXPECT_TRUE(PeerMayReadWrite(Peer(0, 0), Object(1000, 50, 0600)));
}

TEST(PeerCredentialsTest, ReadsTheOtherEndOfAUnixSocket) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd a(pair[0]), b(pair[1]);
  absl::StatusOr<PeerCredentials> peer = ReadPeerCredentials(a.get());
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->pid, getpid());
  EXPECT_EQ(peer->uid, geteuid());
  EXPECT_EQ(peer->gid, getegid());
  std::vector<gid_t> groups(getgroups(0, nullptr));
  getgroups(groups.size(), groups.data());
  EXPECT_EQ(peer->groups.size(), groups.size());
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
  EXPECT_EQ(ReadPeerCredentials(r.get()).status().code(), absl::StatusCode::kInternal);
}

TEST(PeerTableTest, FindsOnlyConnectionsTheDaemonAccepted) {
  PeerTable table;
  table.Set(7, Peer(1000, 1000));
  ASSERT_TRUE(table.Find("fd:7").has_value());
  EXPECT_EQ(table.Find("fd:7")->uid, 1000u);
  table.Set(7, Peer(1001, 1001));  // the number reused by the next connection
  EXPECT_EQ(table.Find("fd:7")->uid, 1001u);
  EXPECT_FALSE(table.Find("fd:8").has_value());
  EXPECT_FALSE(table.Find("ipv4:127.0.0.1:5000").has_value());
  EXPECT_FALSE(table.Find("fd:7x").has_value());
  EXPECT_FALSE(table.Find("").has_value());
}

class ShmObjectForPeerTest : public ::testing::Test {
 protected:
  ShmObjectForPeerTest() {
    name_ = absl::StrCat("/kerneld-test-peer.", getpid());
    const int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, 4096), 0);
    close(fd);
  }
  ~ShmObjectForPeerTest() override { shm_unlink(name_.c_str()); }
  absl::StatusOr<UniqueFd> Open(const std::string& name, std::optional<PeerCredentials> a,
                                std::optional<PeerCredentials> b) {
    const std::optional<PeerCredentials>* peers[] = {&a, &b};
    return OpenShmForPeers(name, peers);
  }
  std::string name_;
};

TEST_F(ShmObjectForPeerTest, OpensOnlyWhatEveryPeerCouldOpenAndRefusesLikeAMissingObject) {
  const PeerCredentials self = Peer(geteuid(), getegid());
  EXPECT_TRUE(Open(name_, self, self).ok());
  const std::string missing = absl::StrCat("/kerneld-test-missing.", getpid());
  const absl::Status unknown = Open(missing, self, self).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(),
            absl::StrCat("shm_name=\"", missing, "\" cannot be opened: No such file or directory"));
  const std::string refused =
      absl::StrCat("shm_name=\"", name_, "\" cannot be opened: No such file or directory");
  if (geteuid() != 0) {
    GTEST_SKIP() << "the rest needs an object owned by another user than the peers";
  }
  const PeerCredentials nobody = Peer(65534, 65534);
  for (const auto& [a, b] :
       std::vector<std::pair<std::optional<PeerCredentials>, std::optional<PeerCredentials>>>{
           {nobody, self}, {self, nobody}, {std::nullopt, self}, {self, std::nullopt}}) {
    const absl::Status s = Open(name_, a, b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), refused);
  }
  // Opened up to others: nobody may.
  ASSERT_EQ(chmod(("/dev/shm" + name_).c_str(), 0606), 0);
  EXPECT_TRUE(Open(name_, nobody, self).ok());
}

TEST_F(ShmObjectForPeerTest, MalformedNamesAreInvalidNamingTheRule) {
  const PeerCredentials self = Peer(geteuid(), getegid());
  for (const std::string& name : {std::string("no-slash"), std::string("/a/b"), std::string("/.."),
                                  std::string("/"), "/" + std::string(300, 'n')}) {
    const absl::Status s = Open(name, self, self).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(s.message().find("must be \"/name\""), absl::string_view::npos) << s;
  }
  EXPECT_EQ(Open("", self, self).status().code(), absl::StatusCode::kInvalidArgument);
  const absl::Status nul = Open(name_ + std::string("\0x", 2), self, self).status();
  EXPECT_EQ(nul.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nul.message().find("holds a NUL byte"), absl::string_view::npos) << nul;
  // A directory is not memory: /dev/shm/.. would be /dev.
  const absl::Status dir = Open("/.", self, self).status();
  EXPECT_EQ(dir.code(), absl::StatusCode::kInvalidArgument);
}

TEST(PathLockTest, ASecondHolderIsRefusedNamingTheFirstsPid) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/kerneld.sock";
  absl::StatusOr<std::unique_ptr<PathLock>> first = PathLock::Acquire(path);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->lock_path(), path + ".lock");
  // flock locks belong to the open file description: a second open in this process conflicts.
  const absl::Status second = PathLock::Acquire(path).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(
      second.message().find(absl::StrCat("another kerneld (pid ", getpid(), ") serves ", path)),
      absl::string_view::npos)
      << second;
  first->reset();
  EXPECT_TRUE(PathLock::Acquire(path).ok());
}

TEST(UnixListenerTest, ReplacesAStaleSocketRefusesAnythingElseAndRemovesOnlyItsOwn) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/s.sock";
  {
    absl::StatusOr<std::unique_ptr<UnixListener>> stale =
        UnixListener::Bind(path, SOCK_STREAM, 0600, "");
    ASSERT_TRUE(stale.ok()) << stale.status();
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    // What a SIGKILLed daemon leaves: the file without its listener.
    const std::string kept = path + ".kept";
    ASSERT_EQ(link(path.c_str(), kept.c_str()), 0);
    stale->reset();
    ASSERT_EQ(rename(kept.c_str(), path.c_str()), 0);
  }
  absl::StatusOr<std::unique_ptr<UnixListener>> listener =
      UnixListener::Bind(path, SOCK_SEQPACKET, 0660, "");
  ASSERT_TRUE(listener.ok()) << listener.status();
  // Someone replaced the path meanwhile: destruction leaves the new file alone.
  ASSERT_EQ(unlink(path.c_str()), 0);
  const int f = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(f, 0);
  close(f);
  listener->reset();
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  const absl::Status refused = UnixListener::Bind(path, SOCK_STREAM, 0600, "").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("exists and is not a socket"), absl::string_view::npos);
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(UnixListener::Bind(dir.path() + "/g.sock", SOCK_STREAM, 0600, "no-such-group-kd")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kd
