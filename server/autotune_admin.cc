#include "server/autotune_admin.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "kerneld/kernels/client_string.h"
#include "server/log.h"

namespace kd {
namespace {

void EntryToProto(const CacheEntry& e, v1::CacheEntry* out) {
  out->set_key(e.key.ToString());
  out->set_config(e.config);
  out->set_seconds(e.seconds);
  out->set_default_seconds(e.default_seconds);
  out->set_pinned(e.pinned);
}

DType DTypeByName(absl::string_view name) {
  for (int d = 1; d <= static_cast<int>(DType::kU8); ++d) {
    if (DTypeName(static_cast<DType>(d)) == name) return static_cast<DType>(d);
  }
  return DType::kInvalid;
}

// Writes progress messages one at a time (a write reactor allows one in flight) from the tune
// thread, and finishes once the last was written.
class TuneReactor : public grpc::ServerWriteReactor<v1::TuneProgress> {
 public:
  TuneReactor(AutotuneManager& tuning, Metrics& metrics, const v1::TuneRequest& req)
      : metrics_(metrics), start_(absl::Now()) {
    absl::StatusOr<TuneJob> job = JobFromProto(req);
    if (!job.ok()) {
      FinishWhenWritten(job.status());
      return;
    }
    worker_ = std::thread([this, &tuning, job = *std::move(job)] {
      // OnDone joins worker_: it must be assigned before this thread can finish the call.
      constructed_.WaitForNotification();
      const absl::Status s = tuning.Tune(
          job, [this](const TuneProgressEvent& e) { Push(EventToProto(e)); },
          [this] { return cancelled_.load(); });
      if (s.ok()) {
        v1::TuneProgress last;
        last.set_done(true);
        last.set_index(last_total_);
        last.set_total(last_total_);
        Push(std::move(last));
      }
      FinishWhenWritten(s);
    });
    constructed_.Notify();
  }

  void OnWriteDone(bool ok) override {
    const v1::TuneProgress* next = nullptr;
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      if (!ok) cancelled_ = true;  // the client is gone: stop tuning
      if (!queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        finish = finish_pending_;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish) DoFinish();
  }

  void OnCancel() override { cancelled_ = true; }

  void OnDone() override {
    if (worker_.joinable()) {
      if (worker_.get_id() == std::this_thread::get_id()) {
        worker_.detach();
      } else {
        worker_.join();
      }
    }
    delete this;
  }

 private:
  static absl::StatusOr<TuneJob> JobFromProto(const v1::TuneRequest& req) {
    TuneJob job;
    job.backend = req.backend();
    job.device = req.device();
    job.from_misses = req.from_misses();
    job.budget_seconds = req.budget_seconds();
    for (int i = 0; i < req.shapes_size(); ++i) {
      const v1::TuneShape& s = req.shapes(i);
      if (!s.op().empty() && s.op() != "gemm") {
        return absl::InvalidArgumentError(absl::StrCat("shapes[", i, "].op=\"",
                                                       EchoClientString(s.op()),
                                                       "\" is not tunable (only \"gemm\")"));
      }
      job.shapes.push_back(TuneShapeFromProto(s));
    }
    return job;
  }

  v1::TuneProgress EventToProto(const TuneProgressEvent& e) {
    v1::TuneProgress p;
    p.set_index(e.index);
    p.set_total(e.total);
    last_total_ = e.total;
    *p.mutable_shape() = TuneShapeToProto(e.key);
    p.set_eta_seconds(e.eta_seconds);
    v1::TuneTimeline* t = p.mutable_timeline();
    t->set_budget_seconds(e.timeline.budget_seconds);
    t->set_kernel_runs(static_cast<uint32_t>(e.timeline.kernel_runs));
    t->set_last_run_start_seconds(e.timeline.last_run_start_seconds);
    t->set_last_run_end_seconds(e.timeline.last_run_end_seconds);
    t->set_end_seconds(e.timeline.end_seconds);
    if (!e.status.ok()) {
      p.set_error(e.status.ToString());
      return p;
    }
    p.set_default_seconds(e.result.default_measured.median);
    p.set_tuned_seconds(e.result.measured.median);
    p.set_config(e.result.config);
    return p;
  }

  void Push(v1::TuneProgress message) {
    const v1::TuneProgress* next = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(message));  // references to queued messages stay valid
      if (writing_) return;
      writing_ = true;
      next = &queue_.front();
    }
    StartWrite(next);
  }

  void FinishWhenWritten(const absl::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = status;
      if (writing_) {
        finish_pending_ = true;
        return;
      }
    }
    DoFinish();
  }

  // The last thing a thread does with this reactor: OnDone may delete it right after.
  void DoFinish() {
    absl::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status = status_;
    }
    metrics_.ObserveRpc("Tune", absl::StatusCodeToString(status.code()),
                        absl::ToDoubleSeconds(absl::Now() - start_));
    LogRequestOutcome("Tune", "", "", status);
    Finish(ToGrpcStatus(status));
  }

  Metrics& metrics_;
  const absl::Time start_;
  std::atomic<bool> cancelled_{false};
  int last_total_ = 0;
  std::mutex mu_;
  std::deque<v1::TuneProgress> queue_;
  bool writing_ = false;
  bool finish_pending_ = false;
  absl::Status status_;
  absl::Notification constructed_;
  std::thread worker_;
};

}  // namespace

GemmTuneShape TuneShapeFromProto(const v1::TuneShape& s) {
  GemmTuneShape out;
  out.variant = s.variant() >= 1 && s.variant() <= static_cast<int>(GemmVariant::kKGroupedTN)
                    ? static_cast<GemmVariant>(s.variant())
                    : GemmVariant::kInvalid;
  out.m = s.m();
  out.n = s.n();
  out.k = s.k();
  out.groups = s.groups() == 0 ? 1 : s.groups();
  out.out_dtype =
      s.out_dtype() == v1::DTYPE_UNSPECIFIED ? DType::kBF16 : static_cast<DType>(s.out_dtype());
  return out;
}

v1::TuneShape TuneShapeToProto(const TuneKey& key) {
  v1::TuneShape s;
  s.set_op(key.op);
  for (int v = 1; v <= static_cast<int>(GemmVariant::kKGroupedTN); ++v) {
    if (GemmVariantName(static_cast<GemmVariant>(v)) == key.variant) {
      s.set_variant(static_cast<v1::GemmVariant>(v));
    }
  }
  s.set_m(key.m);
  s.set_n(key.n);
  s.set_k(key.k);
  s.set_groups(static_cast<int32_t>(key.groups));
  const std::vector<absl::string_view> io = absl::StrSplit(key.dtypes, '>');
  if (io.size() == 2) s.set_out_dtype(static_cast<v1::DType>(DTypeByName(io[1])));
  return s;
}

grpc::ServerUnaryReactor* HandleListCache(AutotuneManager& tuning, const RpcCall& call,
                                          v1::ListCacheResponse* resp) {
  for (const CacheEntry& e : tuning.List()) EntryToProto(e, resp->add_entries());
  resp->set_path(tuning.DefaultPath());
  return call.Finish(absl::OkStatus());
}

grpc::ServerUnaryReactor* HandleExportCache(AutotuneManager& tuning, const RpcCall& call,
                                            v1::ExportCacheResponse* resp) {
  resp->set_file(tuning.Export());
  return call.Finish(absl::OkStatus());
}

grpc::ServerUnaryReactor* HandleImportCache(AutotuneManager& tuning, const RpcCall& call,
                                            const v1::ImportCacheRequest& req,
                                            v1::ImportCacheResponse* resp) {
  absl::StatusOr<ImportResult> r = tuning.Import(req.file());
  if (!r.ok()) return call.Finish(r.status());
  resp->set_imported(r->imported);
  resp->set_rejected(r->rejected);
  for (const std::string& reason : r->reasons) resp->add_reasons(reason);
  return call.Finish(absl::OkStatus());
}

grpc::ServerUnaryReactor* HandlePinCache(AutotuneManager& tuning, const RpcCall& call,
                                         const v1::PinCacheRequest& req) {
  return call.Finish(tuning.Pin(req.key(), req.config()));
}

grpc::ServerUnaryReactor* HandleUnpinCache(AutotuneManager& tuning, const RpcCall& call,
                                           const v1::UnpinCacheRequest& req) {
  return call.Finish(tuning.Unpin(req.key()));
}

grpc::ServerUnaryReactor* HandleClearCache(AutotuneManager& tuning, const RpcCall& call,
                                           const v1::ClearCacheRequest& req,
                                           v1::ClearCacheResponse* resp) {
  resp->set_removed(tuning.Clear(req.include_pinned()));
  return call.Finish(absl::OkStatus());
}

grpc::ServerWriteReactor<v1::TuneProgress>* StartTune(AutotuneManager& tuning, Metrics& metrics,
                                                      const v1::TuneRequest& req) {
  return new TuneReactor(tuning, metrics, req);
}

}  // namespace kd
