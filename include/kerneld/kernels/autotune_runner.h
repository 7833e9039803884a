// Running tunes: a batch of keys with progress (what `kctl tune` streams), and a background
// tuner that works through misses while requests keep running the default config.
//
// Both store results in a TuneCache with TuneCache::Put, so a pinned key is never retuned, and
// both take the incumbent from the cache, so a retune keeps the served config unless a
// challenger wins by more than the noise.
#ifndef KERNELD_KERNELS_AUTOTUNE_RUNNER_H_
#define KERNELD_KERNELS_AUTOTUNE_RUNNER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kerneld/kernels/autotune_cache.h"
#include "kerneld/kernels/autotune_space.h"
#include "kerneld/kernels/autotune_tuner.h"

namespace kd {

// Builds the harness that tunes `key` on the runner's device (the daemon asks the device's
// backend: Backend::CreateTuneHarness). An error fails that key only.
using HarnessFactory =
    std::function<absl::StatusOr<std::unique_ptr<TuneHarness>>(const TuneKey& key)>;

struct TuneProgressEvent {
  int index = 0;  // 0-based position of this key in the batch
  int total = 0;
  TuneKey key;
  // OK, or why this key was not tuned: FAILED_PRECONDITION for a pinned key, the harness
  // factory's or Tune()'s error otherwise.
  absl::Status status;
  TuneResult result;  // when status is OK
  // The key's kernel runs, whatever its status (all zero when no tune started: a pinned key,
  // no space, no harness).
  TuneTimeline timeline;
  double eta_seconds = 0;  // the rest of the batch, at the mean time per key so far
};

struct TuneBatchSummary {
  int tuned = 0;
  int failed = 0;  // pinned keys included
  bool cancelled = false;
  double elapsed_seconds = 0;
};

// Tunes `keys` in order and stores each result in `cache`, calling `progress` (may be empty)
// after each key. `cancelled` (may be empty) is polled before every kernel run (see Tune): once
// it returns true the key in progress ends with CANCELLED (reported, nothing stored) and the
// rest is skipped. Not thread-safe with respect to `timer`.
TuneBatchSummary TuneKeys(const std::vector<TuneKey>& keys, TuneCache& cache,
                          const ConfigSpaceRegistry& spaces, const HarnessFactory& make_harness,
                          Timer& timer, const TuneOptions& options,
                          const std::function<void(const TuneProgressEvent&)>& progress,
                          const CancelFn& cancelled = {});

// One worker thread that tunes queued keys one at a time. Thread-safe.
class BackgroundTuner {
 public:
  // `on_tuned` (may be empty) runs on the worker after each key, e.g. to save the cache and
  // count runs; its event has index 0 and total 0. The references must outlive the tuner.
  BackgroundTuner(TuneCache& cache, const ConfigSpaceRegistry& spaces, HarnessFactory make_harness,
                  std::unique_ptr<Timer> timer, TuneOptions options,
                  std::function<void(const TuneProgressEvent&)> on_tuned, size_t max_queue = 1024);
  // Stop(), then joins the worker.
  ~BackgroundTuner();
  BackgroundTuner(const BackgroundTuner&) = delete;
  BackgroundTuner& operator=(const BackgroundTuner&) = delete;

  // Queues `key` and returns at once. False when it is queued or being tuned already, when the
  // queue holds max_queue keys, or when the key has no config space.
  bool Enqueue(const TuneKey& key);
  // Cancels the key in progress (within one kernel run: it stores nothing) and drops the rest;
  // Enqueue refuses every key from then on. Returns at once.
  void Stop();
  // Blocks until the queue is empty and no key is being tuned.
  void WaitIdle();
  size_t pending() const;

 private:
  void Work();
  bool IdleOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WorkOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TuneCache& cache_;
  const ConfigSpaceRegistry& spaces_;
  const HarnessFactory make_harness_;
  const std::unique_ptr<Timer> timer_;
  const TuneOptions options_;
  const std::function<void(const TuneProgressEvent&)> on_tuned_;
  const size_t max_queue_;

  mutable absl::Mutex mu_;
  std::deque<TuneKey> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> queued_ ABSL_GUARDED_BY(mu_);  // queue_ and in progress
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> cancel_{false};  // polled by the tune in progress
  std::thread worker_;
};

}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_RUNNER_H_
