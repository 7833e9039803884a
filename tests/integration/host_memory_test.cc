// The daemon never reaches host memory with its own rights on a client's behalf: the real
// kerneld binary, a hostile client process (shm_attacker), real shm objects and memfds.
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kerneld/client/client.h"
#include "server/daemon.h"
#include "tests/support/daemon_process.h"
#include "tests/support/test_daemon.h"

namespace kd {
namespace testing {
namespace {

constexpr int kInvalidArgument = static_cast<int>(absl::StatusCode::kInvalidArgument);
constexpr int kNotFound = static_cast<int>(absl::StatusCode::kNotFound);

struct Answer {
  int code = -1;
  std::string message;
};

// Runs shm_attacker with `args` (and the daemon's socket); its answers by attack name.
std::map<std::string, Answer> Attack(const DaemonProcess& daemon,
                                     const std::vector<std::string>& args, std::string* procfd) {
  std::vector<std::string> argv = {KD_SHM_ATTACKER_PATH, "--socket=" + daemon.data_socket()};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess attacker(argv);
  EXPECT_EQ(attacker.Wait(absl::Seconds(60)), 0) << attacker.Output();
  std::map<std::string, Answer> answers;
  for (absl::string_view line : absl::StrSplit(attacker.Output(), '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\t', 3));
    if (f.size() == 4 && f[0] == "RESULT") {
      Answer a;
      EXPECT_TRUE(absl::SimpleAtoi(f[2], &a.code)) << line;
      a.message = f[3];
      answers[f[1]] = a;
    } else if (f.size() >= 1 && f[0] == "PROCFD" && procfd != nullptr) {
      *procfd = std::string(line);
    }
  }
  EXPECT_EQ(answers.count("own_memfd"), 1u) << attacker.Output();
  EXPECT_EQ(answers["own_memfd"].code, 0)
      << "the control registration failed: " << answers["own_memfd"].message;
  return answers;
}

// `message` with every `from` replaced by `to`.
std::string Replace(std::string message, const std::string& from, const std::string& to) {
  for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at)) {
    message.replace(at, from.size(), to);
    at += to.size();
  }
  return message;
}

// Expects `attack` to be answered exactly as `unknown` was, naming `name` where it named
// `unknown_name`.
void ExpectAnsweredAsUnknown(const Answer& attack, const Answer& unknown, const std::string& name,
                             const std::string& unknown_name) {
  EXPECT_EQ(attack.code, unknown.code) << attack.message;
  EXPECT_EQ(attack.message, Replace(unknown.message, unknown_name, name));
}

// A shm object created by the test as root-or-whoever runs it, mode 0600, filled with a pattern.
class PrivateObject {
 public:
  explicit PrivateObject(size_t size) : size_(size) {
    name_ = absl::StrCat("/kerneld-test-private.", getpid());
    const int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || fchmod(fd, 0600) != 0 || ftruncate(fd, size) != 0) std::abort();
    data_ =
        static_cast<unsigned char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    if (data_ == MAP_FAILED) std::abort();
    for (size_t i = 0; i < size; ++i) data_[i] = static_cast<unsigned char>(i * 7 + 1);
  }
  ~PrivateObject() {
    munmap(data_, size_);
    shm_unlink(name_.c_str());
  }
  const std::string& name() const { return name_; }
  bool Untouched() const {
    for (size_t i = 0; i < size_; ++i) {
      if (data_[i] != static_cast<unsigned char>(i * 7 + 1)) return false;
    }
    return true;
  }

 private:
  std::string name_;
  size_t size_;
  unsigned char* data_;
};

TEST(HostMemoryTest, AnotherUserCannotReachARootOnlyObjectByName) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root: the daemon runs as root and the attacker drops to nobody "
                    "(the same-user cases run in AnotherSessionCannotReachAPoolBuffer)";
  }
  const struct group* nogroup = getgrgid(65534);
  ASSERT_NE(nogroup, nullptr) << "no group 65534 to give the attacker the data socket";
  TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);  // the socket's own mode guards it
  DaemonProcess daemon(KD_KERNELD_PATH, dir.path(),
                       {std::string("--socket_group=") + nogroup->gr_name});
  ASSERT_TRUE(daemon.WaitServing()) << daemon.process().Output();
  struct stat st;
  ASSERT_EQ(stat(FdSocketPath(daemon.data_socket()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, 65534u);

  PrivateObject secret(64 << 10);
  // A root session whose id leaks to the attacker.
  auto victim = client::Client::Connect(daemon.data_socket());
  ASSERT_TRUE(victim.ok());
  ASSERT_TRUE((*victim)->OpenSession("root-trainer").ok());

  const std::string missing = absl::StrCat("/kerneld-test-missing.", getpid());
  std::string procfd;
  std::map<std::string, Answer> a = Attack(
      daemon,
      {"--uid=65534", "--gid=65534", "--names=" + secret.name() + "," + missing,
       "--victim_session=" + (*victim)->session_id(), absl::StrCat("--daemon_pid=", daemon.pid())},
      &procfd);

  // By name, on its own session and on the leaked one: answered as a missing object.
  EXPECT_EQ(a["register:" + missing].code, kInvalidArgument);
  EXPECT_EQ(a["register:" + missing].message,
            absl::StrCat("shm_name=\"", missing, "\" cannot be opened: No such file or directory"));
  for (const char* attack : {"register:", "ring:", "victim_register:"}) {
    SCOPED_TRACE(attack);
    ExpectAnsweredAsUnknown(a[attack + secret.name()], a[attack + missing], secret.name(), missing);
  }
  // The leaked session over the fd socket: another user's session is an unknown one.
  const std::string unknown_id(32, '0');
  for (const char* call : {"_fd_register", "_fd_allocate"}) {
    SCOPED_TRACE(call);
    EXPECT_EQ(a[absl::StrCat("unknown", call)].code, kNotFound);
    ExpectAnsweredAsUnknown(a[absl::StrCat("victim", call)], a[absl::StrCat("unknown", call)],
                            (*victim)->session_id(), unknown_id);
  }
  EXPECT_EQ(procfd, "PROCFD\t0\t0") << "nobody may not list a root daemon's descriptors";
  EXPECT_TRUE(secret.Untouched());
  auto status = daemon.Status();
  ASSERT_TRUE(status.ok());
  for (const auto& s : status->sessions()) {
    if (s.session_id() == (*victim)->session_id()) {
      EXPECT_EQ(s.buffers(), 0u);
      EXPECT_EQ(s.uid(), 0);
      EXPECT_EQ(s.pid(), getpid());
    }
  }
}

TEST(HostMemoryTest, AnotherSessionCannotReachAPoolBufferByNameOrDescriptor) {
  TempDir dir;
  const std::vector<std::string> shm_before = DevShmNames();
  DaemonProcess daemon(KD_KERNELD_PATH, dir.path());
  ASSERT_TRUE(daemon.WaitServing()) << daemon.process().Output();

  // The victim: pool memory with a pattern in it, a buffer of its own and a ring.
  auto victim = client::Client::Connect(daemon.data_socket());
  ASSERT_TRUE(victim.ok());
  ASSERT_TRUE((*victim)->OpenSession("victim").ok());
  absl::StatusOr<client::ShmBuffer> pool = (*victim)->AllocateBuffer(64 << 10);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_TRUE(pool->name().empty());
  std::memset(pool->data(), 0x5A, pool->size());
  absl::StatusOr<client::ShmBuffer> own = client::ShmBuffer::Create(4096);
  ASSERT_TRUE(own.ok());
  ASSERT_TRUE((*victim)->RegisterBuffer(*own).ok());
  ASSERT_TRUE((*victim)->AttachSubmitRing().ok());
  // Over gRPC the daemon answers an allocation with no handle at all.
  absl::StatusOr<v1::AllocateBufferResponse> raw = (*victim)->AllocateBufferRaw(4096);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->handle_case(), v1::AllocateBufferResponse::HANDLE_NOT_SET);

  // Every name that appeared in /dev/shm since the daemon started (none should have), and the
  // names a pool once had.
  std::vector<std::string> names;
  for (const std::string& n : DevShmNames()) {
    if (std::find(shm_before.begin(), shm_before.end(), n) == shm_before.end()) {
      names.push_back("/" + n);
    }
  }
  EXPECT_TRUE(names.empty()) << "new /dev/shm objects: " << absl::StrJoin(names, " ");
  names.push_back("/kerneld-pool");
  names.push_back("/memfd:kerneld-pool");
  names.push_back(absl::StrCat("/kerneld.", daemon.pid(), ".0000000000000000.0"));
  const std::string missing = absl::StrCat("/kerneld-test-missing.", getpid());
  names.push_back(missing);
  std::string procfd;
  std::map<std::string, Answer> a = Attack(
      daemon, {"--names=" + absl::StrJoin(names, ","), absl::StrCat("--daemon_pid=", daemon.pid())},
      &procfd);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    ExpectAnsweredAsUnknown(a["register:" + name], a["register:" + missing], name, missing);
  }
  // The daemon keeps no descriptor of pool memory once it handed it to its session: there is
  // none to find in /proc/<pid>/fd, whoever looks.
  int tried = 0;
  for (const auto& [attack, answer] : a) {
    if (!absl::StartsWith(attack, "procfd:")) continue;
    ++tried;
    EXPECT_FALSE(absl::StrContains(attack, "memfd:")) << attack;
    EXPECT_FALSE(absl::StrContains(attack, "/dev/shm/")) << attack;
  }
  EXPECT_FALSE(procfd.empty());
  EXPECT_GT(tried, 0) << procfd << " (the test runs as the daemon's user and can open them)";
  for (size_t i = 0; i < pool->size(); ++i) ASSERT_EQ(pool->As<unsigned char>()[i], 0x5A) << i;
}

}  // namespace
}  // namespace testing
}  // namespace kd
