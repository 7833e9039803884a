#include "kerneld/kernels/autotune_runner.h"

#include <atomic>
#include <map>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/autotune.h"
#include "kernels/cpu/gemm_harness.h"

namespace kd {
namespace {

const ConfigSpaceRegistry& Spaces() { return ConfigSpaceRegistry::Builtin(); }

// The typed CPU GEMM config "tn<tile_n>" resolves to.
CpuGemmConfig Tile(int64_t tile_n) {
  CpuGemmConfig c;
  c.tile_n = tile_n;
  return c;
}

DeviceProperties Cpu() {
  DeviceProperties p;
  p.name = "cpu (test)";
  p.arch = "x86_64";
  return p;
}

TuneKey Key(int64_t m) {
  return MakeGemmTuneKey(GemmVariant::kNT, DType::kE4M3FN, DType::kBF16, m, 256, 256, 1, Cpu(),
                         Spaces().Find("gemm", "nt", "x86_64")->kernel_version);
}

TuneCacheOptions Options() {
  TuneCacheOptions o;
  o.validators.kerneld_version = "test";
  o.validators.device = Cpu().name;
  o.validators.arch = Cpu().arch;
  o.spaces = &Spaces();
  return o;
}

// Every run of tn128 takes 1 ms of fake time, everything else 2 ms: tn128 always wins.
class Tn128Wins : public Timer {
 public:
  absl::StatusOr<double> Time(absl::string_view config,
                              const std::function<absl::Status()>& run) override {
    const absl::Status s = run();
    if (!s.ok()) return s;
    const double t = config == "tn128" ? 1e-3 : 2e-3;
    now_ += t;
    return t;
  }
  double Now() override { return now_; }

 private:
  double now_ = 0;
};

HarnessFactory CpuHarnesses() {
  return [](const TuneKey& key) {
    CpuGemmHarnessOptions o;
    o.threads = 1;
    o.rotate_bytes = 1 << 19;
    return CreateCpuGemmHarness(key, o);
  };
}

TuneOptions Fast() {
  TuneOptions o;
  o.warmup = 0;
  o.repeats = 3;
  return o;
}

TEST(TuneKeysTest, TunesStoresAndReportsProgressWithAnEstimate) {
  TuneCache cache(Options());
  ASSERT_TRUE(cache.Pin(Key(3), "tn16").ok());
  Tn128Wins timer;
  std::vector<TuneProgressEvent> events;
  const TuneBatchSummary s =
      TuneKeys({Key(1), Key(2), Key(3), Key(4)}, cache, Spaces(), CpuHarnesses(), timer, Fast(),
               [&](const TuneProgressEvent& e) { events.push_back(e); });
  EXPECT_EQ(s.tuned, 3);
  EXPECT_EQ(s.failed, 1);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[2].status.code(), absl::StatusCode::kFailedPrecondition);  // the pin
  for (int i : {0, 1, 3}) {
    EXPECT_TRUE(events[i].status.ok()) << events[i].status;
    EXPECT_EQ(events[i].result.config, "tn128");
    EXPECT_EQ(events[i].total, 4);
    EXPECT_EQ(cache.Lookup(Key(i + 1)), std::optional<GemmKernelConfig>(Tile(128)));
  }
  EXPECT_GT(events[0].eta_seconds, 0);
  EXPECT_EQ(events[3].eta_seconds, 0);
  EXPECT_EQ(cache.Lookup(Key(3)), std::optional<GemmKernelConfig>(Tile(16)));
  const CacheEntry e = *cache.Get(Key(1));
  EXPECT_DOUBLE_EQ(e.seconds, 1e-3);
  EXPECT_DOUBLE_EQ(e.default_seconds, 2e-3);
}

TEST(TuneKeysTest, CancellationStopsBetweenKeys) {
  TuneCache cache(Options());
  Tn128Wins timer;
  int calls = 0;
  const TuneBatchSummary s = TuneKeys(
      {Key(1), Key(2), Key(3)}, cache, Spaces(), CpuHarnesses(), timer, Fast(),
      [&](const TuneProgressEvent&) { ++calls; }, [&] { return calls >= 1; });
  EXPECT_TRUE(s.cancelled);
  EXPECT_EQ(s.tuned, 1);
  EXPECT_EQ(cache.Stats().entries, 1u);
}

TEST(TuneKeysTest, CancellationInsideAKeyStoresNothingAndEndsTheBatch) {
  TuneCache cache(Options());
  Tn128Wins timer;
  std::vector<TuneProgressEvent> events;
  int polls = 0;
  // The poll before every kernel run: true from the tenth on, inside the first key.
  const TuneBatchSummary s = TuneKeys(
      {Key(1), Key(2)}, cache, Spaces(), CpuHarnesses(), timer, Fast(),
      [&](const TuneProgressEvent& e) { events.push_back(e); }, [&] { return ++polls >= 10; });
  EXPECT_TRUE(s.cancelled);
  EXPECT_EQ(s.tuned, 0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status.code(), absl::StatusCode::kCancelled) << events[0].status;
  EXPECT_EQ(cache.Stats().entries, 0u);
}

// Counts its runs; the first one blocks until the test opens the gate (at most a minute, so
// that a tuner whose Stop() waited for the run fails the test instead of hanging it).
class GatedHarness : public TuneHarness {
 public:
  struct Gate {
    absl::Notification first_run_started;
    absl::Notification open;
    std::atomic<int> runs{0};
    std::atomic<bool> opened_in_time{false};
  };
  explicit GatedHarness(Gate* gate) : gate_(gate) {}
  absl::Status Run(absl::string_view) override {
    if (gate_->runs.fetch_add(1) == 0) {
      gate_->first_run_started.Notify();
      gate_->opened_in_time = gate_->open.WaitForNotificationWithTimeout(absl::Minutes(1));
    }
    return absl::OkStatus();
  }
  absl::Status CheckOutput() override { return absl::OkStatus(); }
  void EvictCaches() override {}

 private:
  Gate* const gate_;
};

// Stop() is what the daemon's shutdown calls (AutotuneManager::Stop) before it destroys the
// tuners: it returns at once, and the key in progress ends after the run in flight.
TEST(BackgroundTunerTest, StopCancelsTheKeyInProgressAfterTheRunInFlight) {
  TuneCache cache(Options());
  GatedHarness::Gate gate;
  std::atomic<int> done{0};
  absl::Status last;
  TuneOptions slow = Fast();
  slow.repeats = 100;  // 1 correctness, 1 warm-up and 100 timed runs of the default alone
  auto tuner = std::make_unique<BackgroundTuner>(
      cache, Spaces(),
      [&gate](const TuneKey&) {
        return absl::StatusOr<std::unique_ptr<TuneHarness>>(std::make_unique<GatedHarness>(&gate));
      },
      std::make_unique<WallTimer>(), slow,
      [&](const TuneProgressEvent& e) {
        last = e.status;
        ++done;
      });
  ASSERT_TRUE(tuner->Enqueue(Key(8)));
  ASSERT_TRUE(gate.first_run_started.WaitForNotificationWithTimeout(absl::Minutes(1)));
  tuner->Stop();
  gate.open.Notify();
  tuner.reset();  // joins the worker
  EXPECT_TRUE(gate.opened_in_time.load()) << "Stop() waited for the run in flight";
  EXPECT_EQ(gate.runs.load(), 1) << "runs started after Stop()";
  EXPECT_EQ(done.load(), 1);
  EXPECT_EQ(last.code(), absl::StatusCode::kCancelled) << last;
  EXPECT_EQ(cache.Stats().entries, 0u);
}

TEST(BackgroundTunerTest, MissesAreTunedOffTheRequestPathAndThenServed) {
  TuneCache cache(Options());
  std::atomic<int> tuned{0};
  BackgroundTuner tuner(cache, Spaces(), CpuHarnesses(), std::make_unique<Tn128Wins>(), Fast(),
                        [&](const TuneProgressEvent& e) {
                          if (e.status.ok()) ++tuned;
                        });
  // A request misses, runs the default, and queues the key.
  ConfigSelection s = SelectConfig(cache, Spaces(), Key(8));
  EXPECT_FALSE(s.hit);
  EXPECT_EQ(s.config, GemmKernelConfig(Tile(64)));
  EXPECT_TRUE(tuner.Enqueue(Key(8)));
  EXPECT_TRUE(tuner.Enqueue(Key(9)));
  TuneKey untunable = Key(8);
  untunable.variant = "nn";
  EXPECT_FALSE(tuner.Enqueue(untunable));
  tuner.WaitIdle();
  EXPECT_EQ(tuned.load(), 2);
  EXPECT_EQ(tuner.pending(), 0u);
  s = SelectConfig(cache, Spaces(), Key(8));
  EXPECT_TRUE(s.hit);
  EXPECT_EQ(s.config, GemmKernelConfig(Tile(128)));
  // Tuned keys can be queued again (a later retune), duplicates in the queue cannot.
  EXPECT_TRUE(tuner.Enqueue(Key(8)));
  tuner.WaitIdle();
  EXPECT_EQ(tuned.load(), 3);
}

}  // namespace
}  // namespace kd
