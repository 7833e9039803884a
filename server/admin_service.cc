// The admin plane. Served trusted on the admin socket (mode 0600) and denied on the data socket,
// so a trainer connection that calls an admin method gets PERMISSION_DENIED.
#include "absl/strings/str_cat.h"
#include "kerneld/kernels/shm_guard.h"
#include "kerneld/kernels/status_macros.h"
#include "server/autotune_admin.h"
#include "server/rpc_call.h"
#include "server/services.h"

namespace kd {
namespace {

absl::Status Denied(const char* method) {
  return absl::PermissionDeniedError(absl::StrCat(
      method, " is an admin method: call it on the admin socket, not the data socket"));
}

class AdminService final : public v1::Admin::CallbackService {
 public:
  AdminService(Daemon* daemon, bool trusted) : daemon_(daemon), trusted_(trusted) {}

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx, const v1::StatusRequest*,
                                   v1::StatusResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "Status", ctx);
    if (!trusted_) return call.Finish(Denied("Status"));
    FillStatus(resp);
    return call.Finish(absl::OkStatus());
  }

  grpc::ServerWriteReactor<v1::TuneProgress>* Tune(grpc::CallbackServerContext*,
                                                   const v1::TuneRequest* req) override {
    class Refused : public grpc::ServerWriteReactor<v1::TuneProgress> {
     public:
      explicit Refused(const absl::Status& s) { Finish(ToGrpcStatus(s)); }
      void OnDone() override { delete this; }
    };
    if (trusted_) return StartTune(daemon_->autotune(), daemon_->metrics(), *req);
    const absl::Status s = Denied("Tune");
    daemon_->metrics().ObserveRpc("Tune", absl::StatusCodeToString(s.code()), 0.0);
    return new Refused(s);
  }

  grpc::ServerUnaryReactor* ListCache(grpc::CallbackServerContext* ctx, const v1::ListCacheRequest*,
                                      v1::ListCacheResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "ListCache", ctx);
    if (!trusted_) return call.Finish(Denied("ListCache"));
    return HandleListCache(daemon_->autotune(), call, resp);
  }
  grpc::ServerUnaryReactor* ExportCache(grpc::CallbackServerContext* ctx,
                                        const v1::ExportCacheRequest*,
                                        v1::ExportCacheResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "ExportCache", ctx);
    if (!trusted_) return call.Finish(Denied("ExportCache"));
    return HandleExportCache(daemon_->autotune(), call, resp);
  }
  grpc::ServerUnaryReactor* ImportCache(grpc::CallbackServerContext* ctx,
                                        const v1::ImportCacheRequest* req,
                                        v1::ImportCacheResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "ImportCache", ctx);
    if (!trusted_) return call.Finish(Denied("ImportCache"));
    return HandleImportCache(daemon_->autotune(), call, *req, resp);
  }
  grpc::ServerUnaryReactor* PinCache(grpc::CallbackServerContext* ctx,
                                     const v1::PinCacheRequest* req,
                                     v1::PinCacheResponse*) override {
    RpcCall call(&daemon_->metrics(), "PinCache", ctx);
    if (!trusted_) return call.Finish(Denied("PinCache"));
    return HandlePinCache(daemon_->autotune(), call, *req);
  }
  grpc::ServerUnaryReactor* UnpinCache(grpc::CallbackServerContext* ctx,
                                       const v1::UnpinCacheRequest* req,
                                       v1::UnpinCacheResponse*) override {
    RpcCall call(&daemon_->metrics(), "UnpinCache", ctx);
    if (!trusted_) return call.Finish(Denied("UnpinCache"));
    return HandleUnpinCache(daemon_->autotune(), call, *req);
  }
  grpc::ServerUnaryReactor* ClearCache(grpc::CallbackServerContext* ctx,
                                       const v1::ClearCacheRequest* req,
                                       v1::ClearCacheResponse* resp) override {
    RpcCall call(&daemon_->metrics(), "ClearCache", ctx);
    if (!trusted_) return call.Finish(Denied("ClearCache"));
    return HandleClearCache(daemon_->autotune(), call, *req, resp);
  }

  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* ctx, const v1::DrainRequest*,
                                  v1::DrainResponse*) override {
    RpcCall call(&daemon_->metrics(), "Drain", ctx);
    if (!trusted_) return call.Finish(Denied("Drain"));
    daemon_->Drain();
    return call.Finish(absl::OkStatus());
  }

 private:
  void FillStatus(v1::StatusResponse* resp) {
    resp->set_version(KerneldVersion());
    resp->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - daemon_->started()));
    for (Backend* b : daemon_->backends().All()) {
      resp->add_backends(std::string(b->name()));
      for (int d = 0; d < b->DeviceCount(); ++d) {
        const DeviceProperties p = b->Properties(d);
        const MemoryStats m = b->Memory(d);
        v1::DeviceInfo* info = resp->add_devices();
        info->set_backend(std::string(b->name()));
        info->set_ordinal(d);
        info->set_name(p.name);
        info->set_arch(p.arch);
        info->set_memory_total_bytes(p.memory_total);
        info->set_memory_used_bytes(m.used);
        info->set_memory_pooled_bytes(m.pooled);
        info->set_memory_imported_bytes(m.imported);
        info->set_healthy(b->Healthy());
      }
    }
    const absl::Time now = absl::Now();
    uint32_t buffers = 0;
    uint64_t bytes = 0;
    for (const auto& s : daemon_->sessions().List()) {
      const Session::Usage u = s->usage();
      v1::SessionInfo* info = resp->add_sessions();
      info->set_session_id(s->id());
      info->set_client_name(s->client_name());
      info->set_buffers(u.buffers);
      info->set_buffer_bytes(u.bytes);
      info->set_age_seconds(absl::ToDoubleSeconds(now - s->created()));
      info->set_idle_seconds(absl::ToDoubleSeconds(now - s->last_activity()));
      info->set_lease_seconds(s->lease_seconds());
      info->set_submit_ring(s->HasAttachment(kSubmitRingAttachment));
      info->set_pid(s->peer() ? s->peer()->pid : 0);
      info->set_uid(s->peer() ? static_cast<int64_t>(s->peer()->uid) : -1);
      buffers += u.buffers;
      bytes += u.bytes;
    }
    resp->set_sessions_active(resp->sessions_size());
    resp->set_buffers_registered(buffers);
    resp->set_buffer_bytes(bytes);
    resp->set_draining(daemon_->draining());
    resp->set_ops_completed(daemon_->executor().ops_completed());
    resp->set_ops_failed(daemon_->executor().ops_failed());
    resp->set_data_socket(daemon_->options().data_socket);
    resp->set_metrics_address(daemon_->metrics().address());
    resp->set_shm_faults(ShmFaultCount());
  }

  Daemon* const daemon_;
  const bool trusted_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAdminService(Daemon* daemon, bool trusted) {
  return std::make_unique<AdminService>(daemon, trusted);
}

}  // namespace kd
