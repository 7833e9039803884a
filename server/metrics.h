// Prometheus metrics of the daemon. Families are built once at start; the request path only
// increments. Labels are bounded: op, variant, dtype, device, shape class, RPC method and code,
// never ids. Each label set's series is looked up in the family once and then cached here:
// prometheus-cpp's Family::Add builds a whole metric (a histogram's buckets) on every call even
// when the series exists, which is too slow for a path that runs per op.
#ifndef KERNELD_SERVER_METRICS_H_
#define KERNELD_SERVER_METRICS_H_

#include <array>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kd {

// Where a data-plane request's time goes inside the daemon (kerneld_request_phase_seconds).
enum class RequestPhase {
  kAdmit,     // request received -> its ops bound, validated and handed to the executor
  kQueue,     // handed to the executor -> its batch starts (waiting behind other batches)
  kLaunch,    // batch start -> every op enqueued (stream waits, launches, timing and signal events)
  kComplete,  // SYNC only: every op enqueued -> the device finished them and their times arrived
};
inline constexpr int kRequestPhases = 4;

// Bucket bounds first, 2*first, 4*first... while below `below`. NOTE: prometheus-cpp prints le
// with 16 significant digits, and for some decimals even the nearest double prints with noise
// (8e-05 as "8.000000000000001e-05", so 1e-5 * 2^n does). The series 1e-6 * 2^n and
// 1e-3 * 2^n print clean ("8e-06", "16.777216"): the daemon's histograms take their bounds from
// them, and metrics_test checks the exposition.
prometheus::Histogram::BucketBoundaries DoublingBuckets(double first, double below);

class Metrics {
 public:
  // Builds every family. `build_labels` go on kerneld_build_info.
  Metrics(const std::string& version, const std::string& backends);

  // Starts the HTTP exposer on "host:port" (port 0 picks a free one), serving the registry and
  // the process_* metrics (server/process_metrics.h). Thread-compatible: call once.
  absl::Status Serve(const std::string& address);
  // "host:port" actually listened on, once Serve succeeded.
  std::string address() const { return address_; }

  void ObserveKernel(absl::string_view op, absl::string_view variant, absl::string_view dtype,
                     absl::string_view device, absl::string_view shape_class, double seconds) {
    KernelSeries(op, variant, dtype, device, shape_class).Observe(seconds);
  }
  // The kerneld_kernel_duration_seconds series of these labels (valid for the process's life),
  // for callers that observe later without keeping the label strings.
  prometheus::Histogram& KernelSeries(absl::string_view op, absl::string_view variant,
                                      absl::string_view dtype, absl::string_view device,
                                      absl::string_view shape_class);
  void ObserveRpc(absl::string_view method, absl::string_view code, double seconds);
  void ObservePhase(RequestPhase phase, double seconds) {
    phases_[static_cast<int>(phase)]->Observe(seconds);
  }

  prometheus::Gauge& QueueDepth(absl::string_view device);
  void SetDeviceMemory(absl::string_view device, absl::string_view state, double bytes);
  void SetSessionsActive(double n) { sessions_active_->Set(n); }
  void SetBuffersRegistered(double n) { buffers_registered_->Set(n); }
  void SetIpcHandlesOpen(double n) { ipc_handles_open_->Set(n); }

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> process_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
  prometheus::Family<prometheus::Histogram>* kernel_duration_;
  prometheus::Family<prometheus::Histogram>* rpc_duration_;
  prometheus::Family<prometheus::Counter>* rpc_requests_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Gauge>* device_memory_;
  prometheus::Gauge* sessions_active_;
  prometheus::Gauge* buffers_registered_;
  prometheus::Gauge* ipc_handles_open_;
  std::array<prometheus::Histogram*, kRequestPhases> phases_;

  // Series by their label values joined with '\x1f'. Entries are never removed: the families
  // keep every series for the process's life, and label values are bounded.
  absl::Mutex series_mu_;
  absl::flat_hash_map<std::string, prometheus::Histogram*> kernel_series_
      ABSL_GUARDED_BY(series_mu_);
  struct RpcSeries {
    prometheus::Histogram* duration;
    prometheus::Counter* requests;
  };
  absl::flat_hash_map<std::string, RpcSeries> rpc_series_ ABSL_GUARDED_BY(series_mu_);
};

}  // namespace kd

#endif  // KERNELD_SERVER_METRICS_H_
