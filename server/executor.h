// Runs batches of validated ops, in order, on one queue per device.
//
// Each (backend, device) has a FIFO queue served by its own thread and one backend stream. A
// batch is submitted whole and runs without interleaving; `done` is called exactly once, after
// the last op completed (SYNC) or was enqueued and the signal event recorded (ASYNC). It is
// called from the queue's thread, except that with `inline_async` an ASYNC batch submitted while
// its queue is idle (nothing pending, nothing running) runs on the submitting thread: enqueueing
// a launch is short, and skipping the hand-off to the queue's thread and back takes a thread
// wake-up off each end of the request. A batch marked caller_may_block (a submit ring's thread)
// runs inline on an idle queue whether SYNC or ASYNC. A SYNC batch's status includes its ops'
// device-side checks (pad/unpad group ends); an ASYNC batch's are known only later, and a
// failure is reported by failing the same session's next batch (FAILED_PRECONDITION naming the
// failure) before it runs. Kernel times go to kerneld_kernel_duration_seconds as the backend
// delivers them, and each batch's admit (when `received` is set), queue, launch and (SYNC)
// complete phases to kerneld_request_phase_seconds, all before `done` is called; the admit and
// queue phases are recorded after the launch, so that recording them does not delay it. RPC
// callbacks never wait on a device here: they enqueue, or launch an ASYNC batch inline.
#ifndef KERNELD_SERVER_EXECUTOR_H_
#define KERNELD_SERVER_EXECUTOR_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kerneld/kernels/backend.h"
#include "kerneld/kernels/registry.h"
#include "server/metrics.h"

namespace kd {

struct ExecBatch {
  Backend* backend = nullptr;
  int device = 0;
  std::vector<ValidatedOp> ops;
  // Regions the ops point into, held until the batch is done.
  std::vector<std::shared_ptr<const Region>> keep_alive;
  std::shared_ptr<Event> wait_event;    // optional
  std::shared_ptr<Event> signal_event;  // required when async
  bool async = false;
  // The session that submitted the batch. A device-side check that fails in an ASYNC batch
  // (known only after the reply went out) fails the next batch of this session, and of no other.
  std::string session_id;
  // A Submit batch: errors name the op as "ops[i].<op>.", as validation does.
  bool batched = false;
  // The submitting thread may block until the batch completes (a submit ring's thread, not an
  // RPC callback): a SYNC batch that finds its queue idle runs on it too, like an inline ASYNC
  // one, which saves the hand-off to the queue's thread and back.
  bool caller_may_block = false;
  std::function<void(const absl::Status& status, double kernel_seconds)> done;
  // When the request arrived (set by the caller; InfinitePast: not measured). The admit phase
  // runs from it to `submitted`.
  absl::Time received = absl::InfinitePast();
  // Set by Submit; the queue, launch and complete phases are measured from it.
  absl::Time submitted;
};

// Called on a queue's thread just before `op` runs on `backend`/`device` (the autotune lookup
// that picks the op's config). Must not block.
using PrepareOpFn = std::function<void(Backend* backend, int device, ValidatedOp& op)>;

class Executor {
 public:
  Executor(BackendRegistry* backends, Metrics* metrics, PrepareOpFn prepare = {},
           bool inline_async = true);
  // Finishes the queued batches, then joins the threads.
  ~Executor();

  // Creates a stream and a thread for every device of every backend.
  absl::Status Start();
  void Submit(ExecBatch batch);

  // Drops the held ASYNC failures of sessions for which `open` is false (they ended before they
  // could be told). The daemon calls it periodically.
  void RetainSessions(const std::function<bool(const std::string&)>& open);
  // ASYNC failures held for sessions' next requests.
  size_t held_failures() const;

  uint64_t ops_completed() const { return ops_completed_.load(); }
  uint64_t ops_failed() const { return ops_failed_.load(); }

 private:
  struct Queue {
    Backend* backend = nullptr;
    int device = 0;
    std::string label;  // "cpu:0", "cuda:1"
    std::unique_ptr<Stream> stream;
    prometheus::Gauge* depth = nullptr;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<ExecBatch> pending;
    bool running = false;  // a batch is running, on the queue's thread or inline
    bool stop = false;
    std::thread thread;
    // The kerneld_kernel_duration_seconds series of each op label set seen (OpLabelKey), so
    // that a request builds no label strings. Used only by the thread running a batch (the one
    // that set `running`), so it needs no lock.
    absl::flat_hash_map<uint64_t, prometheus::Histogram*> kernel_series;
  };

  void Serve(Queue* q);
  void RunBatch(Queue* q, ExecBatch& batch);
  // The series `op`'s kernel times go to on `q` (called while running a batch of `q`).
  prometheus::Histogram* KernelSeries(Queue* q, const Op& op);
  // Closes the queue's open group of device-side checks; a failure is kept for `session_id`.
  void CloseChecksFor(Queue* q, const std::string& session_id);

  // Device-side failures of ASYNC batches not yet reported, by session id. Shared with the
  // backends' callbacks, which may outlive the executor.
  struct AsyncErrors {
    std::mutex mu;
    std::map<std::string, absl::Status> by_session;
  };
  const std::shared_ptr<AsyncErrors> async_errors_ = std::make_shared<AsyncErrors>();

  BackendRegistry* const backends_;
  Metrics* const metrics_;
  const PrepareOpFn prepare_;
  const bool inline_async_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::atomic<uint64_t> ops_completed_{0};
  std::atomic<uint64_t> ops_failed_{0};
};

}  // namespace kd

#endif  // KERNELD_SERVER_EXECUTOR_H_
