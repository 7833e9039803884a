#include "kerneld/server/daemon.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "kerneld/kernels/status_macros.h"
#include "server/log.h"
#include "server/services.h"

#ifndef KD_VERSION
#define KD_VERSION "0.0.0"
#endif

namespace kd {

const char* KerneldVersion() { return KD_VERSION; }

namespace {

// Creates the socket's directory if needed (0755; the socket's own mode is what guards it).
absl::Status PrepareSocketPath(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status SetSocketMode(const std::string& path, mode_t mode, const std::string& group) {
  if (!group.empty()) {
    struct group* g = getgrnam(group.c_str());
    if (g == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat("socket_group=\"", group, "\" is not a known group"));
    if (chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("chown ", path, " to group ", group, ": ", strerror(errno)));
    }
  }
  if (chmod(path.c_str(), mode) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("chmod ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// Builds and starts a server on a Unix socket created with `mode` (umask set around the bind, so
// the socket is never reachable with wider rights, then chmod to be explicit).
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& socket, mode_t mode, const std::string& group,
    const std::string& tcp_address, int max_message_bytes,
    const std::vector<grpc::Service*>& services) {
  KD_RETURN_IF_ERROR(PrepareSocketPath(socket));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", socket), grpc::InsecureServerCredentials());
  if (!tcp_address.empty())
    builder.AddListeningPort(tcp_address, grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  const mode_t old_umask = umask(0777 & ~mode);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  umask(old_umask);
  if (server == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on unix:", socket,
                     tcp_address.empty() ? "" : absl::StrCat(" and ", tcp_address)));
  }
  KD_RETURN_IF_ERROR(SetSocketMode(socket, mode, group));
  return server;
}

}  // namespace

Daemon::Daemon(DaemonOptions options) : options_(std::move(options)) {}

Daemon::~Daemon() { Shutdown(absl::Seconds(1)); }

absl::Status Daemon::Start() {
  started_ = absl::Now();
  KD_ASSIGN_OR_RETURN(backends_, BackendRegistry::Create(options_.backends));
  std::vector<std::string> names;
  for (Backend* b : backends_->All()) names.push_back(std::string(b->name()));
  metrics_ = std::make_unique<Metrics>(KerneldVersion(), absl::StrJoin(names, ","));
  if (!options_.metrics_address.empty())
    KD_RETURN_IF_ERROR(metrics_->Serve(options_.metrics_address));
  sessions_ = std::make_unique<SessionManager>(options_.limits);
  autotune_ = std::make_unique<AutotuneManager>(backends_.get(), metrics_.get(), options_.autotune);
  KD_RETURN_IF_ERROR(autotune_->Start());
  executor_ = std::make_unique<Executor>(
      backends_.get(), metrics_.get(),
      [tuning = autotune_.get()](Backend* b, int device, Op& op) {
        tuning->Configure(b, device, op);
      },
      options_.inline_async);
  KD_RETURN_IF_ERROR(executor_->Start());

  data_service_ = MakeDataPlaneService(this);
  admin_service_ = MakeAdminService(this, /*trusted=*/true);
  denied_admin_service_ = MakeAdminService(this, /*trusted=*/false);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  KD_ASSIGN_OR_RETURN(
      data_server_,
      StartServer(options_.data_socket, 0660, options_.socket_group, options_.tcp_address,
                  options_.max_message_bytes, {data_service_.get(), denied_admin_service_.get()}));
  KD_ASSIGN_OR_RETURN(admin_server_,
                      StartServer(options_.admin_socket, 0600, "", "", options_.max_message_bytes,
                                  {admin_service_.get()}));
  data_server_->GetHealthCheckService()->SetServingStatus(true);
  admin_server_->GetHealthCheckService()->SetServingStatus(true);
  reaper_ = std::thread([this] { ReapLoop(); });
  Log("kerneld %s serving: data unix:%s%s, admin unix:%s, metrics %s, backends %s",
      KerneldVersion(), options_.data_socket.c_str(),
      options_.tcp_address.empty() ? "" : absl::StrCat(" and ", options_.tcp_address).c_str(),
      options_.admin_socket.c_str(),
      metrics_->address().empty() ? "(off)"
                                  : ("http://" + metrics_->address() + "/metrics").c_str(),
      absl::StrJoin(names, ",").c_str());
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
  draining_ = true;
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoSeconds(grace);
  if (data_server_) data_server_->Shutdown(deadline);
  if (admin_server_) admin_server_->Shutdown(deadline);
  if (reaper_.joinable()) {
    stop_reaper_.Notify();
    reaper_.join();
  }
  data_server_.reset();
  admin_server_.reset();
  // Before the executor goes: a session's submit ring thread submits to it.
  if (sessions_) sessions_->CloseAll("daemon shutting down");
  executor_.reset();  // finishes what was queued
  autotune_.reset();  // after the executor, whose hook it is; finishes a background tune
  sessions_.reset();  // releases every buffer
  if (!options_.data_socket.empty()) unlink(options_.data_socket.c_str());
  if (!options_.admin_socket.empty()) unlink(options_.admin_socket.c_str());
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
