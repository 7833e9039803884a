#include "server/metrics.h"

#include <exception>
#include <initializer_list>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/build_info.h"
#include "server/process_metrics.h"

namespace kd {
namespace {

// 1 µs .. ~33 s, x2 per bucket: kernels span microseconds (small quantize) to seconds (CPU gemm).
prometheus::Histogram::BucketBoundaries KernelBuckets() { return DoublingBuckets(1e-6, 40.0); }

// 8 µs .. ~67 s, on the kernel buckets' bounds.
prometheus::Histogram::BucketBoundaries RpcBuckets() { return DoublingBuckets(8e-6, 70.0); }

// The label values joined with '\x1f' (which no label value holds), in a buffer of the calling
// thread: looking a series up allocates nothing once the buffer has grown.
absl::string_view JoinKey(std::initializer_list<absl::string_view> values) {
  thread_local std::string key;
  key.clear();
  bool first = true;
  for (absl::string_view v : values) {
    if (!first) key.push_back('\x1f');
    first = false;
    key.append(v.data(), v.size());
  }
  return key;
}

}  // namespace

prometheus::Histogram::BucketBoundaries DoublingBuckets(double first, double below) {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = first; v < below; v *= 2) b.push_back(v);  // doubling is exact
  return b;
}

Metrics::Metrics(const std::string& version, const std::string& backends)
    : registry_(std::make_shared<prometheus::Registry>()),
      process_(std::make_shared<ProcessCollector>()) {
  kernel_duration_ =
      &prometheus::BuildHistogram()
           .Name("kerneld_kernel_duration_seconds")
           .Help("Time of each kernel on its device, from device events or the host clock.")
           .Register(*registry_);
  rpc_duration_ = &prometheus::BuildHistogram()
                       .Name("kerneld_rpc_duration_seconds")
                       .Help("Time from receiving an RPC to finishing it, by method.")
                       .Register(*registry_);
  rpc_requests_ = &prometheus::BuildCounter()
                       .Name("kerneld_rpc_requests_total")
                       .Help("RPCs finished, by method and status code.")
                       .Register(*registry_);
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("kerneld_queue_depth")
                      .Help("Ops accepted and not yet started, by device.")
                      .Register(*registry_);
  device_memory_ =
      &prometheus::BuildGauge()
           .Name("kerneld_device_memory_bytes")
           .Help("Memory the daemon holds, by device and state (used, pooled, imported).")
           .Register(*registry_);
  sessions_active_ = &prometheus::BuildGauge()
                          .Name("kerneld_sessions_active")
                          .Help("Open client sessions.")
                          .Register(*registry_)
                          .Add({});
  buffers_registered_ = &prometheus::BuildGauge()
                             .Name("kerneld_buffers_registered")
                             .Help("Buffers held by all sessions (registered or allocated).")
                             .Register(*registry_)
                             .Add({});
  ipc_handles_open_ = &prometheus::BuildGauge()
                           .Name("kerneld_ipc_handles_open")
                           .Help("Client memory mappings open (IPC handles and shm objects).")
                           .Register(*registry_)
                           .Add({});
  auto& phases = prometheus::BuildHistogram()
                     .Name("kerneld_request_phase_seconds")
                     .Help(
                         "Where data-plane requests spend their time inside the daemon: admit "
                         "(bind and validate), queue (wait for the device queue), launch "
                         "(enqueue every op), complete (SYNC: enqueued to device done).")
                     .Register(*registry_);
  const char* const kPhaseNames[kRequestPhases] = {"admit", "queue", "launch", "complete"};
  for (int i = 0; i < kRequestPhases; ++i) {
    phases_[i] = &phases.Add({{"phase", kPhaseNames[i]}}, KernelBuckets());
  }
  prometheus::BuildGauge()
      .Name("kerneld_build_info")
      .Help("Constant 1, labelled with the version, the commit built and the backends found.")
      .Register(*registry_)
      .Add({{"version", version}, {"commit", BuildCommit()}, {"backends", backends}})
      .Set(1);
}

absl::Status Metrics::Serve(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("metrics_address=", address, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(process_);
  const auto ports = exposer_->GetListeningPorts();
  const std::string host = address.substr(0, address.rfind(':'));
  address_ = ports.empty() ? address : absl::StrCat(host, ":", ports.front());
  return absl::OkStatus();
}

prometheus::Histogram& Metrics::KernelSeries(absl::string_view op, absl::string_view variant,
                                             absl::string_view dtype, absl::string_view device,
                                             absl::string_view shape_class) {
  static const prometheus::Histogram::BucketBoundaries kKernelBuckets = KernelBuckets();
  const absl::string_view key = JoinKey({op, variant, dtype, device, shape_class});
  absl::MutexLock lock(&series_mu_);
  auto it = kernel_series_.find(key);
  if (it == kernel_series_.end()) {
    it = kernel_series_
             .emplace(std::string(key),
                      &kernel_duration_->Add({{"op", std::string(op)},
                                              {"variant", std::string(variant)},
                                              {"dtype", std::string(dtype)},
                                              {"device", std::string(device)},
                                              {"shape_class", std::string(shape_class)}},
                                             kKernelBuckets))
             .first;
  }
  return *it->second;
}

void Metrics::ObserveRpc(absl::string_view method, absl::string_view code, double seconds) {
  static const prometheus::Histogram::BucketBoundaries kRpcBuckets = RpcBuckets();
  const absl::string_view key = JoinKey({method, code});
  RpcSeries series;
  {
    absl::MutexLock lock(&series_mu_);
    auto it = rpc_series_.find(key);
    if (it == rpc_series_.end()) {
      RpcSeries added;
      added.duration = &rpc_duration_->Add({{"method", std::string(method)}}, kRpcBuckets);
      added.requests =
          &rpc_requests_->Add({{"method", std::string(method)}, {"code", std::string(code)}});
      it = rpc_series_.emplace(std::string(key), added).first;
    }
    series = it->second;
  }
  series.duration->Observe(seconds);
  series.requests->Increment();
}

prometheus::Gauge& Metrics::QueueDepth(absl::string_view device) {
  return queue_depth_->Add({{"device", std::string(device)}});
}

void Metrics::SetDeviceMemory(absl::string_view device, absl::string_view state, double bytes) {
  device_memory_->Add({{"device", std::string(device)}, {"state", std::string(state)}}).Set(bytes);
}

}  // namespace kd
