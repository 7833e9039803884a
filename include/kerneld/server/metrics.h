// Prometheus metrics of the daemon. Families are built once at start; the request path only
// increments. Labels are bounded: op, variant, dtype, device, shape class, RPC method and code,
// never ids.
#ifndef KERNELD_SERVER_METRICS_H_
#define KERNELD_SERVER_METRICS_H_

#include <memory>
#include <string>

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

class Metrics {
 public:
  // Builds every family. `build_labels` go on kerneld_build_info.
  Metrics(const std::string& version, const std::string& backends);

  // Starts the HTTP exposer on "host:port" (port 0 picks a free one). Thread-compatible: call once.
  absl::Status Serve(const std::string& address);
  // "host:port" actually listened on, once Serve succeeded.
  std::string address() const { return address_; }

  void ObserveKernel(absl::string_view op, absl::string_view variant, absl::string_view dtype,
                     absl::string_view device, absl::string_view shape_class, double seconds);
  void ObserveRpc(absl::string_view method, absl::string_view code, double seconds);

  prometheus::Gauge& QueueDepth(absl::string_view device);
  void SetDeviceMemory(absl::string_view device, absl::string_view state, double bytes);
  void SetSessionsActive(double n) { sessions_active_->Set(n); }
  void SetBuffersRegistered(double n) { buffers_registered_->Set(n); }
  void SetIpcHandlesOpen(double n) { ipc_handles_open_->Set(n); }

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
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
};

}  // namespace kd

#endif  // KERNELD_SERVER_METRICS_H_
