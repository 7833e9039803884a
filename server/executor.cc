#include "server/executor.h"

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/status_macros.h"

namespace kd {

Executor::Executor(BackendRegistry* backends, Metrics* metrics, PrepareOpFn prepare,
                   bool inline_async)
    : backends_(backends),
      metrics_(metrics),
      prepare_(std::move(prepare)),
      inline_async_(inline_async) {}

Executor::~Executor() {
  for (auto& q : queues_) {
    {
      std::lock_guard<std::mutex> lock(q->mu);
      q->stop = true;
    }
    q->cv.notify_all();
  }
  for (auto& q : queues_) {
    if (q->thread.joinable()) q->thread.join();
  }
}

absl::Status Executor::Start() {
  for (Backend* backend : backends_->All()) {
    for (int d = 0; d < backend->DeviceCount(); ++d) {
      auto q = std::make_unique<Queue>();
      q->backend = backend;
      q->device = d;
      q->label = absl::StrCat(backend->name(), ":", d);
      KD_ASSIGN_OR_RETURN(q->stream, backend->CreateStream(d));
      q->depth = &metrics_->QueueDepth(q->label);
      queues_.push_back(std::move(q));
    }
  }
  for (auto& q : queues_) q->thread = std::thread([this, raw = q.get()] { Serve(raw); });
  return absl::OkStatus();
}

void Executor::Submit(ExecBatch batch) {
  batch.submitted = absl::Now();
  for (auto& q : queues_) {
    if (q->backend == batch.backend && q->device == batch.device) {
      {
        std::lock_guard<std::mutex> lock(q->mu);
        const bool may_inline = (inline_async_ && batch.async) || batch.caller_may_block;
        if (!(may_inline && !q->running && q->pending.empty() && !q->stop)) {
          q->pending.push_back(std::move(batch));
          q->depth->Increment();
          q->cv.notify_one();
          return;
        }
        q->running = true;
      }
      RunBatch(q.get(), batch);
      bool waiting = false;
      {
        std::lock_guard<std::mutex> lock(q->mu);
        q->running = false;
        waiting = !q->pending.empty() || q->stop;
      }
      // Batches that arrived meanwhile wait for the queue's thread. Only then is it woken: a
      // notify with nothing to do costs a futex syscall and two context switches per request.
      if (waiting) q->cv.notify_one();
      return;
    }
  }
  batch.done(
      absl::InternalError(absl::StrCat("no queue for ", batch.backend->name(), ":", batch.device)),
      0.0);
}

void Executor::Serve(Queue* q) {
  for (;;) {
    ExecBatch batch;
    {
      std::unique_lock<std::mutex> lock(q->mu);
      q->cv.wait(lock, [q] { return !q->running && (q->stop || !q->pending.empty()); });
      if (q->pending.empty()) return;  // stopping, and nothing left to run
      batch = std::move(q->pending.front());
      q->pending.pop_front();
      q->running = true;
    }
    q->depth->Decrement();
    RunBatch(q, batch);
    std::lock_guard<std::mutex> lock(q->mu);
    q->running = false;
  }
}

void Executor::RunBatch(Queue* q, ExecBatch& batch) {
  const absl::Time started = absl::Now();
  // The phases before this one are recorded once the ops are launched (or the batch failed).
  bool entry_observed = false;
  auto observe_entry = [&] {
    if (entry_observed) return;
    entry_observed = true;
    if (batch.received != absl::InfinitePast()) {
      metrics_->ObservePhase(RequestPhase::kAdmit,
                             absl::ToDoubleSeconds(batch.submitted - batch.received));
    }
    metrics_->ObservePhase(RequestPhase::kQueue, absl::ToDoubleSeconds(started - batch.submitted));
  };
  // Kernel times may arrive after `done` (GPU backends deliver them from their own thread), so
  // the accumulator is shared.
  auto total = std::make_shared<std::atomic<double>>(0.0);
  auto finish = [&](absl::Status status) {
    observe_entry();
    if (status.ok())
      ops_completed_ += batch.ops.size();
    else
      ++ops_failed_;
    batch.done(status, total->load());
  };
  if (!batch.session_id.empty()) {
    absl::Status earlier;
    {
      std::lock_guard<std::mutex> lock(async_errors_->mu);
      auto it = async_errors_->by_session.find(batch.session_id);
      if (it != async_errors_->by_session.end()) {
        earlier = std::move(it->second);
        async_errors_->by_session.erase(it);
      }
    }
    if (!earlier.ok()) {
      return finish(absl::FailedPreconditionError(
          absl::StrCat("an earlier ASYNC request of this session failed on the device (",
                       earlier.ToString(), "); this request did not run")));
    }
  }
  if (batch.wait_event) {
    absl::Status s = q->backend->StreamWaitEvent(*q->stream, *batch.wait_event);
    if (!s.ok()) return finish(PrefixStatus("completion.wait_event: ", s));
  }
  for (size_t i = 0; i < batch.ops.size(); ++i) {
    ValidatedOp& op = batch.ops[i];
    if (prepare_) prepare_(q->backend, q->device, op);
    prometheus::Histogram* series = KernelSeries(q, op.op());
    KernelTimingFn on_timed = [series, total](double seconds) {
      series->Observe(seconds);
      double cur = total->load();
      while (!total->compare_exchange_weak(cur, cur + seconds)) {
      }
    };
    absl::Status s = q->backend->Run(op, *q->stream, std::move(on_timed));
    if (!s.ok()) {
      CloseChecksFor(q, batch.session_id);  // the ops already enqueued
      return finish(
          batch.batched ? PrefixStatus(absl::StrCat("ops[", i, "].", OpName(op.op()), "."), s) : s);
    }
  }
  observe_entry();
  if (batch.async) {
    absl::Status recorded = q->backend->RecordEvent(*q->stream, *batch.signal_event);
    CloseChecksFor(q, batch.session_id);
    metrics_->ObservePhase(RequestPhase::kLaunch, absl::ToDoubleSeconds(absl::Now() - started));
    return finish(recorded);
  }
  const absl::Time launched = absl::Now();
  metrics_->ObservePhase(RequestPhase::kLaunch, absl::ToDoubleSeconds(launched - started));
  absl::Status synced = q->backend->Synchronize(*q->stream);
  metrics_->ObservePhase(RequestPhase::kComplete, absl::ToDoubleSeconds(absl::Now() - launched));
  finish(std::move(synced));
}

prometheus::Histogram* Executor::KernelSeries(Queue* q, const Op& op) {
  prometheus::Histogram*& series = q->kernel_series[OpLabelKey(op)];
  if (series == nullptr) {
    series = &metrics_->KernelSeries(OpName(op), OpVariantLabel(op), OpDTypeLabel(op), q->label,
                                     OpShapeClass(op));
  }
  return series;
}

void Executor::RetainSessions(const std::function<bool(const std::string&)>& open) {
  std::lock_guard<std::mutex> lock(async_errors_->mu);
  for (auto it = async_errors_->by_session.begin(); it != async_errors_->by_session.end();) {
    it = open(it->first) ? std::next(it) : async_errors_->by_session.erase(it);
  }
}

size_t Executor::held_failures() const {
  std::lock_guard<std::mutex> lock(async_errors_->mu);
  return async_errors_->by_session.size();
}

void Executor::CloseChecksFor(Queue* q, const std::string& session_id) {
  q->backend->CloseChecks(*q->stream, [errors = async_errors_, session_id](absl::Status status) {
    if (status.ok() || session_id.empty()) return;
    std::lock_guard<std::mutex> lock(errors->mu);
    errors->by_session.emplace(session_id, std::move(status));  // the first failure is kept
  });
}

}  // namespace kd
