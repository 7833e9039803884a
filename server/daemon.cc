#include "server/daemon.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "kerneld/kernels/status_macros.h"
#include "server/connection_acceptor.h"
#include "server/log.h"
#include "server/services.h"
#include "server/unique_fd.h"
#include "server/unix_socket.h"

#ifndef KD_VERSION
#define KD_VERSION "0.0.0"
#endif

namespace kd {

const char* KerneldVersion() { return KD_VERSION; }

std::string FdSocketPath(const std::string& data_socket) { return data_socket + ".fd"; }

namespace {

// Says clearly when the metrics port is taken (the HTTP server's own error does not), before
// anything else is set up: a second daemon with the same --metrics_address stops here.
absl::Status CheckMetricsAddressFree(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::OkStatus();  // the HTTP server reports the form
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (port == "0") return absl::OkStatus();
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0) {
    return absl::OkStatus();  // not resolvable here: the HTTP server reports it
  }
  absl::Status status;
  for (addrinfo* ai = found; ai != nullptr && status.ok(); ai = ai->ai_next) {
    UniqueFd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) continue;
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as the HTTP server does
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno == EADDRINUSE) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "metrics_address=", address,
          ": address already in use (another kerneld or another program listens there); "
          "give this daemon another --metrics_address, or an empty one for no metrics"));
    }
  }
  freeaddrinfo(found);
  return status;
}

// Pool objects that a daemon of an earlier version left in /dev/shm when it died
// ("kerneld.<pid>.<16 hex>.<n>"; pools are memfds now and leave none): removed when the pid is
// not a running process and this user owns the object.
void SweepDeadPoolObjects() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  int removed = 0;
  for (dirent* e; (e = readdir(dir)) != nullptr;) {
    std::vector<absl::string_view> parts = absl::StrSplit(e->d_name, '.');
    int pid = 0;
    uint64_t id = 0;
    if (parts.size() != 4 || parts[0] != "kerneld" || !absl::SimpleAtoi(parts[1], &pid) ||
        pid <= 0 || parts[2].size() != 16 ||
        parts[2].find_first_not_of("0123456789abcdef") != absl::string_view::npos ||
        !absl::SimpleAtoi(parts[3], &id)) {
      continue;
    }
    struct stat st;
    if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid()) {
      continue;
    }
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // its daemon may still run
    if (unlinkat(dirfd(dir), e->d_name, 0) == 0) ++removed;
  }
  closedir(dir);
  if (removed > 0) Log("removed %d pool objects of dead daemons from /dev/shm", removed);
}

// A gRPC server for connections the acceptor hands it (and a TCP port, when given).
absl::StatusOr<std::unique_ptr<grpc::Server>> BuildServer(
    const std::string& tcp_address, int max_message_bytes,
    const std::vector<grpc::Service*>& services) {
  grpc::ServerBuilder builder;
  if (!tcp_address.empty())
    builder.AddListeningPort(tcp_address, grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return absl::UnavailableError(tcp_address.empty()
                                      ? std::string("cannot start a gRPC server")
                                      : absl::StrCat("cannot listen on ", tcp_address));
  }
  return server;
}

}  // namespace

Daemon::Daemon(DaemonOptions options) : options_(std::move(options)) {}

Daemon::~Daemon() { Shutdown(absl::Seconds(1)); }

absl::Status Daemon::Start() {
  started_ = absl::Now();
  // First the locks: while another daemon holds them, nothing else is touched.
  KD_ASSIGN_OR_RETURN(data_lock_, PathLock::Acquire(options_.data_socket));
  KD_ASSIGN_OR_RETURN(admin_lock_, PathLock::Acquire(options_.admin_socket));
  if (!options_.metrics_address.empty())
    KD_RETURN_IF_ERROR(CheckMetricsAddressFree(options_.metrics_address));
  KD_ASSIGN_OR_RETURN(backends_, BackendRegistry::Create(options_.backends));
  for (const std::string& why : backends_->Unavailable()) Log("%s", why.c_str());
  std::vector<std::string> names;
  for (Backend* b : backends_->All()) names.push_back(std::string(b->name()));
  metrics_ = std::make_unique<Metrics>(KerneldVersion(), absl::StrJoin(names, ","));
  if (!options_.metrics_address.empty())
    KD_RETURN_IF_ERROR(metrics_->Serve(options_.metrics_address));
  SweepDeadPoolObjects();
  sessions_ = std::make_unique<SessionManager>(options_.limits);
  autotune_ = std::make_unique<AutotuneManager>(backends_.get(), metrics_.get(), options_.autotune);
  KD_RETURN_IF_ERROR(autotune_->Start());
  executor_ = std::make_unique<Executor>(
      backends_.get(), metrics_.get(),
      [tuning = autotune_.get()](Backend* b, int device, ValidatedOp& op) {
        tuning->Configure(b, device, op);
      },
      options_.inline_async);
  KD_RETURN_IF_ERROR(executor_->Start());

  DataPlane data_plane = MakeDataPlane(this);
  data_service_ = std::move(data_plane.service);
  admin_service_ = MakeAdminService(this, /*trusted=*/true);
  denied_admin_service_ = MakeAdminService(this, /*trusted=*/false);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  KD_ASSIGN_OR_RETURN(data_server_,
                      BuildServer(options_.tcp_address, options_.max_message_bytes,
                                  {data_service_.get(), denied_admin_service_.get()}));
  KD_ASSIGN_OR_RETURN(admin_server_,
                      BuildServer("", options_.max_message_bytes, {admin_service_.get()}));
  KD_RETURN_IF_ERROR(BindSockets());
  acceptor_ = std::make_unique<ConnectionAcceptor>(&peers_);
  acceptor_->AddGrpcListener(data_listener_->fd(), data_server_.get());
  acceptor_->AddGrpcListener(admin_listener_->fd(), admin_server_.get());
  // Each session's process needs one fd-socket connection; the rest is slack for reconnects.
  acceptor_->AddFdListener(fd_listener_->fd(), std::move(data_plane.fd_handler),
                           size_t{2} * options_.limits.max_sessions + 64);
  KD_RETURN_IF_ERROR(acceptor_->Start());
  data_server_->GetHealthCheckService()->SetServingStatus(true);
  admin_server_->GetHealthCheckService()->SetServingStatus(true);
  reaper_ = std::thread([this] { ReapLoop(); });
  Log("kerneld %s serving: data unix:%s%s (descriptors on %s), admin unix:%s, metrics %s, "
      "backends %s",
      KerneldVersion(), options_.data_socket.c_str(),
      options_.tcp_address.empty() ? "" : absl::StrCat(" and ", options_.tcp_address).c_str(),
      fd_listener_->path().c_str(), options_.admin_socket.c_str(),
      metrics_->address().empty() ? "(off)"
                                  : ("http://" + metrics_->address() + "/metrics").c_str(),
      absl::StrJoin(names, ",").c_str());
  return absl::OkStatus();
}

absl::Status Daemon::BindSockets() {
  KD_ASSIGN_OR_RETURN(data_listener_, UnixListener::Bind(options_.data_socket, SOCK_STREAM, 0660,
                                                         options_.socket_group));
  KD_ASSIGN_OR_RETURN(fd_listener_,
                      UnixListener::Bind(FdSocketPath(options_.data_socket), SOCK_SEQPACKET, 0660,
                                         options_.socket_group));
  KD_ASSIGN_OR_RETURN(admin_listener_,
                      UnixListener::Bind(options_.admin_socket, SOCK_STREAM, 0600, ""));
  return absl::OkStatus();
}

void Daemon::Drain() {
  if (draining_.exchange(true)) return;
  Log("draining: new data-plane work is refused");
  if (data_server_) data_server_->GetHealthCheckService()->SetServingStatus(false);
}

void Daemon::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Time start = absl::Now();
  const bool serving = data_server_ != nullptr;
  if (serving) Drain();
  draining_ = true;
  // No new connections, and the fd socket's connections close.
  if (acceptor_) acceptor_->Stop();
  // Tuning is cancelled, not waited for: a tune can take minutes, and what it measured is
  // redone on the next `kctl tune` or miss.
  if (autotune_) autotune_->Stop();
  // A session's OpenSession stream lasts as long as the session: end every session first, so
  // that what the servers wait for below is only the calls already admitted (unary ops, ring
  // requests), and an idle daemon stops at once instead of after the whole grace. Before the
  // executor goes: a session's submit ring thread submits to it.
  if (sessions_) sessions_->CloseAll("daemon shutting down");
  const auto deadline = absl::ToChronoTime(start + grace);
  if (data_server_) data_server_->Shutdown(deadline);
  if (admin_server_) admin_server_->Shutdown(deadline);
  if (reaper_.joinable()) {
    stop_reaper_.Notify();
    reaper_.join();
  }
  data_server_.reset();
  admin_server_.reset();
  executor_.reset();  // finishes what was queued
  autotune_.reset();  // after the executor, whose hook it is
  sessions_.reset();  // releases every buffer
  // Only the socket files this daemon bound, and only then its locks.
  acceptor_.reset();
  data_listener_.reset();
  fd_listener_.reset();
  admin_listener_.reset();
  data_lock_.reset();
  admin_lock_.reset();
  if (serving) {
    Log("drained in %.3f s (grace %s)", absl::ToDoubleSeconds(absl::Now() - start),
        absl::FormatDuration(grace).c_str());
  }
}

void Daemon::ReapLoop() {
  while (!stop_reaper_.WaitForNotificationWithTimeout(options_.reap_interval)) {
    sessions_->ReapExpired();
    executor_->RetainSessions([this](const std::string& id) { return sessions_->IsOpen(id); });
    UpdateGauges();
  }
}

void Daemon::UpdateGauges() {
  const ManagerStats st = sessions_->Stats();
  metrics_->SetSessionsActive(st.sessions);
  metrics_->SetBuffersRegistered(st.buffers);
  metrics_->SetIpcHandlesOpen(st.imported_mappings);
  for (Backend* b : backends_->All()) {
    for (int d = 0; d < b->DeviceCount(); ++d) {
      const std::string device = absl::StrCat(b->name(), ":", d);
      const MemoryStats m = b->Memory(d);
      metrics_->SetDeviceMemory(device, "used", m.used);
      metrics_->SetDeviceMemory(device, "pooled", m.pooled);
      metrics_->SetDeviceMemory(device, "imported", m.imported);
    }
  }
}

}  // namespace kd
