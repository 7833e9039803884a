// Kernel times from CUDA events, read without stalling any stream: Begin records a start event
// on the stream before an op's kernels, End a stop event after them, and a poller thread
// delivers the elapsed time to the op's callback once the stop event completed. Events are
// recycled. Thread-safe.
//
// NOTE: the launching thread must not pay for the poller. The poller never blocks on a
// condition that End would make true (absl would wake it from End's unlock: a futex syscall,
// ~3 µs on the lent VM, measured inside the daemon's launch phase), and it queries events
// without holding the lock that Begin and End take. It ticks every 50 µs while spans are in
// flight and every 1 ms when none is; ASYNC kernel times only feed histograms, and a stream
// that is synchronized delivers its own (DeliverCompleted).
#ifndef KERNELD_KERNELS_GPU_KERNEL_TIMER_H_
#define KERNELD_KERNELS_GPU_KERNEL_TIMER_H_

#include <list>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kerneld/kernels/backend.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {

class KernelTimer {
 public:
  struct Span {
    int device = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
  };

  explicit KernelTimer(int device_count);
  // Waits for the spans still in flight, delivers their times, and destroys every event.
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  // Records a start event on `stream` (of `device`, which is current on the calling thread).
  absl::StatusOr<Span> Begin(int device, cudaStream_t stream);
  // Records the stop event; `fn` gets the seconds between the two once the stop completed.
  absl::Status End(const Span& span, cudaStream_t stream, KernelTimingFn fn);
  // Gives the events of a span back without timing it (the op failed to launch).
  void Abandon(const Span& span);
  // Delivers, on the calling thread, every span whose stop event completed, and waits for the
  // poller's deliveries in progress: after a stream synchronize, every time of that stream has
  // reached its callback when this returns. `synced`, when set, is a stream the caller has just
  // synchronized and on which nothing has been recorded since (the executor runs one batch at a
  // time per stream): its spans are complete and are not queried.
  void DeliverCompleted(cudaStream_t synced = nullptr);

 private:
  struct Pending {
    Span span;
    KernelTimingFn fn;
  };
  void Poll();
  // Moves the completed spans (those of `synced` without a query) out of pending_, counted in
  // delivering_.
  std::list<Pending> TakeCompletedLocked(cudaStream_t synced) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls each span's callback and recycles its events.
  void Deliver(std::list<Pending>& done) ABSL_LOCKS_EXCLUDED(mu_);
  // Two events of `device` (start, stop), from the free list or new.
  absl::Status TakeEvents(int device, Span& span);
  void RecycleLocked(const Span& span) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::vector<std::vector<cudaEvent_t>> free_events_ ABSL_GUARDED_BY(mu_);  // per device
  std::list<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int delivering_ ABSL_GUARDED_BY(mu_) = 0;  // taken from pending_, callback not yet returned
  int polling_ ABSL_GUARDED_BY(mu_) = 0;     // spans the poller is querying outside the lock
  std::thread poller_;
};

}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_KERNEL_TIMER_H_
