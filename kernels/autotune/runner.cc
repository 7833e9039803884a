#include <ctime>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/autotune_runner.h"

namespace kd {
namespace {

// Tunes one key and stores the result; the status says why it was not stored.
TuneProgressEvent TuneOne(const TuneKey& key, TuneCache& cache, const ConfigSpaceRegistry& spaces,
                          const HarnessFactory& make_harness, Timer& timer,
                          const TuneOptions& options, const CancelFn& cancelled) {
  TuneProgressEvent event;
  event.key = key;
  const std::optional<CacheEntry> current = cache.Get(key);
  if (current.has_value() && current->pinned) {
    event.status = absl::FailedPreconditionError(
        absl::StrCat("pinned to ", current->config, "; unpin it to retune"));
    return event;
  }
  if (spaces.Find(key) == nullptr) {
    event.status = absl::NotFoundError(
        absl::StrCat("no config space for ", key.op, " ", key.variant, " on ", key.arch));
    return event;
  }
  absl::StatusOr<std::unique_ptr<TuneHarness>> harness = make_harness(key);
  if (!harness.ok()) {
    event.status = harness.status();
    return event;
  }
  absl::StatusOr<TuneResult> result =
      Tune(key, spaces, **harness, timer, options, current.has_value() ? current->config : "",
           cancelled, &event.timeline);
  if (!result.ok()) {
    event.status = result.status();
    return event;
  }
  CacheEntry entry;
  entry.key = key;
  entry.config = result->config;
  entry.seconds = result->measured.median;
  entry.noise_seconds = result->measured.noise;
  entry.default_seconds = result->default_measured.median;
  entry.updated_unix = static_cast<int64_t>(time(nullptr));
  event.status = cache.Put(std::move(entry));  // a pin set meanwhile still wins
  event.result = *std::move(result);
  return event;
}

}  // namespace

TuneBatchSummary TuneKeys(const std::vector<TuneKey>& keys, TuneCache& cache,
                          const ConfigSpaceRegistry& spaces, const HarnessFactory& make_harness,
                          Timer& timer, const TuneOptions& options,
                          const std::function<void(const TuneProgressEvent&)>& progress,
                          const std::function<bool()>& cancelled) {
  TuneBatchSummary summary;
  const double start = timer.Now();
  const int total = static_cast<int>(keys.size());
  for (int i = 0; i < total; ++i) {
    if (cancelled && cancelled()) {
      summary.cancelled = true;
      break;
    }
    TuneProgressEvent event =
        TuneOne(keys[i], cache, spaces, make_harness, timer, options, cancelled);
    event.index = i;
    event.total = total;
    const double elapsed = timer.Now() - start;
    event.eta_seconds = elapsed / (i + 1) * (total - i - 1);
    (event.status.ok() ? summary.tuned : summary.failed) += 1;
    if (progress) progress(event);
    if (absl::IsCancelled(event.status)) {
      summary.cancelled = true;
      break;
    }
  }
  summary.elapsed_seconds = timer.Now() - start;
  return summary;
}

BackgroundTuner::BackgroundTuner(TuneCache& cache, const ConfigSpaceRegistry& spaces,
                                 HarnessFactory make_harness, std::unique_ptr<Timer> timer,
                                 TuneOptions options,
                                 std::function<void(const TuneProgressEvent&)> on_tuned,
                                 size_t max_queue)
    : cache_(cache),
      spaces_(spaces),
      make_harness_(std::move(make_harness)),
      timer_(std::move(timer)),
      options_(options),
      on_tuned_(std::move(on_tuned)),
      max_queue_(max_queue),
      worker_([this] { Work(); }) {}

BackgroundTuner::~BackgroundTuner() {
  Stop();
  worker_.join();
}

void BackgroundTuner::Stop() {
  cancel_.store(true);
  absl::MutexLock l(&mu_);
  stop_ = true;
}

bool BackgroundTuner::Enqueue(const TuneKey& key) {
  if (spaces_.Find(key) == nullptr) return false;
  std::string k = key.ToString();
  absl::MutexLock l(&mu_);
  if (stop_ || queue_.size() >= max_queue_ || queued_.contains(k)) return false;
  queued_.insert(std::move(k));
  queue_.push_back(key);
  return true;
}

void BackgroundTuner::WaitIdle() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(this, &BackgroundTuner::IdleOrStopped));
}

bool BackgroundTuner::IdleOrStopped() const { return stop_ || (queue_.empty() && !busy_); }
bool BackgroundTuner::WorkOrStopped() const { return stop_ || !queue_.empty(); }

size_t BackgroundTuner::pending() const {
  absl::MutexLock l(&mu_);
  return queue_.size() + (busy_ ? 1 : 0);
}

void BackgroundTuner::Work() {
  while (true) {
    TuneKey key;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(this, &BackgroundTuner::WorkOrStopped));
      if (stop_) return;
      key = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    TuneProgressEvent event = TuneOne(key, cache_, spaces_, make_harness_, *timer_, options_,
                                      [this] { return cancel_.load(std::memory_order_relaxed); });
    if (on_tuned_) on_tuned_(event);
    absl::MutexLock l(&mu_);
    queued_.erase(key.ToString());
    busy_ = false;
  }
}

}  // namespace kd
