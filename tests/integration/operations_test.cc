// What an operator relies on, against the real kerneld and kctl binaries: --help and --version,
// readiness through $NOTIFY_SOCKET, signals (SIGTERM drains within the grace and not longer;
// Ctrl-C or a killed kctl stops the daemon's tuning), the tune budget as a deadline, the cache
// lock timeout, importing a cache at start, and the log lines.
//
// What the daemon did is read from the daemon itself (its /metrics, its tune replies, its log),
// and waits are for conditions: nothing here asserts how fast a machine is. Where a duration is
// the point (a drain must not wait out its grace), it is bounded by a generous multiple of a
// baseline measured in the same test.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
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
#include "kerneld/client/admin_client.h"
#include "kerneld/kernels/autotune_cache.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_daemon.h"
#include "tests/support/wait.h"

namespace kd {
namespace testing {
namespace {

// A CPU GEMM whose runs take tens of milliseconds on two threads: a whole tune of it (some 90
// runs) takes many times any bound below, so a cancellation or a deadline is seen long before it
// would end by itself. The sanitizer build runs it some 100 times slower: an eighth of it there.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KD_TEST_SANITIZED 1
#endif
#endif
#ifdef KD_TEST_SANITIZED
constexpr int64_t kSlowM = 256, kSlowN = 512, kSlowK = 1024;
#else
constexpr int64_t kSlowM = 512, kSlowN = 1024, kSlowK = 2048;
#endif

// As kctl tune takes it.
std::string SlowShapeText() { return absl::StrCat("nt:", kSlowM, "x", kSlowN, "x", kSlowK); }

v1::TuneShape SlowShape() {
  v1::TuneShape s;
  s.set_op("gemm");
  s.set_variant(v1::GEMM_NT);
  s.set_m(kSlowM);
  s.set_n(kSlowN);
  s.set_k(kSlowK);
  return s;
}

// How often the session holders' gRPC clients poll an idle channel (the default is 5 s). The
// daemon's drain waits for every client connection to answer its GOAWAY ping, which an idle
// client does at its next poll.
constexpr absl::Duration kHolderPoll = absl::Milliseconds(100);

// The pipeline client holding a session open until killed, polling its channel every
// kHolderPoll.
std::unique_ptr<Subprocess> Holder(const std::string& data_socket) {
  return std::make_unique<Subprocess>(
      std::vector<std::string>{"/usr/bin/env",
                               absl::StrCat("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS=",
                                            absl::ToInt64Milliseconds(kHolderPoll)),
                               KD_PIPELINE_CLIENT_PATH, "--socket=" + data_socket, "--hold"});
}

// What the daemon's /metrics says about its tuning.
struct TuneCounts {
  double runs = 0;             // kerneld_autotune_kernel_runs_total, both states
  double cancelled_runs = 0;   // ... {state="cancelled"}: started after their tune's cancel
  double active = 0;           // kerneld_autotune_tunes_active
  double cancelled_calls = 0;  // kerneld_rpc_requests_total{method="Tune",code="CANCELLED"}
};

// Scrapes `metrics` (host:port); nullopt when it does not answer.
std::optional<TuneCounts> ScrapeTuneCounts(const std::string& metrics) {
  const std::string e = HttpGet(metrics, "/metrics");
  if (e.find("kerneld_autotune_tunes_active") == std::string::npos) return std::nullopt;
  TuneCounts c;
  c.cancelled_runs = MetricValue(e, "kerneld_autotune_kernel_runs_total{state=\"cancelled\"}");
  c.runs =
      c.cancelled_runs + MetricValue(e, "kerneld_autotune_kernel_runs_total{state=\"tuning\"}");
  c.active = MetricValue(e, "kerneld_autotune_tunes_active");
  c.cancelled_calls =
      MetricValue(e, "kerneld_rpc_requests_total{code=\"CANCELLED\",method=\"Tune\"}");
  return c;
}

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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
  bool WaitServing(absl::Duration limit = kHangTimeout) {
    return WaitFor([&] { return !Status().empty(); }, limit, absl::Milliseconds(50));
  }

  std::string Status() {
    int code = 0;
    std::string out =
        RunCommand({KD_KCTL_PATH, "--admin_socket=" + admin_, "status", "--json"}, &code);
    return code == 0 ? out : "";
  }

  // "host:port" of /metrics, for a daemon started with --metrics_address=127.0.0.1:0.
  std::string MetricsAddress() {
    std::smatch m;
    const std::string status = Status();
    if (!std::regex_search(status, m, std::regex("\"metrics_address\":\\s*\"([^\"]+)\""))) {
      return "";
    }
    return m[1];
  }

  // The daemon's tuning counts, polled until /metrics answers (within kHangTimeout).
  TuneCounts Counts(const std::string& metrics) {
    std::optional<TuneCounts> c;
    EXPECT_TRUE(WaitFor([&] { return (c = ScrapeTuneCounts(metrics)).has_value(); }))
        << "no /metrics at " << metrics;
    return c.value_or(TuneCounts());
  }

  // Waits until the daemon's tuning counts satisfy `condition`; the last counts read.
  bool WaitForCounts(const std::string& metrics,
                     const std::function<bool(const TuneCounts&)>& condition, TuneCounts* last) {
    return WaitFor([&] {
      std::optional<TuneCounts> c = ScrapeTuneCounts(metrics);
      if (c.has_value()) *last = *c;
      return c.has_value() && condition(*c);
    });
  }

  // A Tune call over the admin socket: every progress message and the call's status.
  struct TuneReply {
    grpc::Status status;
    std::vector<v1::TuneProgress> progress;
  };
  TuneReply TuneOverRpc(const v1::TuneShape& shape, double budget_seconds) {
    TuneReply reply;
    absl::StatusOr<std::unique_ptr<client::AdminClient>> admin =
        client::AdminClient::Connect(admin_, kHangTimeout);
    if (!admin.ok()) {
      reply.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, admin.status().ToString());
      return reply;
    }
    v1::TuneRequest request;
    *request.add_shapes() = shape;
    request.set_budget_seconds(budget_seconds);
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::TuneProgress>> reader =
        (*admin)->stub()->Tune(&context, request);
    for (v1::TuneProgress p; reader->Read(&p);) reply.progress.push_back(p);
    reply.status = reader->Finish();
    return reply;
  }

  std::unique_ptr<Subprocess> Tune(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {KD_KCTL_PATH, "--admin_socket=" + admin_, "tune"};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<Subprocess>(argv);
  }

  // Signals the daemon and returns its exit code and the time it took to exit.
  int Stop(int signal, absl::Duration* took, absl::Duration limit = 2 * kHangTimeout) {
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
  timeval tv = {static_cast<time_t>(absl::ToInt64Seconds(kHangTimeout)), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  setenv("NOTIFY_SOCKET", notify.c_str(), 1);
  Kerneld kerneld(dir.path(), {});
  unsetenv("NOTIFY_SOCKET");
  char buf[512];
  ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0) << "no notification within " << kHangTimeout << ": " << kerneld.Log();
  EXPECT_TRUE(absl::StartsWith(std::string(buf, n), "READY=1")) << std::string(buf, n);
  // Ready means serving: the admin socket answers right away.
  EXPECT_NE(kerneld.Status(), "");

  kerneld.process().Kill(SIGTERM);
  n = recv(fd, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0);
  EXPECT_TRUE(absl::StartsWith(std::string(buf, n), "STOPPING=1")) << std::string(buf, n);
  EXPECT_EQ(kerneld.process().Wait(kHangTimeout), 0);
  close(fd);
}

// How long an idle daemon takes from SIGTERM to its exit here and now (with the test's own
// polling of its exit): the baseline a drain's bound is a multiple of. With metrics, once they
// have been scraped: the endpoint takes longer to stop once it has served.
absl::Duration IdleDrain(const std::vector<std::string>& flags) {
  TempDir dir;
  Kerneld idle(dir.path(), flags);
  EXPECT_TRUE(idle.WaitServing()) << idle.Log();
  const std::string metrics = idle.MetricsAddress();
  if (!metrics.empty()) idle.Counts(metrics);
  absl::Duration took;
  EXPECT_EQ(idle.Stop(SIGTERM, &took), 0) << idle.Log();
  return took;
}

TEST(OperationsTest, SigtermWithAnOpenSessionDoesNotWaitOutTheGrace) {
  const absl::Duration idle = IdleDrain({"--shutdown_grace=60s"});
  TempDir dir;
  Kerneld kerneld(dir.path(), {"--shutdown_grace=60s"});
  ASSERT_TRUE(kerneld.WaitServing());
  std::unique_ptr<Subprocess> holder = Holder(kerneld.data());
  ASSERT_TRUE(absl::StartsWith(holder->ReadLine(kHangTimeout), "READY"));
  EXPECT_EQ(JsonInt(kerneld.Status(), "sessions_active"), 1);
  absl::Duration took;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &took), 0) << kerneld.Log();
  // Closing one session and its buffers is a few idle drains' work (20x for a loaded machine);
  // the holder answers the daemon's GOAWAY ping at its next channel poll (10 polls for a loaded
  // machine). Waiting out the 60 s grace is far above either.
  const absl::Duration bound = 20 * idle + 10 * kHolderPoll;
  std::printf("drain with a session %s, idle %s, bound %s\n", absl::FormatDuration(took).c_str(),
              absl::FormatDuration(idle).c_str(), absl::FormatDuration(bound).c_str());
  EXPECT_LT(took, bound) << kerneld.Log();
  const std::string log = kerneld.Log();
  EXPECT_TRUE(absl::StrContains(log, "closed (daemon shutting down)")) << log;
  EXPECT_TRUE(absl::StrContains(log, "drained in")) << log;
}

TEST(OperationsTest, SigtermDuringATuneExitsWithinTheGrace) {
  // With the metrics endpoint (the test reads the kernel runs there), whose stop takes a second
  // or two of its own (civetweb's): the idle baseline has it too.
  const std::vector<std::string> flags = {"--shutdown_grace=600s", "--metrics_address=127.0.0.1:0"};
  const absl::Duration idle = IdleDrain(flags);
  TempDir dir;
  Kerneld kerneld(dir.path(), flags);
  ASSERT_TRUE(kerneld.WaitServing());
  const std::string metrics = kerneld.MetricsAddress();
  ASSERT_NE(metrics, "");
  // The longest step a cancel waits for, here and now, as the daemon times it: a tune whose
  // budget ends after the correctness run, and so after that run and its output check (none
  // when the tune's start and its first run are further apart than the budget: then again).
  absl::Duration step;
  for (int i = 0; i < 10 && step == absl::ZeroDuration(); ++i) {
    const Kerneld::TuneReply one = kerneld.TuneOverRpc(SlowShape(), 0.001);
    ASSERT_TRUE(one.status.ok()) << one.status.error_message();
    ASSERT_FALSE(one.progress.empty());
    const v1::TuneTimeline& t = one.progress[0].timeline();
    if (t.kernel_runs() == 1) step = absl::Seconds(t.end_seconds());
  }
  ASSERT_GT(step, absl::ZeroDuration());

  const double before = kerneld.Counts(metrics).runs;
  auto tune = kerneld.Tune({SlowShapeText()});
  TuneCounts counts;
  ASSERT_TRUE(kerneld.WaitForCounts(
      metrics, [&](const TuneCounts& c) { return c.runs > before; }, &counts))
      << kerneld.Log();
  absl::Duration took;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &took), 0) << kerneld.Log();
  // The tune is cancelled, not waited for: an idle drain (most of it the metrics endpoint's stop)
  // twice over, and the step in flight four times over, for a loaded machine. The rest of the
  // tune is some 90 runs; the grace, 10 minutes, is beyond Stop's limit.
  const absl::Duration bound = 2 * idle + 4 * step;
  std::printf("drain during a tune %s, idle %s, step %s, bound %s\n",
              absl::FormatDuration(took).c_str(), absl::FormatDuration(idle).c_str(),
              absl::FormatDuration(step).c_str(), absl::FormatDuration(bound).c_str());
  EXPECT_LT(took, bound) << kerneld.Log();
  EXPECT_EQ(tune->Wait(kHangTimeout), 1);
  EXPECT_TRUE(absl::StrContains(kerneld.Log(),
                                "tune cancelled after 0 of 1 shapes (the daemon is "
                                "shutting down)"))
      << kerneld.Log();
}

// `kctl tune` interrupted (Ctrl-C) or killed: the daemon stops tuning within one kernel run
// instead of spending minutes of CPU on a result nobody waits for.
TEST(OperationsTest, InterruptedOrKilledKctlTuneStopsTheDaemonsTuning) {
  TempDir dir;
  Kerneld kerneld(dir.path(), {"--metrics_address=127.0.0.1:0"});
  ASSERT_TRUE(kerneld.WaitServing());
  const std::string metrics = kerneld.MetricsAddress();
  ASSERT_NE(metrics, "");
  TuneCounts counts = kerneld.Counts(metrics);
  int cancelled = 0;
  for (const int signal : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(absl::StrCat("kctl signal ", signal));
    // Nothing ran since the last tune ended.
    const TuneCounts before = kerneld.Counts(metrics);
    EXPECT_EQ(before.runs, counts.runs);
    auto tune = kerneld.Tune({SlowShapeText()});
    ASSERT_TRUE(kerneld.WaitForCounts(
        metrics, [&](const TuneCounts& c) { return c.runs > before.runs; }, &counts))
        << "the daemon never ran the shape's kernel: " << kerneld.Log();
    tune->Kill(signal);
    EXPECT_EQ(tune->Wait(kHangTimeout), 128 + signal);
    ++cancelled;
    // The daemon finished the call as cancelled and holds no tune any more (a daemon that kept
    // tuning would finish the shape and the call as OK, minutes of runs later).
    ASSERT_TRUE(kerneld.WaitForCounts(
        metrics,
        [&](const TuneCounts& c) { return c.cancelled_calls == cancelled && c.active == 0; },
        &counts))
        << kerneld.Log();
    // No run started once the daemon saw the cancel: at most the one whose start raced it.
    EXPECT_LE(counts.cancelled_runs - before.cancelled_runs, 1) << kerneld.Log();
    EXPECT_EQ(Occurrences(kerneld.Log(), "the caller went away"), cancelled) << kerneld.Log();
  }
  EXPECT_EQ(kerneld.Counts(metrics).runs, counts.runs) << "kernel runs after the last tune ended";
  absl::Duration took;
  EXPECT_EQ(kerneld.Stop(SIGTERM, &took), 0);
}

// The budget is a deadline on the daemon's own clock: no kernel run starts after it, even inside
// the default's measurement, and every run the harness saw is in the tune's timeline.
TEST(OperationsTest, TheBudgetIsADeadlineEvenForTheDefaultsMeasurement) {
  TempDir dir;
  Kerneld kerneld(dir.path(), {"--metrics_address=127.0.0.1:0"});
  ASSERT_TRUE(kerneld.WaitServing());
  const std::string metrics = kerneld.MetricsAddress();
  ASSERT_NE(metrics, "");
  auto tune = [&](double budget) {
    const double before = kerneld.Counts(metrics).runs;
    Kerneld::TuneReply reply = kerneld.TuneOverRpc(SlowShape(), budget);
    EXPECT_TRUE(reply.status.ok()) << reply.status.error_message();
    EXPECT_EQ(reply.progress.size(), 2u);  // the shape's, then the one that says done
    v1::TuneProgress p = reply.progress.empty() ? v1::TuneProgress() : reply.progress[0];
    const v1::TuneTimeline& t = p.timeline();
    EXPECT_EQ(t.budget_seconds(), budget);
    EXPECT_EQ(t.kernel_runs(), kerneld.Counts(metrics).runs - before)
        << "runs of the harness that the tuner did not admit";
    if (t.kernel_runs() > 0) {
      EXPECT_LT(t.last_run_start_seconds(), budget) << "a run started after the deadline";
    }
    // Ended by the deadline, not by running out of candidates first (the whole tune takes many
    // times the budget), so the check above means something.
    EXPECT_GE(t.end_seconds(), budget);
    return p;
  };
  // A budget too short for any timed run: the default's correctness run at most, then the key
  // fails with DEADLINE_EXCEEDED.
  v1::TuneProgress p = tune(0.001);
  EXPECT_TRUE(absl::StrContains(p.error(), "DEADLINE_EXCEEDED")) << p.error();
  EXPECT_TRUE(absl::StrContains(p.error(), "0 of 15 timed runs")) << p.error();
  EXPECT_LE(p.timeline().kernel_runs(), 1u);
  // A budget that ends the tune inside the default's measurement (a correctness run, 2 warm-ups
  // and 15 timed runs) or soon after it: the default's partial measurement (at least 3 timed
  // runs) is kept, or the key fails with DEADLINE_EXCEEDED; either is honest, and no run
  // started after the deadline.
  p = tune(1.0);
  EXPECT_GE(p.timeline().kernel_runs(), 1u);
  if (p.error().empty()) {
    EXPECT_NE(p.config(), "");
  } else {
    EXPECT_TRUE(absl::StrContains(p.error(), "DEADLINE_EXCEEDED")) << p.error();
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
  EXPECT_EQ(second.process().Wait(kHangTimeout), 1);
  const absl::Duration took = absl::Now() - start;
  const std::string log = second.Log();
  EXPECT_TRUE(
      absl::StrContains(log, "cannot start: DEADLINE_EXCEEDED: cannot lock " + lock + " within 1s"))
      << log;
  close(held);
  EXPECT_GE(took, absl::Seconds(1)) << "it gave up before its lock timeout";
  // The same start failing on the step after the lock, with the lock free: the baseline.
  TempDir other;
  Kerneld refused(other.path(), {"--autotune_cache_dir=" + cache_dir,
                                 "--autotune_import=" + other.path() + "/none"});
  const absl::Time refused_start = absl::Now();
  EXPECT_EQ(refused.process().Wait(kHangTimeout), 1);
  const absl::Duration baseline = absl::Now() - refused_start;
  EXPECT_TRUE(absl::StrContains(refused.Log(), "autotune_import=")) << refused.Log();
  // The 1 s lock timeout and a start like the baseline's, 10x for a loaded machine: far under
  // the 10 s default timeout that a --autotune_lock_timeout ignored would wait.
  std::printf("locked start %s, refused start %s\n", absl::FormatDuration(took).c_str(),
              absl::FormatDuration(baseline).c_str());
  EXPECT_LT(took, absl::Seconds(1) + 10 * baseline);
}

TEST(OperationsTest, AnExportedCacheIsImportedAtStartAndAForeignOneSkipped) {
  TempDir dir;
  const std::string import_dir = dir.path() + "/import";
  ASSERT_EQ(mkdir(import_dir.c_str(), 0755), 0);
  {
    Kerneld source(dir.path(), {});
    ASSERT_TRUE(source.WaitServing());
    auto tune = source.Tune({"nt:128x256x256"});
    ASSERT_EQ(tune->Wait(2 * kHangTimeout), 0) << source.Log();
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
  EXPECT_EQ(refused.process().Wait(kHangTimeout), 1);
  EXPECT_TRUE(absl::StrContains(refused.Log(), "torn.cache")) << refused.Log();
}

TEST(OperationsTest, LogsHaveLevelsSessionLinesAndRefusalsAtDebug) {
  TempDir dir;
  Kerneld kerneld(dir.path(), {"--log_level=debug"});
  ASSERT_TRUE(kerneld.WaitServing());
  Subprocess malformed({KD_MALFORMED_CLIENT_PATH, "--socket=" + kerneld.data(), "--rounds=1"});
  EXPECT_EQ(malformed.Wait(2 * kHangTimeout), 0);
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
  EXPECT_EQ(again.Wait(2 * kHangTimeout), 0);
  EXPECT_EQ(quiet.Stop(SIGTERM, &took), 0);
  EXPECT_FALSE(absl::StrContains(quiet.Log(), " debug: ")) << quiet.Log();
  EXPECT_TRUE(absl::StrContains(quiet.Log(), " info: session ")) << quiet.Log();
}

}  // namespace
}  // namespace testing
}  // namespace kd
