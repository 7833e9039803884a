// The daemon's autotune state: one tune cache per device model (the devices of one model share
// keys, so every rank gets the same config), loaded at start, consulted on every GEMM, tuned in
// the background or on `kctl tune`, and persisted after every change.
//
// The request path (Configure) never waits for tuning: a hit runs the cached config, a miss the
// space's heuristic default, counted in kerneld_autotune_lookups_total{result} and, with
// background tuning on, queued for the BackgroundTuner. Thread-safe.
//
// What tuning does is counted where an operator (or a test) can check it: every run of a tuning
// harness's kernel in kerneld_autotune_kernel_runs_total{state}, "cancelled" when its tune had
// already been cancelled as it started (at most one per cancelled tune, since the tuner polls the
// cancellation before every run), and the shapes being tuned now in kerneld_autotune_tunes_active.
#ifndef KERNELD_SERVER_AUTOTUNE_MANAGER_H_
#define KERNELD_SERVER_AUTOTUNE_MANAGER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/autotune.h"
#include "kerneld/kernels/registry.h"
#include "server/metrics.h"

namespace kd {

struct AutotuneOptions {
  // Where the cache files live (autotune-<backend>-<model>.cache); "" keeps them in memory.
  std::string cache_dir;
  // Tune misses in the background, one at a time per device model.
  bool background = false;
  // Measurement settings of every tune; a Tune request's budget overrides budget_seconds.
  TuneOptions tune;
  // How long loading or saving a cache file waits for its lock (TuneCacheOptions::lock_timeout).
  absl::Duration lock_timeout = absl::Seconds(10);
  // Imported at start, after the cache files are loaded: a file from `kctl cache export`, or a
  // directory whose *.cache files are each imported (one per GPU model of a cluster). Each file
  // goes to the cache whose validators it matches; one that matches no device of this node is
  // skipped with a log line. "" imports nothing.
  std::string import_path;
};

// One GEMM problem to tune, as kerneld.v1.TuneShape names it.
struct GemmTuneShape {
  GemmVariant variant = GemmVariant::kInvalid;
  int64_t m = 0, n = 0, k = 0, groups = 1;
  DType out_dtype = DType::kBF16;
};

struct TuneJob {
  std::string backend;  // "" = the daemon's default backend
  int device = 0;
  std::vector<GemmTuneShape> shapes;
  bool from_misses = false;   // also tune every miss the cache recorded
  double budget_seconds = 0;  // per shape; 0 = AutotuneOptions::tune's
};

class AutotuneManager {
 public:
  AutotuneManager(BackendRegistry* backends, Metrics* metrics, AutotuneOptions options);
  // Stops: as Stop(), then joins the background tuners.
  ~AutotuneManager();

  // Creates the caches and loads their files (a damaged file is set aside and the cache starts
  // empty; see TuneCache::Load). FAILED_PRECONDITION when cache_dir cannot be created;
  // DEADLINE_EXCEEDED when a cache file's lock is held elsewhere past lock_timeout (starting
  // empty would later overwrite that file's entries). Then imports import_path: NOT_FOUND when
  // it does not exist, a file's parse error (DATA_LOSS, INVALID_ARGUMENT...) naming the file.
  absl::Status Start();
  // Cancels every tune in progress (Tune calls and the background tuners) within one kernel run
  // and refuses new ones with UNAVAILABLE. For shutdown: tuning never holds the daemon up.
  void Stop();

  // The executor's hook, called on the device queue's thread before `op` runs on
  // `backend`/`device`: sets GemmArgs::config. Other ops are left alone.
  void Configure(Backend* backend, int device, ValidatedOp& op);

  // ---- Admin plane. Keys are TuneKey strings; each names its device model.
  std::vector<CacheEntry> List() const;
  // The file of the default backend's first device model ("" when in memory only).
  std::string DefaultPath() const;
  // The default device model's cache as a file.
  std::string Export() const;
  // Into the cache whose validators the file's match; with none, every entry is rejected with
  // the mismatch as the reason. Parse errors as TuneCache::Import.
  absl::StatusOr<ImportResult> Import(absl::string_view bytes);
  // INVALID_ARGUMENT for a key that does not parse; NOT_FOUND when no device of this node has
  // the key's model; else TuneCache::Pin / Unpin.
  absl::Status Pin(absl::string_view key, absl::string_view config);
  absl::Status Unpin(absl::string_view key);
  uint32_t Clear(bool include_pinned);
  size_t Entries() const;

  // Tunes the job's shapes (then its misses) on its device, one key after the other, calling
  // `progress` after each. NOT_FOUND for an unknown backend, INVALID_ARGUMENT for a bad device,
  // shape or an empty job; a key that fails reports its error in its event and the job goes on.
  // `cancelled` (the caller went away) is polled before every kernel run: the key in progress
  // stores nothing and the call returns CANCELLED. After Stop(): UNAVAILABLE, the same way.
  absl::Status Tune(const TuneJob& job,
                    const std::function<void(const TuneProgressEvent&)>& progress,
                    const std::function<bool()>& cancelled);

 private:
  struct ModelCache;

  ModelCache* Find(Backend* backend, int device) const;
  ModelCache* FindForKey(const TuneKey& key) const;
  TuneKey GemmKey(const ModelCache& cache, const GemmTuneShape& shape) const;
  void Persist(ModelCache& cache) const;
  absl::Status ImportAtStart(const std::string& path);
  void Record(const TuneProgressEvent& event);
  // `make`, with each harness counted in the tuning metrics (kernel runs, by whether `cancelled`
  // was true as each started; tunes active while the harness lives).
  HarnessFactory Counted(HarnessFactory make, CancelFn cancelled) const;

  BackendRegistry* const backends_;
  const AutotuneOptions options_;
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<ModelCache>> caches_;
  prometheus::Counter* hits_;
  prometheus::Counter* misses_;
  prometheus::Counter* runs_;
  prometheus::Histogram* duration_;
  prometheus::Gauge* entries_;
  prometheus::Counter* kernel_runs_;
  prometheus::Counter* cancelled_kernel_runs_;
  prometheus::Gauge* tunes_active_;
};

}  // namespace kd

#endif  // KERNELD_SERVER_AUTOTUNE_MANAGER_H_
