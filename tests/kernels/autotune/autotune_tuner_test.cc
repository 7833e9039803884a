#include "kerneld/kernels/autotune_tuner.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>

#include "gtest/gtest.h"
#include "kernels/cpu/gemm_harness.h"

namespace kd {
namespace {

DeviceProperties Cpu() {
  DeviceProperties p;
  p.name = "cpu (test)";
  p.arch = "x86_64";
  return p;
}

const ConfigSpaceRegistry& Spaces() { return ConfigSpaceRegistry::Builtin(); }

TuneKey CpuKey(int64_t m = 64, int64_t n = 256, int64_t k = 256) {
  return MakeGemmTuneKey(GemmVariant::kNT, DType::kE4M3FN, DType::kBF16, m, n, k, 1, Cpu(),
                         Spaces().Find("gemm", "nt", "x86_64")->kernel_version);
}

// A timer whose times are a fixed base per config times a deterministic jitter in
// [1 - jitter, 1 + jitter] (a hash of the config and the call count), optionally slowed by
// `spike` for the first `spike_calls` calls of one config. It really runs the kernel, so the
// harness's output checks are real; only the clock is fake.
class FakeTimer : public Timer {
 public:
  FakeTimer(std::map<std::string, double> base, double jitter)
      : base_(std::move(base)), jitter_(jitter) {}

  void Spike(const std::string& config, int calls, double factor) {
    spike_config_ = config;
    spike_calls_ = calls;
    spike_factor_ = factor;
  }

  absl::StatusOr<double> Time(absl::string_view config,
                              const std::function<absl::Status()>& run) override {
    const absl::Status s = run();
    if (!s.ok()) return s;
    const std::string c(config);
    const int call = calls_[c]++;
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the config and the call index
    for (char ch : c) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
    h = (h ^ static_cast<uint64_t>(call)) * 1099511628211ull;
    h ^= h >> 29;
    const double u = static_cast<double>(h % 2000001) / 1000000.0 - 1.0;  // [-1, 1]
    auto it = base_.find(c);
    double t = (it == base_.end() ? 1e-3 : it->second) * (1.0 + jitter_ * u);
    if (c == spike_config_ && call < spike_calls_) t *= spike_factor_;
    now_ += t;
    return t;
  }
  double Now() override { return now_; }

 private:
  std::map<std::string, double> base_;
  double jitter_;
  std::map<std::string, int> calls_;
  double now_ = 0;
  std::string spike_config_;
  int spike_calls_ = 0;
  double spike_factor_ = 1;
};

std::unique_ptr<TuneHarness> Harness(const TuneKey& key, CpuGemmHarnessOptions options = {}) {
  options.threads = 2;
  options.rotate_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<TuneHarness>> h = CreateCpuGemmHarness(key, options);
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? *std::move(h) : nullptr;
}

TuneOptions Fast() {
  TuneOptions o;
  o.warmup = 1;
  o.repeats = 7;
  return o;
}

TEST(SummarizeTest, MedianAndRobustNoiseIgnoreAnOutlier) {
  const Measurement m = Summarize({1.0, 1.1, 0.9, 1.0, 50.0});
  EXPECT_DOUBLE_EQ(m.median, 1.0);
  EXPECT_DOUBLE_EQ(m.min, 0.9);
  EXPECT_NEAR(m.noise, 1.4826 * 0.1, 1e-12);
  EXPECT_EQ(m.samples, 5);
  EXPECT_DOUBLE_EQ(Summarize({1.0, 2.0, 3.0, 4.0}).median, 2.5);
}

TEST(BeatsTest, AChallengerMustWinByMoreThanNoiseAndTheMinimumMargin) {
  TuneOptions o;
  o.noise_sigmas = 3;
  o.min_margin = 0.02;
  Measurement inc{1.0, 0.01, 0.99, 9};
  EXPECT_FALSE(Beats({0.985, 0.0, 0.98, 9}, inc, o));  // 1.5% < 2% minimum
  EXPECT_TRUE(Beats({0.95, 0.0, 0.95, 9}, inc, o));    // 5% > max(3%, 2%)
  EXPECT_FALSE(Beats({0.95, 0.02, 0.9, 9}, inc, o));   // 5% < 3 * sqrt(.01^2 + .02^2)
}

TEST(TunerTest, ClearWinnerIsChosenAndItsOutputWasChecked) {
  const TuneKey key = CpuKey();
  auto harness = Harness(key);
  FakeTimer timer(
      {{"tn16", 2e-3}, {"tn32", 1.5e-3}, {"tn64", 1e-3}, {"tn128", 0.5e-3}, {"tn256", 0.8e-3}},
      0.02);
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, Fast());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->default_config, "tn64");
  EXPECT_EQ(r->config, "tn128");
  EXPECT_TRUE(r->replaced_incumbent);
  EXPECT_NEAR(r->measured.median, 0.5e-3, 0.02 * 0.5e-3);
  EXPECT_NEAR(r->default_measured.median, 1e-3, 0.02e-3);
  EXPECT_EQ(r->candidates.size(), 5u);
  for (const CandidateResult& c : r->candidates) EXPECT_TRUE(c.status.ok()) << c.config;
}

// A harness that times its own kernels (as the CUDA one does with events) reports device seconds;
// the tuner ranks by those, not by the Timer's measurement of the whole Run.
class DeviceTimedHarness : public TuneHarness {
 public:
  DeviceTimedHarness(std::unique_ptr<TuneHarness> inner, std::map<std::string, double> device)
      : inner_(std::move(inner)), device_(std::move(device)) {}
  absl::Status Run(absl::string_view config) override {
    last_ = device_.at(std::string(config));
    return inner_->Run(config);
  }
  absl::Status CheckOutput() override { return inner_->CheckOutput(); }
  void EvictCaches() override { inner_->EvictCaches(); }
  std::optional<double> DeviceSeconds() const override { return last_; }

 private:
  std::unique_ptr<TuneHarness> inner_;
  std::map<std::string, double> device_;
  double last_ = 0;
};

TEST(TunerTest, DeviceTimesOfTheHarnessReplaceTheTimersTimes) {
  const TuneKey key = CpuKey();
  DeviceTimedHarness harness(
      Harness(key),
      {{"tn16", 1e-3}, {"tn32", 1e-3}, {"tn64", 1e-3}, {"tn128", 1e-3}, {"tn256", 0.25e-3}});
  // The wall clock says tn128 wins; the device says tn256.
  FakeTimer timer(
      {{"tn16", 2e-3}, {"tn32", 2e-3}, {"tn64", 2e-3}, {"tn128", 0.1e-3}, {"tn256", 2e-3}}, 0.0);
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), harness, timer, Fast());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->config, "tn256");
  EXPECT_DOUBLE_EQ(r->measured.median, 0.25e-3);
  EXPECT_DOUBLE_EQ(r->default_measured.median, 1e-3);
}

TEST(TunerTest, SameInputsGiveTheSameChoiceRunAfterRun) {
  const TuneKey key = CpuKey();
  // Three configs within 3% of each other under 5% jitter: a naive "fastest median" would flip
  // with the noise; the tuner must give one answer every time.
  const std::map<std::string, double> base = {
      {"tn16", 1.02e-3}, {"tn32", 0.99e-3}, {"tn64", 1e-3}, {"tn128", 0.97e-3}, {"tn256", 2e-3}};
  std::set<std::string> choices;
  for (int run = 0; run < 8; ++run) {
    auto harness = Harness(key);
    FakeTimer timer(base, 0.05);
    absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, Fast());
    ASSERT_TRUE(r.ok()) << r.status();
    choices.insert(r->config);
  }
  EXPECT_EQ(choices.size(), 1u);
  EXPECT_EQ(*choices.begin(), "tn64");  // nobody beat the default by more than the noise
}

TEST(TunerTest, NearTieKeepsTheIncumbent) {
  const TuneKey key = CpuKey();
  auto harness = Harness(key);
  // tn32 is 1% faster than the incumbent tn128, under the 2% minimum margin; tn64 (the
  // default) is 5% slower.
  FakeTimer timer(
      {{"tn16", 3e-3}, {"tn32", 0.99e-3}, {"tn64", 1.05e-3}, {"tn128", 1e-3}, {"tn256", 3e-3}},
      0.0);
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, Fast(), "tn128");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->incumbent, "tn128");
  EXPECT_EQ(r->config, "tn128");
  EXPECT_FALSE(r->replaced_incumbent);
}

TEST(TunerTest, WinsSmallerThanTheMeasuredNoiseDoNotReplaceTheIncumbent) {
  const TuneKey key = CpuKey();
  // 20% jitter: robust sigma about 12%, margin 3 * sqrt(2) * 12% = 50%. A 30% faster config is
  // inside the noise; a 4x faster one is not.
  for (const auto& [fast, want] : {std::pair<double, const char*>{0.7e-3, "tn64"},
                                   std::pair<double, const char*>{0.25e-3, "tn32"}}) {
    auto harness = Harness(key);
    FakeTimer timer(
        {{"tn16", 1e-3}, {"tn32", fast}, {"tn64", 1e-3}, {"tn128", 1e-3}, {"tn256", 1e-3}}, 0.2);
    absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, Fast());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->config, want) << "tn32 at " << fast;
  }
}

TEST(TunerTest, ACandidateWithAWrongResultNeverWinsHoweverFast) {
  const TuneKey key = CpuKey();
  CpuGemmHarnessOptions options;
  options.after_run = [](absl::string_view config, const Tensor& d) {
    if (config == "tn32") d.as<uint16_t>()[7] ^= 0x0100;  // a faulty kernel
  };
  auto harness = Harness(key, options);
  FakeTimer timer(
      {{"tn16", 1e-3}, {"tn32", 0.1e-3}, {"tn64", 1e-3}, {"tn128", 0.9e-3}, {"tn256", 1e-3}}, 0.0);
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, Fast());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->config, "tn128");
  bool saw = false;
  for (const CandidateResult& c : r->candidates) {
    if (c.config != "tn32") continue;
    saw = true;
    EXPECT_EQ(c.status.code(), absl::StatusCode::kInternal);
    EXPECT_NE(c.status.message().find("d[0][7]"), absl::string_view::npos) << c.status;
  }
  EXPECT_TRUE(saw);
}

TEST(TunerTest, AllCandidatesWrongIsFailedPrecondition) {
  const TuneKey key = CpuKey();
  CpuGemmHarnessOptions options;
  options.after_run = [](absl::string_view, const Tensor& d) { d.as<uint16_t>()[0] ^= 1; };
  auto harness = Harness(key, options);
  FakeTimer timer({}, 0.0);
  EXPECT_EQ(Tune(key, Spaces(), *harness, timer, Fast()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(TunerTest, ConfirmationRoundRejectsAWinFromATransient) {
  const TuneKey key = CpuKey();
  const std::map<std::string, double> base = {
      {"tn16", 1e-3}, {"tn32", 1e-3}, {"tn64", 1e-3}, {"tn128", 1e-3}, {"tn256", 1e-3}};
  TuneOptions options = Fast();
  for (bool confirm : {true, false}) {
    options.confirm = confirm;
    auto harness = Harness(key);
    FakeTimer timer(base, 0.01);
    timer.Spike("tn64", options.repeats, 3.0);  // the machine was busy while the default ran
    absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, options);
    ASSERT_TRUE(r.ok()) << r.status();
    if (confirm) {
      EXPECT_EQ(r->config, "tn64");
    } else {
      EXPECT_NE(r->config, "tn64");  // what an unconfirmed tuner would have picked
    }
  }
}

TEST(TunerTest, BudgetIsADeadlineThatCutsTheMeasurementInFlight) {
  const TuneKey key = CpuKey();
  auto harness = Harness(key);
  FakeTimer timer({{"tn16", 1.0}, {"tn32", 1.0}, {"tn64", 1.0}, {"tn128", 1.0}, {"tn256", 1.0}},
                  0.0);
  TuneOptions options = Fast();
  options.budget_seconds = 10;  // one measurement is 7 fake seconds
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->budget_exhausted);
  // The default (7 s), then a challenger cut after 3 of its 7 timed runs: not a winner.
  ASSERT_EQ(r->candidates.size(), 2u);
  EXPECT_EQ(r->candidates[1].status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r->candidates[1].measured.samples, 3);
  EXPECT_EQ(r->config, "tn64");
  EXPECT_DOUBLE_EQ(r->elapsed_seconds, 10.0);

  options.budget_seconds = 0;
  options.max_candidates = 1;
  auto harness2 = Harness(key);
  FakeTimer timer2({}, 0.0);
  r = Tune(key, Spaces(), *harness2, timer2, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->candidates.size(), 2u);
  EXPECT_FALSE(r->budget_exhausted);
}

TEST(TunerTest, ADefaultCutWithThreeRunsIsKeptAndWithFewerTheKeyFails) {
  const TuneKey key = CpuKey();
  TuneOptions options = Fast();
  // 4 of the default's 7 timed runs fit: its partial median stands, nothing else is tried.
  auto harness = Harness(key);
  FakeTimer timer({{"tn64", 1.0}}, 0.0);
  options.budget_seconds = 4;
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->budget_exhausted);
  EXPECT_EQ(r->config, "tn64");
  EXPECT_EQ(r->measured.samples, 4);
  EXPECT_EQ(r->default_measured.samples, 4);
  EXPECT_DOUBLE_EQ(r->elapsed_seconds, 4.0);

  // 2 runs are no median with a spread: the key fails, and says so.
  auto harness2 = Harness(key);
  FakeTimer timer2({{"tn64", 1.0}}, 0.0);
  options.budget_seconds = 2;
  r = Tune(key, Spaces(), *harness2, timer2, options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("2 of 7 timed runs"), std::string::npos) << r.status();
  EXPECT_DOUBLE_EQ(timer2.Now(), 2.0);
}

// Counts the harness's runs (what the daemon's kerneld_autotune_kernel_runs_total counts).
class CountingHarness : public TuneHarness {
 public:
  explicit CountingHarness(std::unique_ptr<TuneHarness> inner) : inner_(std::move(inner)) {}
  absl::Status Run(absl::string_view config) override {
    ++runs_;
    return inner_->Run(config);
  }
  absl::Status CheckOutput() override { return inner_->CheckOutput(); }
  void EvictCaches() override { inner_->EvictCaches(); }
  int runs() const { return runs_; }

 private:
  std::unique_ptr<TuneHarness> inner_;
  int runs_ = 0;
};

TEST(TunerTest, TheTimelineHoldsEveryRunAndEachStartedBeforeTheDeadline) {
  const TuneKey key = CpuKey();
  TuneOptions options = Fast();
  options.budget_seconds = 10;  // one measurement is 7 fake seconds; untimed runs take none
  CountingHarness harness(Harness(key));
  FakeTimer timer({{"tn16", 1.0}, {"tn32", 1.0}, {"tn64", 1.0}, {"tn128", 1.0}, {"tn256", 1.0}},
                  0.0);
  TuneTimeline timeline;
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), harness, timer, options, "", {}, &timeline);
  ASSERT_TRUE(r.ok()) << r.status();
  // The default's 2 untimed and 7 timed runs, then a challenger's 2 untimed and 3 timed: the
  // last of those starts at 9 s, and the one after it would have started at the deadline.
  EXPECT_EQ(timeline.kernel_runs, 14);
  EXPECT_EQ(timeline.kernel_runs, harness.runs());
  EXPECT_DOUBLE_EQ(timeline.budget_seconds, 10.0);
  EXPECT_DOUBLE_EQ(timeline.last_run_start_seconds, 9.0);
  EXPECT_DOUBLE_EQ(timeline.last_run_end_seconds, 10.0);
  EXPECT_DOUBLE_EQ(timeline.end_seconds, 10.0);

  // A key that fails on its deadline has its timeline too: 2 untimed runs and 2 timed ones.
  options.budget_seconds = 2;
  CountingHarness harness2(Harness(key));
  FakeTimer timer2({{"tn64", 1.0}}, 0.0);
  r = Tune(key, Spaces(), harness2, timer2, options, "", {}, &timeline);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_EQ(timeline.kernel_runs, 4);
  EXPECT_EQ(timeline.kernel_runs, harness2.runs());
  EXPECT_DOUBLE_EQ(timeline.last_run_start_seconds, 1.0);
  EXPECT_DOUBLE_EQ(timeline.end_seconds, 2.0);
}

// Counts the harness's runs and cancels the tune after a given number of them.
class CancelAfterRuns : public TuneHarness {
 public:
  CancelAfterRuns(std::unique_ptr<TuneHarness> inner, int runs, std::atomic<bool>* flag)
      : inner_(std::move(inner)), runs_left_(runs), flag_(flag) {}
  absl::Status Run(absl::string_view config) override {
    ++runs_;
    if (--runs_left_ == 0) flag_->store(true);
    return inner_->Run(config);
  }
  absl::Status CheckOutput() override { return inner_->CheckOutput(); }
  void EvictCaches() override { inner_->EvictCaches(); }
  int runs() const { return runs_; }

 private:
  std::unique_ptr<TuneHarness> inner_;
  int runs_left_;
  std::atomic<bool>* flag_;
  int runs_ = 0;
};

TEST(TunerTest, CancellationStopsInsideTheDefaultsMeasurement) {
  const TuneKey key = CpuKey();
  std::atomic<bool> cancel{false};
  // Cancelled during the default's third timed run (1 correctness + 1 warm-up + 3 timed).
  CancelAfterRuns harness(Harness(key), 5, &cancel);
  FakeTimer timer({}, 0.0);
  TuneTimeline timeline;
  absl::StatusOr<TuneResult> r = Tune(
      key, Spaces(), harness, timer, Fast(), "", [&] { return cancel.load(); }, &timeline);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(harness.runs(), 5);  // the run in flight finished; no other started
  EXPECT_EQ(timeline.kernel_runs, 5);
}

TEST(TunerTest, AnUnparsableIncumbentIsIgnored) {
  const TuneKey key = CpuKey();
  auto harness = Harness(key);
  FakeTimer timer({}, 0.0);
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, Fast(), "bm128");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->incumbent, "");
  EXPECT_EQ(r->config, "tn64");
}

TEST(TunerTest, BadOptionsAndUnknownSpacesAreRefused) {
  const TuneKey key = CpuKey();
  auto harness = Harness(key);
  FakeTimer timer({}, 0.0);
  TuneOptions options;
  options.repeats = 2;
  EXPECT_EQ(Tune(key, Spaces(), *harness, timer, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  TuneKey nn = key;
  nn.variant = "nn";
  EXPECT_EQ(Tune(nn, Spaces(), *harness, timer, Fast()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TunerTest, RealWallClockTuneOnTheCpuPicksACorrectCandidate) {
  const TuneKey key = CpuKey(128, 512, 512);
  auto harness = Harness(key);
  WallTimer timer;
  TuneOptions options;
  options.warmup = 1;
  options.repeats = 5;
  absl::StatusOr<TuneResult> r = Tune(key, Spaces(), *harness, timer, options);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::vector<std::string>> candidates = Spaces().Candidates(key);
  ASSERT_TRUE(candidates.ok());
  EXPECT_NE(std::find(candidates->begin(), candidates->end(), r->config), candidates->end());
  EXPECT_EQ(r->default_measured.samples, 5);
  EXPECT_GT(r->measured.median, 0);
}

TEST(CpuGemmHarnessTest, EvictCachesRotatesToOtherInputs) {
  const TuneKey key = CpuKey();
  std::vector<std::vector<uint8_t>> outputs;
  CpuGemmHarnessOptions options;
  options.after_run = [&](absl::string_view, const Tensor& d) {
    const auto* p = d.as<const uint8_t>();
    outputs.emplace_back(p, p + d.numel() * 2);
  };
  auto harness = Harness(key, options);
  ASSERT_TRUE(harness->Run("tn64").ok());
  ASSERT_TRUE(harness->CheckOutput().ok());
  harness->EvictCaches();
  ASSERT_TRUE(harness->Run("tn16").ok());
  ASSERT_TRUE(harness->CheckOutput().ok());
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_NE(outputs[0], outputs[1]);
  EXPECT_EQ(harness->Run("tn48").code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuGemmHarnessTest, RefusesKeysItCannotRun) {
  TuneKey key = CpuKey();
  key.arch = "sm_90";
  EXPECT_EQ(CreateCpuGemmHarness(key, {}).status().code(), absl::StatusCode::kInvalidArgument);
  key = CpuKey();
  key.k = 200;
  EXPECT_EQ(CreateCpuGemmHarness(key, {}).status().code(), absl::StatusCode::kInvalidArgument);
  key = CpuKey();
  key.dtypes = "bf16.bf16>bf16";
  EXPECT_EQ(CreateCpuGemmHarness(key, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kd
