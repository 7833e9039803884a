// End to end: the real kerneld binary on temporary sockets, real client processes, kctl, and a
// real HTTP scrape of /metrics.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <regex>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kerneld/client/client.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_daemon.h"
#include "tests/support/wait.h"

namespace kd {
namespace testing {
namespace {

// One number from kctl's JSON: "key":123.
int64_t JsonInt(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":\\s*(-?[0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

std::string JsonString(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":\\s*\"([^\"]*)\""))) return "";
  return m[1];
}

// The sum of every sample of `name` whose labels contain all of `labels` (`k="v"` strings).
double SumSamples(const std::string& exposition, const std::string& name,
                  const std::vector<std::string>& labels) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, name + "{") && !absl::StartsWith(line, name + " ")) continue;
    bool all = true;
    for (const auto& l : labels) all = all && line.find(l) != absl::string_view::npos;
    if (!all) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

int64_t RssKiB(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      int64_t kib = 0;
      absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 9)), &kib);
      return kib;
    }
  }
  return -1;
}

// Mappings of the daemon's pool memory (memfds labelled "kerneld-pool") in its address space.
int PoolMappings(pid_t pid) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    n += line.find("/memfd:kerneld-pool") != std::string::npos;
  }
  return n;
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.path() + "/kerneld.sock";
    admin_ = dir_.path() + "/admin.sock";
    daemon_ = std::make_unique<Subprocess>(std::vector<std::string>{
        KD_KERNELD_PATH, "--socket=" + data_, "--admin_socket=" + admin_,
        "--metrics_address=127.0.0.1:0", "--backend=cpu", "--cpu_threads=2"});
    WaitFor(
        [&] {
          metrics_ = JsonString(Status(), "metrics_address");
          return !metrics_.empty();
        },
        kHangTimeout, absl::Milliseconds(50));
    ASSERT_FALSE(metrics_.empty()) << "the daemon did not come up";
  }

  void TearDown() override {
    daemon_->Kill(SIGTERM);
    EXPECT_EQ(daemon_->Wait(kHangTimeout), 0) << "kerneld did not exit cleanly on SIGTERM";
  }

  // `kctl status --json`, or "" when it failed.
  std::string Status() {
    int code = 0;
    std::string out =
        RunCommand({KD_KCTL_PATH, "--admin_socket=" + admin_, "status", "--json"}, &code);
    return code == 0 ? out : "";
  }

  // Polls kctl until sessions and buffers reach the given counts; false when kHangTimeout passed
  // first.
  bool WaitForCounts(int64_t sessions, int64_t buffers) {
    return WaitFor(
        [&] {
          const std::string json = Status();
          // An ended session leaves the table just before its memory is released: with nothing
          // left, wait for the memory too.
          const bool memory_settled = sessions != 0 || buffers != 0 ||
                                      (JsonInt(json, "memory_used_bytes") == 0 &&
                                       JsonInt(json, "memory_imported_bytes") == 0);
          return JsonInt(json, "sessions_active") == sessions &&
                 JsonInt(json, "buffers_registered") == buffers && memory_settled;
        },
        kHangTimeout, absl::Milliseconds(50));
  }

  std::unique_ptr<Subprocess> Pipeline(int64_t m, int64_t n, int64_t k, int groups, int iterations,
                                       int seed, bool ring = false) {
    return std::make_unique<Subprocess>(std::vector<std::string>{
        KD_PIPELINE_CLIENT_PATH, "--socket=" + data_, absl::StrCat("--m=", m),
        absl::StrCat("--n=", n), absl::StrCat("--k=", k), absl::StrCat("--groups=", groups),
        absl::StrCat("--iterations=", iterations), absl::StrCat("--seed=", seed),
        absl::StrCat("--ring=", ring)});
  }

  TempDir dir_;
  std::string data_, admin_, metrics_;
  std::unique_ptr<Subprocess> daemon_;
};

TEST_F(DaemonTest, SocketsHaveTheirModes) {
  struct stat st;
  ASSERT_EQ(stat(data_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  ASSERT_EQ(stat(admin_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(DaemonTest, FourPipelinesAndAMalformedClientAtOnce) {
  // Warm up (thread pools, gRPC, allocator) before taking the memory baseline.
  ASSERT_EQ(Pipeline(128, 128, 256, 2, 2, 99)->Wait(absl::Seconds(120)), 0);
  ASSERT_TRUE(WaitForCounts(0, 0));
  const int64_t baseline_kib = RssKiB(daemon_->pid());

  std::vector<std::unique_ptr<Subprocess>> clients;
  clients.push_back(Pipeline(256, 256, 512, 4, 3, 1));
  clients.push_back(Pipeline(130, 384, 256, 3, 3, 2));  // M, N not multiples of 128
  clients.push_back(Pipeline(64, 200, 1024, 1, 3, 3));
  clients.push_back(Pipeline(512, 128, 384, 8, 3, 4));
  auto malformed = std::make_unique<Subprocess>(
      std::vector<std::string>{KD_MALFORMED_CLIENT_PATH, "--socket=" + data_, "--rounds=30"});
  for (size_t i = 0; i < clients.size(); ++i) {
    EXPECT_EQ(clients[i]->Wait(absl::Seconds(300)), 0) << "pipeline client " << i;
  }
  EXPECT_EQ(malformed->Wait(absl::Seconds(300)), 0) << malformed->Output();

  // Every session is gone (the malformed client abandoned some: its exit closed them) and the
  // daemon holds no memory for anyone.
  EXPECT_TRUE(WaitForCounts(0, 0));
  const std::string json = Status();
  EXPECT_EQ(JsonInt(json, "memory_used_bytes"), 0);
  EXPECT_EQ(JsonInt(json, "memory_imported_bytes"), 0);
  EXPECT_EQ(PoolMappings(daemon_->pid()), 0);
  // Freed heap is not always returned to the kernel; allow allocator slack, not a leak per op.
  const int64_t limit_kib = baseline_kib + 64 * 1024;
  WaitFor([&] { return RssKiB(daemon_->pid()) < limit_kib; });
  EXPECT_LT(RssKiB(daemon_->pid()), limit_kib) << "baseline " << baseline_kib << " KiB";
  EXPECT_GT(JsonInt(json, "ops_completed"), 0);
}

// The session has no lease: only the daemon's noticing its client's death can end it.
TEST_F(DaemonTest, SigkilledClientIsReleased) {
  Subprocess holder({KD_PIPELINE_CLIENT_PATH, "--socket=" + data_, "--hold"});
  const std::string ready = holder.ReadLine(kHangTimeout);
  ASSERT_TRUE(absl::StartsWith(ready, "READY ")) << ready;
  std::string json = Status();
  EXPECT_EQ(JsonInt(json, "sessions_active"), 1);
  EXPECT_EQ(JsonInt(json, "buffers_registered"), 4);
  EXPECT_EQ(JsonInt(json, "lease_seconds"), 0);
  EXPECT_EQ(PoolMappings(daemon_->pid()), 1);

  holder.Kill(SIGKILL);
  EXPECT_EQ(holder.Wait(kHangTimeout), 128 + SIGKILL);
  EXPECT_TRUE(WaitForCounts(0, 0)) << "buffers of a SIGKILLed client were not released";
  json = Status();
  EXPECT_EQ(JsonInt(json, "memory_used_bytes"), 0);
  EXPECT_EQ(JsonInt(json, "memory_imported_bytes"), 0);
  EXPECT_EQ(PoolMappings(daemon_->pid()), 0);

  // The gauges follow at the reaper's next round.
  std::string metrics;
  WaitFor([&] {
    metrics = HttpGet(metrics_, "/metrics");
    return metrics.find("kerneld_build_info") != std::string::npos &&
           MetricValue(metrics, "kerneld_buffers_registered") == 0 &&
           MetricValue(metrics, "kerneld_sessions_active") == 0;
  });
  EXPECT_EQ(MetricValue(metrics, "kerneld_sessions_active"), 0);
  EXPECT_EQ(MetricValue(metrics, "kerneld_buffers_registered"), 0);
  EXPECT_EQ(MetricValue(metrics, "kerneld_device_memory_bytes{device=\"cpu:0\",state=\"used\"}"),
            0);
  EXPECT_EQ(
      MetricValue(metrics, "kerneld_device_memory_bytes{device=\"cpu:0\",state=\"imported\"}"), 0);
}

TEST_F(DaemonTest, MetricsCountRealRpcs) {
  const std::string before = HttpGet(metrics_, "/metrics");
  ASSERT_NE(before.find("kerneld_build_info"), std::string::npos);
  // Iteration 0 makes single-op RPCs, iteration 1 one Submit of the same four ops.
  ASSERT_EQ(Pipeline(128, 256, 256, 2, 2, 7)->Wait(absl::Seconds(120)), 0);
  // One refused request.
  {
    auto client = client::Client::Connect(data_);
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->OpenSession("bad").ok());
    v1::QuantizeOp op;
    EXPECT_EQ((*client)->Quantize(op).status().code(), absl::StatusCode::kInvalidArgument);
  }
  const std::string after = HttpGet(metrics_, "/metrics");
  auto delta = [&](const std::string& name, const std::vector<std::string>& labels) {
    return SumSamples(after, name, labels) - SumSamples(before, name, labels);
  };
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"Quantize\"", "code=\"OK\""}), 2);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"Gemm\"", "code=\"OK\""}), 1);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"Pad\"", "code=\"OK\""}), 1);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"Submit\"", "code=\"OK\""}), 1);
  // Host memory travels as descriptors over the fd socket, counted as "fd.<Call>".
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"fd.RegisterBuffer\"", "code=\"OK\""}),
            10);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"RegisterBuffer\""}), 0);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"OpenSession\"", "code=\"OK\""}), 2);
  EXPECT_EQ(
      delta("kerneld_rpc_requests_total", {"method=\"Quantize\"", "code=\"INVALID_ARGUMENT\""}), 1);
  EXPECT_EQ(delta("kerneld_rpc_duration_seconds_count", {"method=\"Quantize\""}), 3);
  // Kernel histograms: two quantizes, one gemm, one pad per iteration.
  EXPECT_EQ(delta("kerneld_kernel_duration_seconds_count", {"op=\"quantize\"", "device=\"cpu:0\""}),
            4);
  EXPECT_EQ(delta("kerneld_kernel_duration_seconds_count",
                  {"op=\"quantize\"", "variant=\"1x128\"", "dtype=\"bf16>e4m3fn\""}),
            2);
  EXPECT_EQ(delta("kerneld_kernel_duration_seconds_count", {"op=\"gemm\"", "variant=\"nt\""}), 2);
  EXPECT_EQ(delta("kerneld_kernel_duration_seconds_count", {"op=\"pad\"", "variant=\"a32\""}), 2);
  EXPECT_GT(delta("kerneld_kernel_duration_seconds_sum", {"op=\"gemm\""}), 0);
  // The five requests that ran (four single ops, one Submit; all SYNC) passed every phase; the
  // refused one none.
  for (const char* phase : {"admit", "queue", "launch", "complete"}) {
    const std::string label = absl::StrCat("phase=\"", phase, "\"");
    EXPECT_EQ(delta("kerneld_request_phase_seconds_count", {label}), 5) << phase;
  }
  EXPECT_GT(delta("kerneld_request_phase_seconds_sum", {"phase=\"complete\""}), 0);
}

TEST_F(DaemonTest, PipelinesThroughSubmitRingsAreCorrectAndCountedAsRingCalls) {
  const std::string before = HttpGet(metrics_, "/metrics");
  // Two processes at once, each checking every result against its own reference.
  auto a = Pipeline(128, 256, 256, 2, 2, 11, /*ring=*/true);
  auto b = Pipeline(130, 200, 384, 3, 2, 12, /*ring=*/true);
  EXPECT_EQ(a->Wait(absl::Seconds(120)), 0) << a->Output();
  EXPECT_EQ(b->Wait(absl::Seconds(120)), 0) << b->Output();
  const std::string after = HttpGet(metrics_, "/metrics");
  auto delta = [&](const std::string& name, const std::vector<std::string>& labels) {
    return SumSamples(after, name, labels) - SumSamples(before, name, labels);
  };
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"ring.Quantize\"", "code=\"OK\""}), 4);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"ring.Gemm\"", "code=\"OK\""}), 2);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"ring.Submit\"", "code=\"OK\""}), 2);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"fd.AttachSubmitRing\"", "code=\"OK\""}),
            2);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"Quantize\""}), 0);
  EXPECT_EQ(delta("kerneld_rpc_requests_total", {"method=\"Submit\""}), 0);
  EXPECT_TRUE(WaitForCounts(0, 0));
}

TEST_F(DaemonTest, SigkilledRingClientIsReleasedAndOthersKeepServing) {
  Subprocess holder({KD_PIPELINE_CLIENT_PATH, "--socket=" + data_, "--hold", "--ring"});
  const std::string ready = holder.ReadLine(kHangTimeout);
  ASSERT_TRUE(absl::StartsWith(ready, "READY ")) << ready;
  const std::string json = Status();
  EXPECT_EQ(JsonInt(json, "sessions_active"), 1);
  EXPECT_NE(json.find("\"submit_ring\": true"), std::string::npos) << json;

  holder.Kill(SIGKILL);
  EXPECT_EQ(holder.Wait(kHangTimeout), 128 + SIGKILL);
  EXPECT_TRUE(WaitForCounts(0, 0)) << "the session of a SIGKILLed ring client was not released";
  EXPECT_EQ(PoolMappings(daemon_->pid()), 0);
  // The daemon serves the next ring client.
  EXPECT_EQ(Pipeline(128, 128, 256, 2, 1, 13, /*ring=*/true)->Wait(absl::Seconds(120)), 0);
}

TEST_F(DaemonTest, KctlStatusShowsTheDaemon) {
  auto client = client::Client::Connect(data_);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->OpenSession("status-check").ok());
  int code = 0;
  const std::string table = RunCommand({KD_KCTL_PATH, "--admin_socket=" + admin_, "status"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(table.find("kerneld 0.1.0"), std::string::npos) << table;
  EXPECT_NE(table.find("cpu:0"), std::string::npos) << table;
  EXPECT_NE(table.find("status-check"), std::string::npos) << table;
  // kctl pointed at the data socket is refused.
  RunCommand({KD_KCTL_PATH, "--admin_socket=" + data_, "status"}, &code);
  EXPECT_NE(code, 0);
}

}  // namespace
}  // namespace testing
}  // namespace kd
