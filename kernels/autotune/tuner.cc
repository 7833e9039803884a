#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

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

class Measurer {
 public:
  Measurer(TuneHarness& harness, Timer& timer, const TuneOptions& options)
      : harness_(harness), timer_(timer), options_(options) {}

  // Correctness first, then warm-up, then the timed repeats.
  CandidateResult Measure(const std::string& config) {
    CandidateResult r;
    r.config = config;
    r.status = harness_.Run(config);
    if (r.status.ok()) r.status = harness_.CheckOutput();
    for (int i = 0; r.status.ok() && i < options_.warmup; ++i) r.status = harness_.Run(config);
    if (!r.status.ok()) return r;
    std::vector<double> samples;
    for (int i = 0; i < options_.repeats; ++i) {
      absl::StatusOr<double> t = TimeOnce(config);
      if (!t.ok()) {
        r.status = t.status();
        return r;
      }
      samples.push_back(*t);
    }
    r.measured = Summarize(std::move(samples));
    return r;
  }

  // Both configs once more, alternating run by run, so that a slow phase of the machine hits
  // both alike. Returns {incumbent, challenger}, or the first error.
  absl::StatusOr<std::pair<Measurement, Measurement>> MeasurePair(const std::string& inc,
                                                                  const std::string& ch) {
    std::vector<double> a, b;
    for (int i = 0; i < options_.repeats; ++i) {
      absl::StatusOr<double> ta = TimeOnce(inc);
      if (!ta.ok()) return ta.status();
      absl::StatusOr<double> tb = TimeOnce(ch);
      if (!tb.ok()) return tb.status();
      a.push_back(*ta);
      b.push_back(*tb);
    }
    return std::make_pair(Summarize(std::move(a)), Summarize(std::move(b)));
  }

 private:
  absl::StatusOr<double> TimeOnce(const std::string& config) {
    harness_.EvictCaches();
    absl::StatusOr<double> t = timer_.Time(config, [&] { return harness_.Run(config); });
    if (!t.ok()) return t;
    if (const std::optional<double> device = harness_.DeviceSeconds()) return *device;
    return t;
  }

  TuneHarness& harness_;
  Timer& timer_;
  const TuneOptions& options_;
};

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
                                absl::string_view incumbent) {
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
  Measurer measurer(harness, timer, options);
  const double start = timer.Now();

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
  const absl::Status default_status = def.status;
  if (def.status.ok()) result.default_measured = def.measured;
  if (!result.incumbent.empty()) {
    // The incumbent is the one to beat; the default challenges it like any other config.
    CandidateResult inc = measurer.Measure(result.incumbent);
    result.candidates.push_back(inc);
    if (inc.status.ok()) best = std::move(inc);
  }
  challenge(std::move(def));

  int challengers = 0;
  for (const std::string& config : *candidates) {
    if (config == result.default_config || config == result.incumbent) continue;
    if (options.max_candidates > 0 && challengers >= options.max_candidates) break;
    if (options.budget_seconds > 0 && timer.Now() - start >= options.budget_seconds) {
      result.budget_exhausted = true;
      break;
    }
    ++challengers;
    challenge(measurer.Measure(config));
  }

  result.elapsed_seconds = timer.Now() - start;
  if (!best.has_value()) {
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
