// The daemon's own process as Prometheus' standard process_* metrics, read from /proc/self at
// every scrape (prometheus-cpp 1.0 has no process collector): resident and virtual memory, open
// and maximum file descriptors, threads, start time and CPU time. A leak of fds, threads or
// memory across sessions shows here before it takes the node down.
#ifndef KERNELD_SERVER_PROCESS_METRICS_H_
#define KERNELD_SERVER_PROCESS_METRICS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace kd {

struct ProcessSample {
  double resident_memory_bytes = 0;
  double virtual_memory_bytes = 0;
  double open_fds = 0;
  double max_fds = 0;
  double threads = 0;
  double start_time_seconds = 0;  // Unix time
  double cpu_seconds = 0;         // user + system
};

// This process now. INTERNAL naming the /proc file that could not be read or parsed.
absl::StatusOr<ProcessSample> ReadProcessSample();

// Families process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
// process_max_fds, process_threads, process_start_time_seconds (gauges) and
// process_cpu_seconds_total (counter). Collects nothing when /proc cannot be read.
class ProcessCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace kd

#endif  // KERNELD_SERVER_PROCESS_METRICS_H_
