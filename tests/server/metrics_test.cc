// Metrics' series cache: a label set maps to one series for the process's life, observations
// land in it, and other label sets get their own (read back through the registry, as the
// exposer serves them).
#include "kerneld/server/metrics.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace kd
