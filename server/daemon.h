// The kerneld daemon: two gRPC servers (data plane and admin, each on its own Unix socket), the
// metrics endpoint, the session manager, the executor and the reaper. main.cc only parses flags
// into DaemonOptions and waits for a signal.
#ifndef KERNELD_SERVER_DAEMON_H_
#define KERNELD_SERVER_DAEMON_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "kerneld/kernels/registry.h"
#include "server/autotune_manager.h"
#include "server/executor.h"
#include "server/metrics.h"
#include "server/peer.h"
#include "server/session_manager.h"

namespace kd {

class ConnectionAcceptor;
class PathLock;
class UnixListener;

struct DaemonOptions {
  // mode 0660; the fd socket (FdSocketPath) sits next to it with the same mode and group.
  std::string data_socket = "/run/kerneld/kerneld.sock";
  std::string socket_group;                              // group of the data socket
  std::string admin_socket = "/run/kerneld/admin.sock";  // mode 0600
  std::string tcp_address;                               // opt-in data plane on TCP
  std::string metrics_address = "127.0.0.1:9464";        // empty: no metrics endpoint
  RegistryOptions backends;
  SessionLimits limits;
  uint32_t max_batch_ops = 256;
  // An ASYNC batch arriving at an idle device queue is launched on the RPC's own thread.
  bool inline_async = true;
  // Sessions may attach a submit ring (AttachSubmitRing); its thread polls this long after a
  // request before it sleeps on the ring's doorbell.
  bool submit_rings = true;
  absl::Duration ring_spin = absl::Microseconds(50);
  int max_message_bytes = 4 << 20;
  absl::Duration reap_interval = absl::Milliseconds(200);
  AutotuneOptions autotune;
};

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();

  // Takes the sockets' locks (FAILED_PRECONDITION naming the other daemon when it holds one;
  // nothing at the socket paths is touched then), opens the metrics endpoint
  // (FAILED_PRECONDITION saying "address already in use" when its port is taken), probes the
  // backends, binds the sockets and starts serving. On failure nothing this call bound stays.
  absl::Status Start();
  // Drains (new work refused), cancels every tune, closes every session (ending their
  // OpenSession streams), then lets the calls already admitted finish for up to `grace` and
  // cancels what is left. Returns as soon as nothing is in flight: an idle daemon does not wait
  // out the grace.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

  // New data-plane ops get UNAVAILABLE and the health service says NOT_SERVING.
  void Drain();
  bool draining() const { return draining_.load(); }

  const DaemonOptions& options() const { return options_; }
  BackendRegistry& backends() { return *backends_; }
  SessionManager& sessions() { return *sessions_; }
  Executor& executor() { return *executor_; }
  Metrics& metrics() { return *metrics_; }
  AutotuneManager& autotune() { return *autotune_; }
  // The credentials of the Unix connections the daemon accepted (see ConnectionAcceptor).
  PeerTable& peers() { return peers_; }
  absl::Time started() const { return started_; }

 private:
  absl::Status BindSockets();
  void ReapLoop();
  void UpdateGauges();

  DaemonOptions options_;
  absl::Time started_;
  std::atomic<bool> draining_{false};
  std::unique_ptr<BackendRegistry> backends_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<AutotuneManager> autotune_;
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<Executor> executor_;
  PeerTable peers_;
  std::unique_ptr<PathLock> data_lock_;
  std::unique_ptr<PathLock> admin_lock_;
  std::unique_ptr<grpc::Service> data_service_;
  std::unique_ptr<grpc::Service> admin_service_;
  std::unique_ptr<grpc::Service> denied_admin_service_;
  std::unique_ptr<grpc::Server> data_server_;
  std::unique_ptr<grpc::Server> admin_server_;
  std::unique_ptr<UnixListener> data_listener_;
  std::unique_ptr<UnixListener> fd_listener_;
  std::unique_ptr<UnixListener> admin_listener_;
  std::unique_ptr<ConnectionAcceptor> acceptor_;
  absl::Notification stop_reaper_;
  std::thread reaper_;
  bool shut_down_ = false;
};

// kerneld's version string ("0.1.0").
const char* KerneldVersion();

// The fd socket of the data socket at `data_socket` (FdRequest in kerneld.proto): the same path
// with ".fd" appended.
std::string FdSocketPath(const std::string& data_socket);

}  // namespace kd

#endif  // KERNELD_SERVER_DAEMON_H_
