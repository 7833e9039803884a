// Metrics' series cache: a label set maps to one series for the process's life, observations
// land in it, and other label sets get their own (read back through the registry, as the
// exposer serves them).
#include "server/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "server/process_metrics.h"

namespace kd {
namespace {

// The sample count of the histogram series of `family` whose labels include every `want`
// pair, or -1 when no series matches.
int64_t HistogramCount(const Metrics& metrics, const std::string& family,
                       const std::vector<std::pair<std::string, std::string>>& want) {
  for (const prometheus::MetricFamily& f : metrics.registry()->Collect()) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      int matched = 0;
      for (const auto& [name, value] : want) {
        for (const prometheus::ClientMetric::Label& l : m.label) {
          if (l.name == name && l.value == value) ++matched;
        }
      }
      if (matched == static_cast<int>(want.size())) {
        return static_cast<int64_t>(m.histogram.sample_count);
      }
    }
  }
  return -1;
}

double CounterValue(const Metrics& metrics, const std::string& method, const std::string& code) {
  for (const prometheus::MetricFamily& f : metrics.registry()->Collect()) {
    if (f.name != "kerneld_rpc_requests_total") continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      bool method_ok = false, code_ok = false;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        method_ok |= l.name == "method" && l.value == method;
        code_ok |= l.name == "code" && l.value == code;
      }
      if (method_ok && code_ok) return m.counter.value;
    }
  }
  return -1;
}

TEST(MetricsTest, KernelObservationsOfOneLabelSetShareASeries) {
  Metrics metrics("test", "cpu");
  for (int i = 0; i < 3; ++i)
    metrics.ObserveKernel("quantize", "1x128", "bf16", "cpu:0", "small", 1e-5);
  metrics.ObserveKernel("quantize", "128x128", "bf16", "cpu:0", "small", 1e-5);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_kernel_duration_seconds",
                           {{"op", "quantize"}, {"variant", "1x128"}, {"device", "cpu:0"}}),
            3);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_kernel_duration_seconds", {{"variant", "128x128"}}),
            1);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_kernel_duration_seconds", {{"variant", "mx1x32"}}),
            -1);
}

TEST(MetricsTest, RpcCodesCountSeparatelyAndShareTheMethodsDuration) {
  Metrics metrics("test", "cpu");
  metrics.ObserveRpc("Quantize", "OK", 1e-4);
  metrics.ObserveRpc("Quantize", "OK", 1e-4);
  metrics.ObserveRpc("Quantize", "INVALID_ARGUMENT", 1e-4);
  metrics.ObserveRpc("Gemm", "OK", 1e-4);
  EXPECT_EQ(CounterValue(metrics, "Quantize", "OK"), 2);
  EXPECT_EQ(CounterValue(metrics, "Quantize", "INVALID_ARGUMENT"), 1);
  EXPECT_EQ(CounterValue(metrics, "Gemm", "OK"), 1);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_rpc_duration_seconds", {{"method", "Quantize"}}), 3);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_rpc_duration_seconds", {{"method", "Gemm"}}), 1);
}

// Label values that would collide if they were joined without a separator stay apart.
TEST(MetricsTest, LabelValuesDoNotRunTogether) {
  Metrics metrics("test", "cpu");
  metrics.ObserveKernel("ab", "c", "d", "e", "f", 1e-5);
  metrics.ObserveKernel("a", "bc", "d", "e", "f", 1e-5);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_kernel_duration_seconds", {{"op", "ab"}}), 1);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_kernel_duration_seconds", {{"op", "a"}}), 1);
}

TEST(MetricsTest, RequestPhasesHaveOneSeriesEach) {
  Metrics metrics("test", "cpu");
  metrics.ObservePhase(RequestPhase::kAdmit, 2e-6);
  metrics.ObservePhase(RequestPhase::kLaunch, 5e-6);
  metrics.ObservePhase(RequestPhase::kLaunch, 6e-6);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_request_phase_seconds", {{"phase", "admit"}}), 1);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_request_phase_seconds", {{"phase", "queue"}}), 0);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_request_phase_seconds", {{"phase", "launch"}}), 2);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_request_phase_seconds", {{"phase", "complete"}}), 0);
}

TEST(MetricsTest, ConcurrentObserversLoseNoSamples) {
  Metrics metrics("test", "cpu");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < 500; ++i) {
        metrics.ObserveKernel("pad", t % 2 ? "a" : "b", "bf16", "cpu:0", "small", 1e-6);
        metrics.ObserveRpc("Pad", "OK", 1e-5);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(HistogramCount(metrics, "kerneld_kernel_duration_seconds", {{"variant", "a"}}), 1000);
  EXPECT_EQ(HistogramCount(metrics, "kerneld_kernel_duration_seconds", {{"variant", "b"}}), 1000);
  EXPECT_EQ(CounterValue(metrics, "Pad", "OK"), 2000);
}

TEST(MetricsTest, BucketLabelsCarryNoFloatNoise) {
  Metrics metrics("test", "cpu");
  metrics.ObserveKernel("quantize", "1x128", "bf16", "cpu:0", "small", 1e-5);
  metrics.ObserveRpc("Quantize", "OK", 1e-4);
  const std::string text = prometheus::TextSerializer().Serialize(metrics.registry()->Collect());
  std::regex le("le=\"([^\"]*)\"");
  int labels = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), le); it != std::sregex_iterator();
       ++it) {
    const std::string v = (*it)[1];
    ++labels;
    // An exact short decimal: "8e-06", "0.000512", "16.777216", "+Inf"; 16-digit noise such
    // as "8.000000000000001e-05" is not.
    int digits = 0;
    bool leading = true;
    for (const char c : v.substr(0, v.find('e'))) {
      if (c < '0' || c > '9') continue;
      if (leading && c == '0') continue;
      leading = false;
      ++digits;
    }
    EXPECT_LE(digits, 8) << "le=\"" << v << "\"";
  }
  EXPECT_GT(labels, 50);
  EXPECT_TRUE(text.find("le=\"8e-06\"") != std::string::npos) << text;
  EXPECT_TRUE(text.find("le=\"0.000512\"") != std::string::npos) << text;
}

TEST(MetricsTest, DoublingBucketsDouble) {
  const auto b = DoublingBuckets(1e-6, 1e-4);
  ASSERT_EQ(b.size(), 7u);
  EXPECT_EQ(b[0], 1e-6);
  EXPECT_EQ(b[3], 8e-6);
  EXPECT_EQ(b[6], 6.4e-5);
}

TEST(ProcessMetricsTest, SampleFollowsFdsThreadsAndMemory) {
  absl::StatusOr<ProcessSample> before = ReadProcessSample();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->resident_memory_bytes, 1 << 20);
  EXPECT_GE(before->virtual_memory_bytes, before->resident_memory_bytes);
  EXPECT_GE(before->max_fds, before->open_fds);
  EXPECT_GE(before->threads, 1);
  const double now = static_cast<double>(time(nullptr));
  EXPECT_LE(before->start_time_seconds, now + 1);
  EXPECT_GT(before->start_time_seconds, now - 3600);

  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  std::atomic<bool> stop{false};
  std::thread extra([&stop] {
    while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  // The thread is a task of this process (/proc/self/task) once its constructor has returned.
  absl::StatusOr<ProcessSample> after = ReadProcessSample();
  stop = true;
  extra.join();
  for (int fd : fds) close(fd);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->open_fds, before->open_fds + 10);
  EXPECT_EQ(after->threads, before->threads + 1);
  EXPECT_EQ(after->start_time_seconds, before->start_time_seconds);
}

TEST(ProcessMetricsTest, CollectorExportsTheStandardNames) {
  ProcessCollector collector;
  std::vector<std::string> names;
  for (const prometheus::MetricFamily& f : collector.Collect()) names.push_back(f.name);
  for (const char* want :
       {"process_resident_memory_bytes", "process_open_fds", "process_threads",
        "process_start_time_seconds", "process_cpu_seconds_total", "process_max_fds"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
}

}  // namespace
}  // namespace kd
