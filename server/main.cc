// kerneld: the per-node FP8 kernel daemon. See README.md for how to run it.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "server/build_info.h"
#include "server/daemon.h"
#include "server/log.h"
#include "server/service_notify.h"

ABSL_FLAG(std::string, socket, "/run/kerneld/kerneld.sock",
          "Unix socket of the data plane (mode 0660), the one trainer processes connect to.");
ABSL_FLAG(std::string, socket_group, "", "Group that owns the data socket (empty: unchanged).");
ABSL_FLAG(std::string, admin_socket, "/run/kerneld/admin.sock",
          "Unix socket of the admin plane (mode 0600), the one kctl connects to.");
ABSL_FLAG(std::string, tcp_address, "",
          "Also serve the data plane on this TCP address (opt-in, insecure, e.g. 127.0.0.1:7070).");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9464",
          "host:port of the Prometheus /metrics endpoint; port 0 picks a free one; empty: off.");
ABSL_FLAG(std::string, backend, "auto",
          "Default backend: auto (a GPU when one is found, else cpu), cpu, cuda, hip.");
ABSL_FLAG(int, cpu_threads, 0, "Threads of the CPU backend (0: one per core).");
ABSL_FLAG(uint64_t, device_pool_cap_bytes, 0, "Cap of each GPU's memory pool (0: no cap).");
ABSL_FLAG(uint32_t, max_sessions, 1024, "Most sessions open at once.");
ABSL_FLAG(uint32_t, max_buffers_per_session, 4096, "Most buffers one session may hold.");
ABSL_FLAG(uint64_t, max_session_bytes, uint64_t{64} << 30,
          "Most bytes one session may allocate from the daemon's pools.");
ABSL_FLAG(uint32_t, max_lease_seconds, 3600, "Cap on the lease a session may ask for.");
ABSL_FLAG(uint32_t, max_batch_ops, 256, "Most ops in one Submit.");
ABSL_FLAG(bool, inline_async, true,
          "Launch an ASYNC request that finds its device queue idle on the RPC's own thread "
          "(no hand-off to the queue's thread).");
ABSL_FLAG(bool, submit_rings, true,
          "Let sessions attach a shared-memory submit ring (AttachSubmitRing): op calls without "
          "a gRPC round trip, one serving thread per ring.");
ABSL_FLAG(uint32_t, ring_spin_us, 50,
          "How long a submit ring's thread polls after a request before it sleeps on the "
          "doorbell (a futex); 0: sleep at once.");
ABSL_FLAG(int, max_message_bytes, 4 << 20, "Largest request message accepted.");
ABSL_FLAG(std::string, autotune_cache_dir, "",
          "Directory of the autotune cache files, loaded at start and saved after every change "
          "(e.g. /var/lib/kerneld); empty: caches in memory only.");
ABSL_FLAG(bool, autotune_background, false,
          "Tune cache misses in the background (requests keep running the default meanwhile).");
ABSL_FLAG(std::string, autotune_import, "",
          "At start, import this cache file (from `kctl cache export`) or every *.cache file of "
          "this directory into the cache whose validators (device, driver, runtime, kerneld "
          "version) it matches; files of other GPU models are skipped. Empty: none.");
ABSL_FLAG(absl::Duration, autotune_lock_timeout, absl::Seconds(10),
          "How long loading or saving an autotune cache file waits for its lock file; at start, "
          "not getting it is an error (another process holds it).");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM or SIGINT: how long requests already admitted may take to finish before "
          "they are cancelled. Tunes are cancelled at once; an idle daemon exits at once. A second "
          "signal exits immediately.");
ABSL_FLAG(std::string, log_level, "info",
          "Least severe log lines written to stderr: debug (adds one line per refused request), "
          "info (start, stop, sessions opened and closed, tunes), warning, error.");

namespace {

// `kerneld --help` lists the daemon's own flags: Abseil's default shows only the flags of a file
// named after the program (kerneld.cc), and kerneld's are in server/main.cc.
bool IsKerneldFlagFile(absl::string_view path) { return absl::StrContains(path, "server/"); }

}  // namespace

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_helpshort_flags = IsKerneldFlagFile;
  usage.contains_help_flags = IsKerneldFlagFile;
  usage.version_string = [] { return kd::VersionText(); };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "serves FP8 quantize, gemm and pad kernels to trainer processes over gRPC on a Unix "
      "socket.\nUsage: kerneld [--flag=value]...   (--helpfull also lists the libraries' flags)");
  absl::ParseCommandLine(argc, argv);
  kd::LogLevel level;
  if (!kd::ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    std::fprintf(stderr, "kerneld: --log_level=%s must be one of debug, info, warning, error\n",
                 absl::GetFlag(FLAGS_log_level).c_str());
    return 2;
  }
  kd::SetLogLevel(level);
  const absl::Duration grace = absl::GetFlag(FLAGS_shutdown_grace);
  if (grace < absl::ZeroDuration()) {
    std::fprintf(stderr, "kerneld: --shutdown_grace must be >= 0\n");
    return 2;
  }

  // Block the stop signals before any thread starts, so that only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  kd::DaemonOptions options;
  options.data_socket = absl::GetFlag(FLAGS_socket);
  options.socket_group = absl::GetFlag(FLAGS_socket_group);
  options.admin_socket = absl::GetFlag(FLAGS_admin_socket);
  options.tcp_address = absl::GetFlag(FLAGS_tcp_address);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.backends.preferred = absl::GetFlag(FLAGS_backend);
  options.backends.cpu_threads = absl::GetFlag(FLAGS_cpu_threads);
  options.backends.device_pool_cap_bytes = absl::GetFlag(FLAGS_device_pool_cap_bytes);
  options.limits.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  options.limits.max_buffers_per_session = absl::GetFlag(FLAGS_max_buffers_per_session);
  options.limits.max_allocated_bytes_per_session = absl::GetFlag(FLAGS_max_session_bytes);
  options.limits.max_lease_seconds = absl::GetFlag(FLAGS_max_lease_seconds);
  options.max_batch_ops = absl::GetFlag(FLAGS_max_batch_ops);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.inline_async = absl::GetFlag(FLAGS_inline_async);
  options.submit_rings = absl::GetFlag(FLAGS_submit_rings);
  options.ring_spin = absl::Microseconds(absl::GetFlag(FLAGS_ring_spin_us));
  options.autotune.cache_dir = absl::GetFlag(FLAGS_autotune_cache_dir);
  options.autotune.background = absl::GetFlag(FLAGS_autotune_background);
  options.autotune.import_path = absl::GetFlag(FLAGS_autotune_import);
  options.autotune.lock_timeout = absl::GetFlag(FLAGS_autotune_lock_timeout);

  kd::Log("kerneld %s (commit %s, cuda backend %s, hip backend %s) starting", kd::KerneldVersion(),
          kd::BuildCommit(), kd::BuiltWithCuda() ? "built in" : "not built",
          kd::BuiltWithHip() ? "built in" : "not built");
  kd::Daemon daemon(options);
  if (absl::Status s = daemon.Start(); !s.ok()) {
    kd::LogAt(kd::LogLevel::kError, "cannot start: %s", s.ToString().c_str());
    return 1;
  }
  // Ready: both sockets are bound and serving (systemd's Type=notify).
  if (absl::Status s = kd::NotifyServiceManager("READY=1\nSTATUS=serving"); !s.ok()) {
    kd::LogAt(kd::LogLevel::kWarning, "cannot notify the service manager: %s",
              s.ToString().c_str());
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  kd::Log("signal %d (%s): draining, grace %s", sig, strsignal(sig),
          absl::FormatDuration(grace).c_str());
  kd::NotifyServiceManager("STOPPING=1\nSTATUS=draining").IgnoreError();
  // A second stop signal means "now": an operator who cannot wait out the grace.
  std::thread([stop_signals] {
    int again = 0;
    sigwait(&stop_signals, &again);
    kd::LogAt(kd::LogLevel::kWarning, "signal %d again: exiting without draining", again);
    _exit(1);
  }).detach();
  daemon.Shutdown(grace);
  kd::Log("stopped");
  return 0;
}
