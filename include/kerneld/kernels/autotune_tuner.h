// Measuring candidates and choosing one, robust to noise.
//
// For one key the tuner measures the heuristic default first, then the incumbent (the config the
// cache serves now, if any), then every other candidate of the key's space in declared order.
// Each candidate:
//   1. runs once untimed, and its output is checked against the reference: a candidate with a
//      wrong result (or one that fails to run) is rejected and can never win;
//   2. runs `warmup` more times untimed;
//   3. runs `repeats` times timed, with the harness evicting caches before every timed run (an
//      L2 flush, or rotating to the next of several input sets that together exceed the cache),
//      so a time is not a cache-hot fiction.
// Its measurement is the median of the repeats, and its noise a robust spread: 1.4826 times the
// median absolute deviation (the standard deviation for Gaussian noise, unmoved by outliers).
// A challenger replaces the incumbent only when it is faster by more than the margin
//   max(noise_sigmas * sqrt(noise_inc^2 + noise_ch^2), min_margin * median_inc)
// and, with `confirm`, wins again when both are measured once more in alternation (so a
// transient, such as another process or a clock change during one measurement, cannot flip the
// choice; when the challenger loses that round, the incumbent keeps the fresher measurement).
// Near-ties keep the incumbent: the choice does not drift between runs.
//
// Bounds: the budget is a deadline and cancellation is prompt. Both are checked before every run
// of the kernel (the correctness run, each warm-up and each timed run), not only between
// candidates, so a tune overruns its budget or outlives its cancellation by at most one run. A
// measurement cut by the deadline keeps its timed runs only where they can be trusted: the
// default's or the incumbent's with at least 3 of them (Measurement::samples says how many)
// still serves as the config to beat; a challenger cut short never wins; a confirmation round cut
// short keeps the incumbent.
//
// Determinism: the tuner's only sources of variation are the Timer and the harness. Given a
// Timer that returns the same times (a fake), it makes the same choice on every run. A harness
// that times its own kernels on the device (DeviceSeconds) replaces the Timer's times, not its
// clock (Now, which the budget is counted on).
#ifndef KERNELD_KERNELS_AUTOTUNE_TUNER_H_
#define KERNELD_KERNELS_AUTOTUNE_TUNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/autotune_key.h"
#include "kerneld/kernels/autotune_space.h"
#include "kerneld/kernels/tune_harness.h"

namespace kd {

// TuneHarness, what a backend provides to tune one kernel for one key: tune_harness.h.

// The tuner's clock. A test fakes it to make measurements exactly reproducible.
class Timer {
 public:
  virtual ~Timer() = default;
  // Seconds one call of `run` takes (a GPU timer uses events on the stream). `config` says what
  // runs, for timers that fake by config. The error of `run` is returned as is.
  virtual absl::StatusOr<double> Time(absl::string_view config,
                                      const std::function<absl::Status()>& run) = 0;
  // Seconds since an arbitrary origin; the per-shape budget is counted on it.
  virtual double Now() = 0;
};

// Wall-clock timer on std::chrono::steady_clock, for the CPU backend.
class WallTimer : public Timer {
 public:
  absl::StatusOr<double> Time(absl::string_view config,
                              const std::function<absl::Status()>& run) override;
  double Now() override;
};

struct TuneOptions {
  int warmup = 2;
  int repeats = 15;  // at least 3 (a median and a spread need them)
  double noise_sigmas = 3.0;
  double min_margin = 0.02;  // a challenger must win by at least 2% of the incumbent's median
  bool confirm = true;
  // Per shape, on Timer::Now(): a deadline, checked before every run (see "Bounds" above).
  // 0: no limit.
  double budget_seconds = 0;
  // Challengers beyond this many are not tried. 0: no limit.
  int max_candidates = 0;
};

struct Measurement {
  double median = 0;  // seconds
  double noise = 0;   // robust standard deviation, seconds
  double min = 0;
  int samples = 0;
};

struct CandidateResult {
  std::string config;
  // OK, or why it was rejected: failed to run, wrong output, or DEADLINE_EXCEEDED when the
  // budget cut its measurement short (see "Bounds" above).
  absl::Status status;
  Measurement measured;  // valid when status is OK
};

// When one Tune() call ran the harness's kernel, on Timer::Now() relative to the tune's start.
// Tune() fills it whether it succeeds or fails (cancelled, out of budget), so that a caller can
// check that the budget was a deadline: a run starts only while the clock reads less than
// budget_seconds, so last_run_start_seconds < budget_seconds whenever both are set.
struct TuneTimeline {
  double budget_seconds = 0;          // TuneOptions::budget_seconds; 0: no deadline
  int kernel_runs = 0;                // runs started: correctness, warm-up and timed
  double last_run_start_seconds = 0;  // when the last of them started (0 with none)
  double last_run_end_seconds = 0;    // when it returned
  double end_seconds = 0;             // when Tune() returned
};

struct TuneResult {
  TuneKey key;
  std::string config;            // the choice
  Measurement measured;          // of the choice
  std::string default_config;    // the heuristic default
  Measurement default_measured;  // samples == 0 when the default was rejected
  std::string incumbent;         // the incumbent the tuner started from ("" = the default)
  bool replaced_incumbent = false;
  bool budget_exhausted = false;
  std::vector<CandidateResult> candidates;  // in the order measured
  double elapsed_seconds = 0;               // on Timer::Now()
};

// Median and robust noise of `samples` (need not be sorted). Zero for an empty vector.
Measurement Summarize(std::vector<double> samples);

// True when `challenger` beats `incumbent` by more than the noise margin of `options`.
bool Beats(const Measurement& challenger, const Measurement& incumbent, const TuneOptions& options);

// Polled before every run of a kernel during a tune; true stops the tune. Must be cheap and
// thread-safe (it reads a flag another thread sets). Empty: never cancelled.
using CancelFn = std::function<bool()>;

// Tunes `key` as described above. `incumbent` is the config served now ("" when none; a config
// that fails the key's parse contract is ignored). NOT_FOUND when the key has no space;
// INVALID_ARGUMENT for options out of range; FAILED_PRECONDITION when no candidate, the default
// included, produced a correct result; CANCELLED once `cancelled` returns true (nothing of the
// tune is returned); DEADLINE_EXCEEDED when the budget ran out before the default (or the
// incumbent) had 3 timed runs. `timeline` (may be null) receives the tune's runs, whatever the
// outcome; it stays untouched when the options or the key are refused before any run.
absl::StatusOr<TuneResult> Tune(const TuneKey& key, const ConfigSpaceRegistry& spaces,
                                TuneHarness& harness, Timer& timer, const TuneOptions& options,
                                absl::string_view incumbent = "", const CancelFn& cancelled = {},
                                TuneTimeline* timeline = nullptr);

}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_TUNER_H_
