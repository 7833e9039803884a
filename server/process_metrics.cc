#include "server/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kd {
namespace {

absl::StatusOr<std::string> ReadProcFile(const char* path) {
  std::ifstream in(path);
  if (!in) return absl::InternalError(absl::StrCat("cannot read ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(m);
  return f;
}

}  // namespace

absl::StatusOr<ProcessSample> ReadProcessSample() {
  ProcessSample p;
  absl::StatusOr<std::string> stat = ReadProcFile("/proc/self/stat");
  if (!stat.ok()) return stat.status();
  // Fields after the command name, which is in parentheses and may hold spaces: the last ')'
  // ends it. proc(5) numbers them from 1 (pid) and 2 (comm), so state is field 3.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return absl::InternalError("cannot parse /proc/self/stat");
  const std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(*stat).substr(close + 2), ' ', absl::SkipEmpty());
  auto field = [&f](int n, double* out) {  // n as numbered in proc(5)
    const size_t i = static_cast<size_t>(n - 3);
    return i < f.size() && absl::SimpleAtod(f[i], out);
  };
  double utime = 0, stime = 0, threads = 0, start_ticks = 0, vsize = 0, rss_pages = 0;
  if (!field(14, &utime) || !field(15, &stime) || !field(20, &threads) ||
      !field(22, &start_ticks) || !field(23, &vsize) || !field(24, &rss_pages)) {
    return absl::InternalError("cannot parse /proc/self/stat");
  }
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  p.cpu_seconds = (utime + stime) / ticks;
  p.threads = threads;
  p.virtual_memory_bytes = vsize;
  p.resident_memory_bytes = rss_pages * static_cast<double>(sysconf(_SC_PAGESIZE));

  absl::StatusOr<std::string> proc_stat = ReadProcFile("/proc/stat");
  if (!proc_stat.ok()) return proc_stat.status();
  double boot = -1;
  for (absl::string_view line : absl::StrSplit(*proc_stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) absl::SimpleAtod(line, &boot);
  }
  if (boot < 0) return absl::InternalError("no btime in /proc/stat");
  p.start_time_seconds = boot + start_ticks / ticks;

  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return absl::InternalError("cannot read /proc/self/fd");
  int n = 0;
  while (dirent* e = readdir(fds)) n += e->d_name[0] != '.';
  closedir(fds);
  p.open_fds = n - 1;  // the directory stream's own descriptor
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) p.max_fds = static_cast<double>(limit.rlim_cur);
  return p;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  absl::StatusOr<ProcessSample> p = ReadProcessSample();
  if (!p.ok()) return {};
  using prometheus::MetricType;
  return {
      Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
             p->resident_memory_bytes),
      Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
             p->virtual_memory_bytes),
      Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
             p->open_fds),
      Family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
             p->max_fds),
      Family("process_threads", "Number of OS threads in the process.", MetricType::Gauge,
             p->threads),
      Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
             MetricType::Gauge, p->start_time_seconds),
      Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
             MetricType::Counter, p->cpu_seconds),
  };
}

}  // namespace kd
