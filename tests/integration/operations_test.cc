// What an operator relies on, against the real kerneld and kctl binaries: --help and --version,
// readiness through $NOTIFY_SOCKET, signals (SIGTERM drains within the grace and not longer;
// Ctrl-C or a killed kctl stops the daemon's tuning), the tune budget as a deadline, the cache
// lock timeout, importing a cache at start, and the log lines.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/autotune_cache.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_daemon.h"

namespace kd {
namespace testing {
namespace {

// A CPU GEMM whose runs take tens of milliseconds on two threads: a whole tune of it takes
// many seconds, so a cancellation or a deadline is seen long before it would end by itself.
constexpr char kSlowShape[] = "nt:512x1024x2048";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// User + system CPU seconds of `pid` so far (/proc/<pid>/stat fields 14 and 15).
double CpuSeconds(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  const std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
  double utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtod(f[11], &utime) || !absl::SimpleAtod(f[12], &stime)) {
    return -1;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds `pid` spends during the next `window`.
double CpuDuring(pid_t pid, absl::Duration window) {
  const double before = CpuSeconds(pid);
  absl::SleepFor(window);
  return CpuSeconds(pid) - before;
}

int64_t JsonInt(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":\\s*(-?[0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

// A kerneld started through /bin/sh so that its stderr goes to a file the test reads; `exec`
// keeps the daemon's pid the child's, so signals reach it directly.
class Kerneld {
 public:
  Kerneld(const std::string& dir, const std::vector<std::string>& flags)
      : admin_(dir + "/admin.sock"), data_(dir + "/kerneld.sock"), log_(dir + "/kerneld.log") {
    std::string cmd =
        absl::StrCat("exec '", KD_KERNELD_PATH, "' --socket=", data_, " --admin_socket=", admin_,
                     " --metrics_address= --backend=cpu --cpu_threads=2");
    for (const std::string& f : flags) absl::StrAppend(&cmd, " '", f, "'");
    absl::StrAppend(&cmd, " 2>>", log_);
    process_ = std::make_unique<Subprocess>(std::vector<std::string>{"/bin/sh", "-c", cmd});
  }

  // Waits until `kctl status` answers; false after `limit`.
  bool WaitServing(absl::Duration limit = absl::Seconds(20)) {
    const absl::Time deadline = absl::Now() + limit;
    while (absl::Now() < deadline) {
      int code = 0;
      RunCommand({KD_KCTL_PATH, "--admin_socket=" + admin_, "status", "--json"}, &code);
      if (code == 0) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  std::string Status() {
    int code = 0;
    std::string out =
        RunCommand({KD_KCTL_PATH, "--admin_socket=" + admin_, "status", "--json"}, &code);
    return code == 0 ? out : "";
  }

  // Waits until the daemon has spent `seconds` of CPU beyond what it had when called (it is
  // tuning); false after `limit`.
  bool WaitBusy(double seconds, absl::Duration limit = absl::Seconds(20)) {
    const double start = CpuSeconds(pid());
    const absl::Time deadline = absl::Now() + limit;
    while (absl::Now() < deadline) {
      if (CpuSeconds(pid()) - start >= seconds) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  std::unique_ptr<Subprocess> Tune(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {KD_KCTL_PATH, "--admin_socket=" + admin_, "tune"};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<Subprocess>(argv);
  }

  // Signals the daemon and returns its exit code and the time it took to exit.
  int Stop(int signal, absl::Duration* took, absl::Duration limit = absl::Seconds(60)) {
    const absl::Time start = absl::Now();
    process_->Kill(signal);
    const int code = process_->Wait(limit);
    *took = absl::Now() - start;
    return code;
  }

  pid_t pid() const { return process_->pid(); }
  Subprocess& process() { return *process_; }
  std::string Log() const { return ReadFile(log_); }
  const std::string& admin() const { return admin_; }
  const std::string& data() const { return data_; }

 private:
  std::string admin_, data_, log_;
  std::unique_ptr<Subprocess> process_;
};

TEST(OperationsTest, HelpListsTheDaemonsFlagsAndVersionNamesTheBuild) {
  int code = 0;
  const std::string help =
      RunCommand({"/bin/sh", "-c", absl::StrCat("'", KD_KERNELD_PATH, "' --help 2>&1")}, &code);
  EXPECT_EQ(help.find("No flags matched"), std::string::npos) << help;
  for (const char* flag : {"--socket", "--admin_socket", "--metrics_address", "--shutdown_grace",
                           "--log_level", "--autotune_import", "--autotune_lock_timeout"}) {
    EXPECT_TRUE(absl::StrContains(help, flag)) << flag << " missing from --help:\n" << help;
  }
  const std::string version =
      RunCommand({"/bin/sh", "-c", absl::StrCat("'", KD_KERNELD_PATH, "' --version 2>&1")}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StartsWith(version, "kerneld 0.")) << version;
  EXPECT_TRUE(absl::StrContains(version, "\ncommit: ")) << version;
  EXPECT_TRUE(absl::StrContains(version, "\ncuda backend: ")) << version;

  RunCommand({"/bin/sh", "-c", absl::StrCat("'", KD_KERNELD_PATH, "' --log_level=loud 2>&1")},
             &code);
  EXPECT_EQ(code, 2);
}

TEST(OperationsTest, NotifySocketHearsReadyOnceServingAndStoppingOnSigterm) {
  TempDir dir;
  const std::string notify = dir.path() + "/notify";
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  timeval tv = {20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  setenv("NOTIFY_SOCKET", notify.c_str(), 1);
  Kerneld kerneld(dir.path(), {});
  unsetenv("NOTIFY_SOCKET");
  char buf[512];
  ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0) << "no notification within 20 s: " << kerneld.Log();
  EXPECT_TRUE(absl::StartsWith(std::string(buf, n), "READY=1")) << std::string(buf, n);
  // Ready means serving: the admin socket answers right away.
  EXPECT_NE(kerneld.Status(), "");

  kerneld.process().Kill(SIGTERM);
  n = recv(fd, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0);
  EXPECT_TRUE(absl::StartsWith(std::string(buf, n), "STOPPING=1")) << std::string(buf, n);
  EXPECT_EQ(kerneld.process().Wait(absl::Seconds(20)), 0);
  close(fd);
}

TEST(OperationsTest, SigtermWithAnOpenSessionDoesNotWaitOutTheGrace) {
  TempDir dir;
  Kerneld kerneld(dir.path(), {"--shutdown_grace=60s"});
  ASSERT_TRUE(kerneld.WaitServing());
  Subprocess holder({KD_PIPELINE_CLIENT_PATH, "--socket=" + kerneld.data(), "--hold"});
  ASSERT_TRUE(absl::StartsWith(holder.ReadLine(absl::Seconds(20)), "READY"));
  EXPECT_EQ(JsonInt(kerneld.Status(), "sessions_active"), 1);
  absl::Duration took;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &took), 0) << kerneld.Log();
  // Far under the 60 s grace. With a session held open the drain takes about 5 s (measured on
  // the 2-vCPU CI machine; an idle daemon drains in milliseconds), so the bound sits above that.
  EXPECT_LT(took, absl::Seconds(15)) << kerneld.Log();
  const std::string log = kerneld.Log();
  EXPECT_TRUE(absl::StrContains(log, "closed (daemon shutting down)")) << log;
  EXPECT_TRUE(absl::StrContains(log, "drained in")) << log;
}

TEST(OperationsTest, SigtermDuringATuneExitsWithinTheGrace) {
  TempDir dir;
  Kerneld kerneld(dir.path(), {"--shutdown_grace=3s"});
  ASSERT_TRUE(kerneld.WaitServing());
  auto tune = kerneld.Tune({kSlowShape});
  ASSERT_TRUE(kerneld.WaitBusy(0.5)) << kerneld.Log();
  absl::Duration took;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &took), 0) << kerneld.Log();
  EXPECT_LT(took, absl::Seconds(3)) << kerneld.Log();
  EXPECT_EQ(tune->Wait(absl::Seconds(10)), 1);
  EXPECT_TRUE(absl::StrContains(kerneld.Log(), "tune cancelled")) << kerneld.Log();
}

// `kctl tune` interrupted (Ctrl-C) or killed: the daemon stops tuning within one kernel run
// instead of spending minutes of CPU on a result nobody waits for.
TEST(OperationsTest, InterruptedOrKilledKctlTuneStopsTheDaemonsTuning) {
  TempDir dir;
  Kerneld kerneld(dir.path(), {});
  ASSERT_TRUE(kerneld.WaitServing());
  for (const int signal : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(absl::StrCat("kctl signal ", signal));
    auto tune = kerneld.Tune({kSlowShape});
    ASSERT_TRUE(kerneld.WaitBusy(0.5)) << kerneld.Log();
    tune->Kill(signal);
    EXPECT_EQ(tune->Wait(absl::Seconds(5)), 128 + signal);
    absl::SleepFor(absl::Milliseconds(500));  // the kernel run in flight
    // Tuning at two threads burns about 2 CPU seconds a second; an idle daemon almost none.
    EXPECT_LT(CpuDuring(kerneld.pid(), absl::Seconds(1)), 0.2) << kerneld.Log();
  }
  absl::Duration took;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &took), 0);
  EXPECT_TRUE(absl::StrContains(kerneld.Log(), "the caller went away")) << kerneld.Log();
}

TEST(OperationsTest, TheBudgetIsADeadlineEvenForTheDefaultsMeasurement) {
  TempDir dir;
  Kerneld kerneld(dir.path(), {});
  ASSERT_TRUE(kerneld.WaitServing());
  auto timed_tune = [&](const std::string& budget, int* code, std::string* out) {
    const absl::Time start = absl::Now();
    auto tune = kerneld.Tune({kSlowShape, "--budget=" + budget});
    *code = tune->Wait(absl::Seconds(120));
    *out = tune->Output();
    return absl::Now() - start;
  };
  // What one kernel run costs here, with kctl's start and the harness's inputs: a budget too
  // short for any timed run stops after the first (correctness) run.
  int code = 0;
  std::string out;
  const absl::Duration one_run = timed_tune("0.001", &code, &out);
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(absl::StrContains(out, "DEADLINE_EXCEEDED")) << out;
  EXPECT_TRUE(absl::StrContains(out, "0 of 15 timed runs")) << out;
  // A budget of 1 s ends within it and the run in flight, although the default's measurement
  // alone is a correctness run, 2 warm-ups and 15 timed runs.
  const absl::Duration took = timed_tune("1", &code, &out);
  EXPECT_LT(took, absl::Seconds(1) + one_run + absl::Seconds(1)) << "one run: " << one_run;
  // The default's partial measurement (at least 3 timed runs) is kept, or the key fails with
  // DEADLINE_EXCEEDED: either is honest, neither is a result measured after the deadline.
  if (code == 0) {
    EXPECT_TRUE(absl::StrContains(out, "512x1024x2048")) << out;
  } else {
    EXPECT_EQ(code, 1);
    EXPECT_TRUE(absl::StrContains(out, "DEADLINE_EXCEEDED")) << out;
  }
  absl::Duration stop;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &stop), 0);
}

TEST(OperationsTest, ACacheLockHeldElsewhereFailsTheStartWithAClearError) {
  TempDir dir;
  const std::string cache_dir = dir.path() + "/autotune";
  {
    Kerneld first(dir.path(), {"--autotune_cache_dir=" + cache_dir});
    ASSERT_TRUE(first.WaitServing());
    absl::Duration took;
    ASSERT_EQ(first.Stop(SIGTERM, &took), 0);
  }
  // The cache file is named after the CPU's model: find its lock file.
  int code = 0;
  const std::string lock = std::string(absl::StripTrailingAsciiWhitespace(
      RunCommand({"/bin/sh", "-c", "ls " + cache_dir + "/*.lock"}, &code)));
  ASSERT_TRUE(absl::EndsWith(lock, ".cache.lock")) << lock;
  const int held = open(lock.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);

  Kerneld second(dir.path(), {"--autotune_cache_dir=" + cache_dir, "--autotune_lock_timeout=1s"});
  const absl::Time start = absl::Now();
  EXPECT_EQ(second.process().Wait(absl::Seconds(20)), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  const std::string log = second.Log();
  EXPECT_TRUE(absl::StrContains(log, "cannot start: DEADLINE_EXCEEDED: cannot lock " + lock))
      << log;
  close(held);
}

TEST(OperationsTest, AnExportedCacheIsImportedAtStartAndAForeignOneSkipped) {
  TempDir dir;
  const std::string import_dir = dir.path() + "/import";
  ASSERT_EQ(mkdir(import_dir.c_str(), 0755), 0);
  {
    Kerneld source(dir.path(), {});
    ASSERT_TRUE(source.WaitServing());
    auto tune = source.Tune({"nt:128x256x256"});
    ASSERT_EQ(tune->Wait(absl::Seconds(120)), 0) << source.Log();
    int code = 0;
    RunCommand({KD_KCTL_PATH, "--admin_socket=" + source.admin(), "cache", "export",
                import_dir + "/this-node.cache"},
               &code);
    ASSERT_EQ(code, 0);
    absl::Duration took;
    ASSERT_EQ(source.Stop(SIGTERM, &took), 0);
  }
  // The same file as another GPU model's export: valid, but for no device of this node.
  absl::StatusOr<CacheFile> file = ParseCacheFile(ReadFile(import_dir + "/this-node.cache"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->entries.size(), 1u);
  file->validators.device = "NVIDIA H100 80GB HBM3";
  file->validators.arch = "sm_90";
  std::ofstream(import_dir + "/other-model.cache") << SerializeCacheFile(*file);

  Kerneld kerneld(dir.path(), {"--autotune_import=" + import_dir});
  ASSERT_TRUE(kerneld.WaitServing()) << kerneld.Log();
  int code = 0;
  const std::string list =
      RunCommand({KD_KCTL_PATH, "--admin_socket=" + kerneld.admin(), "cache", "list"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(list, "128")) << list;
  const std::string log = kerneld.Log();
  EXPECT_TRUE(absl::StrContains(log, "this-node.cache: 1 entries imported, 0 rejected")) << log;
  EXPECT_TRUE(absl::StrContains(log, "other-model.cache skipped")) << log;
  absl::Duration took;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &took), 0);

  // A file that does not parse is an operator's error: the daemon refuses to start.
  std::ofstream(import_dir + "/torn.cache") << "kerneld-autotune-cache\t1\n";
  Kerneld refused(dir.path(), {"--autotune_import=" + import_dir});
  EXPECT_EQ(refused.process().Wait(absl::Seconds(20)), 1);
  EXPECT_TRUE(absl::StrContains(refused.Log(), "torn.cache")) << refused.Log();
}

TEST(OperationsTest, LogsHaveLevelsSessionLinesAndRefusalsAtDebug) {
  TempDir dir;
  Kerneld kerneld(dir.path(), {"--log_level=debug"});
  ASSERT_TRUE(kerneld.WaitServing());
  Subprocess malformed({KD_MALFORMED_CLIENT_PATH, "--socket=" + kerneld.data(), "--rounds=1"});
  EXPECT_EQ(malformed.Wait(absl::Seconds(60)), 0);
  absl::Duration took;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &took), 0);
  const std::string log = kerneld.Log();
  // Each session line names the peer process (SO_PEERCRED of its connection).
  const std::string peer = absl::StrCat("pid=", malformed.pid(), " uid=", getuid());
  EXPECT_TRUE(std::regex_search(
      log, std::regex("kerneld info: session [0-9a-f]{8} opened: " + peer + " client=")))
      << log;
  EXPECT_TRUE(std::regex_search(
      log, std::regex("kerneld info: session [0-9a-f]{8} closed \\([^)]*\\): " + peer)))
      << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("kerneld debug: refused [A-Za-z.]+ session=")))
      << log;
  // No session id is logged whole: it is the session's bearer token.
  EXPECT_FALSE(std::regex_search(log, std::regex("[0-9a-f]{32}"))) << log;

  // At the default level the refusals are not logged.
  TempDir quiet_dir;
  Kerneld quiet(quiet_dir.path(), {});
  ASSERT_TRUE(quiet.WaitServing());
  Subprocess again({KD_MALFORMED_CLIENT_PATH, "--socket=" + quiet.data(), "--rounds=1"});
  EXPECT_EQ(again.Wait(absl::Seconds(60)), 0);
  EXPECT_EQ(quiet.Stop(SIGTERM, &took), 0);
  EXPECT_FALSE(absl::StrContains(quiet.Log(), " debug: ")) << quiet.Log();
  EXPECT_TRUE(absl::StrContains(quiet.Log(), " info: session ")) << quiet.Log();
}

}  // namespace
}  // namespace testing
}  // namespace kd
