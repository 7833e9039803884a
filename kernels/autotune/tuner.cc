#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "kerneld/kernels/autotune_tuner.h"

namespace kd {
namespace {

// Median-absolute-deviation to standard deviation, for Gaussian noise.
constexpr double kMadToSigma = 1.4826;

double MedianOfSorted(const std::vector<double>& v) {
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

absl::Status CheckOptions(const TuneOptions& o) {
  if (o.repeats < 3) {
    return absl::InvalidArgumentError(absl::StrCat("repeats=", o.repeats, " must be >= 3"));
  }
  if (o.warmup < 0) {
    return absl::InvalidArgumentError(absl::StrCat("warmup=", o.warmup, " must be >= 0"));
  }
  if (!(o.noise_sigmas >= 0) || !(o.min_margin >= 0)) {
    return absl::InvalidArgumentError("noise_sigmas and min_margin must be >= 0");
  }
  if (!(o.budget_seconds >= 0) || o.max_candidates < 0) {
    return absl::InvalidArgumentError("budget_seconds and max_candidates must be >= 0");
  }
  return absl::OkStatus();
}

// The fewest timed runs a median and a spread are taken from (TuneOptions::repeats' minimum).
constexpr int kMinSamples = 3;

class Measurer {
 public:
  Measurer(TuneHarness& harness, Timer& timer, const TuneOptions& options,
           const CancelFn& cancelled, double start, double deadline, TuneTimeline& timeline)
      : harness_(harness),
        timer_(timer),
        options_(options),
        cancelled_(cancelled),
        start_(start),
        deadline_(deadline),
        timeline_(timeline) {}

  // Correctness first, then warm-up, then the timed repeats. A measurement the deadline cuts
  // has status DEADLINE_EXCEEDED and the timed runs made so far in `measured`.
  CandidateResult Measure(const std::string& config) {
    CandidateResult r;
    r.config = config;
    r.status = RunUntimed(config);
    if (r.status.ok()) r.status = harness_.CheckOutput();
    for (int i = 0; r.status.ok() && i < options_.warmup; ++i) r.status = RunUntimed(config);
    if (!r.status.ok()) return r;
    std::vector<double> samples;
    for (int i = 0; i < options_.repeats; ++i) {
      absl::StatusOr<double> t = TimeOnce(config, i);
      if (!t.ok()) {
        r.status = t.status();
        break;
      }
      samples.push_back(*t);
    }
    r.measured = Summarize(std::move(samples));
    return r;
  }

  // Both configs once more, alternating run by run, so that a slow phase of the machine hits
  // both alike. Returns {incumbent, challenger}, or the first error (DEADLINE_EXCEEDED or
  // CANCELLED included: a round cut short decides nothing).
  absl::StatusOr<std::pair<Measurement, Measurement>> MeasurePair(const std::string& inc,
                                                                  const std::string& ch) {
    std::vector<double> a, b;
    for (int i = 0; i < options_.repeats; ++i) {
      absl::StatusOr<double> ta = TimeOnce(inc, i);
      if (!ta.ok()) return ta.status();
      absl::StatusOr<double> tb = TimeOnce(ch, i);
      if (!tb.ok()) return tb.status();
      a.push_back(*ta);
      b.push_back(*tb);
    }
    return std::make_pair(Summarize(std::move(a)), Summarize(std::move(b)));
  }

  bool cancelled() const { return cancelled_ && cancelled_(); }
  bool past_deadline() { return deadline_ > 0 && timer_.Now() >= deadline_; }

 private:
  // Whether the next run may start, decided on one reading of the clock, which is also the
  // run's start in the timeline: CANCELLED or DEADLINE_EXCEEDED (naming how far `config` got)
  // when not. Every run of the kernel passes here.
  absl::Status Admit(const std::string& config, int timed_runs) {
    if (cancelled()) return absl::CancelledError("the tune was cancelled");
    const double now = timer_.Now();
    if (deadline_ > 0 && now >= deadline_) {
      return absl::DeadlineExceededError(
          absl::StrCat("budget_seconds=", options_.budget_seconds, " ran out while measuring ",
                       config, " (", timed_runs, " of ", options_.repeats, " timed runs)"));
    }
    ++timeline_.kernel_runs;
    timeline_.last_run_start_seconds = now - start_;
    return absl::OkStatus();
  }

  void Ended() { timeline_.last_run_end_seconds = timer_.Now() - start_; }

  // A correctness or warm-up run (before any timed one, hence "0 of N timed runs").
  absl::Status RunUntimed(const std::string& config) {
    const absl::Status admitted = Admit(config, 0);
    if (!admitted.ok()) return admitted;
    const absl::Status s = harness_.Run(config);
    Ended();
    return s;
  }

  absl::StatusOr<double> TimeOnce(const std::string& config, int timed_runs) {
    const absl::Status admitted = Admit(config, timed_runs);
    if (!admitted.ok()) return admitted;
    harness_.EvictCaches();
    absl::StatusOr<double> t = timer_.Time(config, [&] { return harness_.Run(config); });
    Ended();
    if (!t.ok()) return t;
    if (const std::optional<double> device = harness_.DeviceSeconds()) return *device;
    return t;
  }

  TuneHarness& harness_;
  Timer& timer_;
  const TuneOptions& options_;
  const CancelFn& cancelled_;
  const double start_;     // on Timer::Now()
  const double deadline_;  // on Timer::Now(); 0: none
  TuneTimeline& timeline_;
};

// A measurement cut by the deadline still serves as the config to beat when it has enough
// timed runs to give a median and a spread.
void KeepIfUsable(CandidateResult& r) {
  if (absl::IsDeadlineExceeded(r.status) && r.measured.samples >= kMinSamples) {
    r.status = absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<double> WallTimer::Time(absl::string_view,
                                       const std::function<absl::Status()>& run) {
  const auto start = std::chrono::steady_clock::now();
  const absl::Status s = run();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (!s.ok()) return s;
  return elapsed.count();
}

double WallTimer::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Measurement Summarize(std::vector<double> samples) {
  Measurement m;
  if (samples.empty()) return m;
  std::sort(samples.begin(), samples.end());
  m.samples = static_cast<int>(samples.size());
  m.min = samples.front();
  m.median = MedianOfSorted(samples);
  std::vector<double> dev;
  dev.reserve(samples.size());
  for (double s : samples) dev.push_back(std::fabs(s - m.median));
  std::sort(dev.begin(), dev.end());
  m.noise = kMadToSigma * MedianOfSorted(dev);
  return m;
}

bool Beats(const Measurement& challenger, const Measurement& incumbent,
           const TuneOptions& options) {
  const double noise =
      std::sqrt(incumbent.noise * incumbent.noise + challenger.noise * challenger.noise);
  const double margin =
      std::max(options.noise_sigmas * noise, options.min_margin * incumbent.median);
  return incumbent.median - challenger.median > margin;
}

absl::StatusOr<TuneResult> Tune(const TuneKey& key, const ConfigSpaceRegistry& spaces,
                                TuneHarness& harness, Timer& timer, const TuneOptions& options,
                                absl::string_view incumbent, const CancelFn& cancelled,
                                TuneTimeline* timeline) {
  const absl::Status options_ok = CheckOptions(options);
  if (!options_ok.ok()) return options_ok;
  const ConfigSpace* space = spaces.Find(key);
  if (space == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no config space for ", key.op, " ", key.variant, " on ", key.arch));
  }
  absl::StatusOr<std::vector<std::string>> candidates = spaces.Candidates(key);
  if (!candidates.ok()) return candidates.status();

  TuneResult result;
  result.key = key;
  result.default_config = space->heuristic(key);
  if (!incumbent.empty() && incumbent != result.default_config && space->resolve(incumbent).ok()) {
    result.incumbent = std::string(incumbent);
  }
  const double start = timer.Now();
  const double deadline = options.budget_seconds > 0 ? start + options.budget_seconds : 0;
  TuneTimeline local_timeline;
  TuneTimeline& runs = timeline != nullptr ? *timeline : local_timeline;
  runs = TuneTimeline();
  runs.budget_seconds = options.budget_seconds;
  absl::Cleanup stamp_end = [&] { runs.end_seconds = timer.Now() - start; };
  Measurer measurer(harness, timer, options, cancelled, start, deadline, runs);
  const absl::Status cancelled_status = absl::CancelledError(
      absl::StrCat("tuning ", key.ToString(), " was cancelled; nothing was stored"));

  // The config to beat, with its measurement.
  std::optional<CandidateResult> best;
  auto challenge = [&](CandidateResult c) {
    result.candidates.push_back(c);
    if (!c.status.ok()) return;
    if (!best.has_value()) {
      best = std::move(c);
      return;
    }
    if (!Beats(c.measured, best->measured, options)) return;
    if (options.confirm) {
      auto pair = measurer.MeasurePair(best->config, c.config);
      if (!pair.ok()) {
        result.candidates.back().status = pair.status();
        return;
      }
      if (!Beats(pair->second, pair->first, options)) {
        best->measured = pair->first;  // the fresher measurement of the incumbent
        return;
      }
      c.measured = pair->second;
    }
    best = std::move(c);
  };

  CandidateResult def = measurer.Measure(result.default_config);
  KeepIfUsable(def);
  const absl::Status default_status = def.status;
  if (def.status.ok()) result.default_measured = def.measured;
  if (!result.incumbent.empty()) {
    // The incumbent is the one to beat; the default challenges it like any other config.
    CandidateResult inc = measurer.Measure(result.incumbent);
    KeepIfUsable(inc);
    result.candidates.push_back(inc);
    if (inc.status.ok()) best = std::move(inc);
  }
  challenge(std::move(def));

  int challengers = 0;
  for (const std::string& config : *candidates) {
    if (measurer.cancelled()) break;
    if (config == result.default_config || config == result.incumbent) continue;
    if (options.max_candidates > 0 && challengers >= options.max_candidates) break;
    if (measurer.past_deadline()) {
      result.budget_exhausted = true;
      break;
    }
    ++challengers;
    challenge(measurer.Measure(config));
  }
  if (measurer.cancelled()) return cancelled_status;
  for (const CandidateResult& c : result.candidates) {
    if (absl::IsDeadlineExceeded(c.status)) result.budget_exhausted = true;
  }
  if (absl::IsDeadlineExceeded(default_status)) result.budget_exhausted = true;

  result.elapsed_seconds = timer.Now() - start;
  if (!best.has_value()) {
    if (absl::IsDeadlineExceeded(default_status)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no config of ", key.ToString(), " could be measured within the budget (at least ",
          kMinSamples, " timed runs are needed): ", default_status.message()));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "no candidate for ", key.ToString(), " produced a correct result; the default ",
        result.default_config, " failed with: ", default_status.ToString()));
  }
  result.config = best->config;
  result.measured = best->measured;
  const std::string& start_config =
      result.incumbent.empty() ? result.default_config : result.incumbent;
  result.replaced_incumbent = result.config != start_config;
  return result;
}

}  // namespace kd
