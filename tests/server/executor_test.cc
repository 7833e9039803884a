// The executor's attribution of device-side check failures, with a fault-injecting backend: the
// real CPU backend underneath, whose device-side checks fail on demand as a GPU's would.
#include "server/executor.h"

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/registry.h"

namespace kd {
namespace {

class NoopEvent : public Event {};

// Delegates to the CPU backend; has IPC events that do nothing; the next CloseChecks reports a
// failure when armed.
class CheckFailingBackend : public Backend {
 public:
  CheckFailingBackend() : cpu_(CreateCpuBackend(1)) {}
  void ArmFailure() { fail_next_ = true; }
  // The next Run signals `entered` and then waits for `release` before running.
  void HoldNextRun(std::promise<void>* entered, std::shared_future<void> release) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_entered_ = entered;
    hold_release_ = std::move(release);
  }

  BackendKind kind() const override { return cpu_->kind(); }
  int DeviceCount() const override { return cpu_->DeviceCount(); }
  DeviceProperties Properties(int d) const override { return cpu_->Properties(d); }
  MemoryStats Memory(int d) const override { return cpu_->Memory(d); }
  bool Healthy() const override { return true; }
  absl::StatusOr<std::unique_ptr<Region>> Allocate(int d, uint64_t b) override {
    return cpu_->Allocate(d, b);
  }
  absl::StatusOr<MemoryHandle> Export(const Region& r) override { return cpu_->Export(r); }
  absl::StatusOr<std::unique_ptr<Region>> Import(const MemoryHandle& h) override {
    return cpu_->Import(h);
  }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int d) override {
    return cpu_->CreateStream(d);
  }
  absl::StatusOr<std::unique_ptr<Event>> OpenEvent(int, absl::string_view) override {
    return std::make_unique<NoopEvent>();
  }
  absl::Status StreamWaitEvent(Stream&, Event&) override { return absl::OkStatus(); }
  absl::Status RecordEvent(Stream&, Event&) override { return absl::OkStatus(); }
  absl::Status Synchronize(Stream& s) override { return cpu_->Synchronize(s); }
  void CloseChecks(Stream&, std::function<void(absl::Status)> done) override {
    done(fail_next_.exchange(false)
             ? absl::InvalidArgumentError("group_ends[1]=5 is less than group_ends[0]=7")
             : absl::OkStatus());
  }
  absl::Status Supports(const ValidatedOp& op) const override { return cpu_->Supports(op); }
  absl::Status Run(const ValidatedOp& op, Stream& s, KernelTimingFn t) override {
    std::promise<void>* entered = nullptr;
    std::shared_future<void> release;
    {
      std::lock_guard<std::mutex> lock(mu_);
      entered = std::exchange(hold_entered_, nullptr);
      release = std::exchange(hold_release_, {});
    }
    if (entered != nullptr) {
      entered->set_value();
      release.wait();
    }
    return cpu_->Run(op, s, std::move(t));
  }

 private:
  std::unique_ptr<Backend> cpu_;
  std::mutex mu_;
  std::promise<void>* hold_entered_ = nullptr;
  std::shared_future<void> hold_release_;
  std::atomic<bool> fail_next_{false};
};

class ExecutorTest : public ::testing::Test {
 protected:
  ExecutorTest() { Make(/*inline_async=*/true); }

  void Make(bool inline_async) {
    executor_.reset();
    registry_.reset();
    auto backend = std::make_unique<CheckFailingBackend>();
    backend_ = backend.get();
    std::vector<std::unique_ptr<Backend>> backends;
    backends.push_back(std::move(backend));
    registry_ = BackendRegistry::FromBackends(std::move(backends));
    executor_ = std::make_unique<Executor>(registry_.get(), &metrics_, PrepareOpFn{}, inline_async);
    EXPECT_TRUE(executor_->Start().ok());
  }

  static Tensor HostTensor(void* data, DType dtype, std::vector<int64_t> shape) {
    Tensor t;
    t.data = data;
    t.dtype = dtype;
    t.rank = shape.size();
    int64_t stride = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
      t.shape[i] = shape[i];
      t.strides[i] = stride;
      stride *= shape[i];
    }
    return t;
  }

  // Submits one pad batch for `session`; `done` gets its status and the thread that reported it.
  void SubmitPad(const std::string& session, bool async,
                 std::function<void(absl::Status, std::thread::id)> done,
                 bool caller_may_block = false) {
    PadArgs pad;
    pad.input = HostTensor(input_.data(), DType::kBF16, {4, 8});
    pad.group_ends = HostTensor(ends_.data(), DType::kI32, {2});
    pad.output = HostTensor(output_.data(), DType::kBF16, {34, 8});
    pad.padded_group_ends = HostTensor(padded_ends_.data(), DType::kI32, {2});
    pad.alignment = 16;
    ExecBatch batch;
    batch.backend = backend_;
    batch.session_id = session;
    absl::StatusOr<ValidatedOp> op = Validate(pad);
    ASSERT_TRUE(op.ok()) << op.status();
    batch.ops.push_back(*std::move(op));
    batch.async = async;
    batch.caller_may_block = caller_may_block;
    if (async) batch.signal_event = std::make_shared<NoopEvent>();
    batch.done = [done = std::move(done)](absl::Status s, double) {
      done(std::move(s), std::this_thread::get_id());
    };
    executor_->Submit(std::move(batch));
  }

  // Runs one pad batch for `session` and returns its status.
  absl::Status RunPad(const std::string& session, bool async) {
    auto result = std::make_shared<std::promise<absl::Status>>();
    std::future<absl::Status> status = result->get_future();
    SubmitPad(session, async,
              [result](absl::Status s, std::thread::id) { result->set_value(std::move(s)); });
    return status.get();
  }

  Metrics metrics_{"test", "cpu"};
  CheckFailingBackend* backend_ = nullptr;
  std::unique_ptr<BackendRegistry> registry_;
  std::unique_ptr<Executor> executor_;
  std::vector<uint16_t> input_ = std::vector<uint16_t>(4 * 8, 0x3f80);
  std::vector<int32_t> ends_ = {2, 4};
  std::vector<uint16_t> output_ = std::vector<uint16_t>(34 * 8);
  std::vector<int32_t> padded_ends_ = std::vector<int32_t>(2);
};

TEST_F(ExecutorTest, AsyncCheckFailureFailsThatSessionsNextRequestOnly) {
  backend_->ArmFailure();
  EXPECT_TRUE(RunPad("s1", /*async=*/true).ok());  // the reply went out before the verdict
  EXPECT_TRUE(RunPad("s2", /*async=*/false).ok()) << "another session must not see it";
  const absl::Status next = RunPad("s1", false);
  EXPECT_EQ(next.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(next.message().find("group_ends[1]=5"), absl::string_view::npos) << next;
  EXPECT_TRUE(RunPad("s1", false).ok()) << "a failure is reported once";
}

TEST_F(ExecutorTest, FailuresOfEndedSessionsAreDropped) {
  backend_->ArmFailure();
  EXPECT_TRUE(RunPad("gone", /*async=*/true).ok());
  EXPECT_EQ(executor_->held_failures(), 1u);
  executor_->RetainSessions([](const std::string& id) { return id != "gone"; });
  EXPECT_EQ(executor_->held_failures(), 0u);
}

TEST_F(ExecutorTest, SyncBatchRunsThroughTheBackend) {
  EXPECT_TRUE(RunPad("s1", false).ok());
  EXPECT_EQ(padded_ends_[0], 16);
  EXPECT_EQ(padded_ends_[1], 32);
}

// Kernel times land in the series of the op's labels, the same series for every batch of one
// label set (the executor caches it per queue).
TEST_F(ExecutorTest, KernelTimesGoToTheSeriesOfTheOpsLabels) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(RunPad("s1", false).ok());
  const std::vector<std::pair<std::string, std::string>> want = {{"op", "pad"},
                                                                 {"variant", "a16"},
                                                                 {"dtype", "bf16"},
                                                                 {"device", "cpu:0"},
                                                                 {"shape_class", "xs"}};
  int series = 0;
  uint64_t samples = 0;
  for (const prometheus::MetricFamily& f : metrics_.registry()->Collect()) {
    if (f.name != "kerneld_kernel_duration_seconds") continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      ++series;
      size_t matched = 0;
      for (const auto& [name, value] : want) {
        for (const prometheus::ClientMetric::Label& l : m.label) {
          if (l.name == name && l.value == value) ++matched;
        }
      }
      if (matched == want.size()) samples = m.histogram.sample_count;
    }
  }
  EXPECT_EQ(series, 1);
  EXPECT_EQ(samples, 3u);
}

// The callbacks below may still be running on the executor's thread when the test body has
// seen what it waits for, so whatever they touch is owned by a shared_ptr they hold.
TEST_F(ExecutorTest, AsyncBatchOnAnIdleQueueIsLaunchedOnTheSubmittingThread) {
  auto async_thread = std::make_shared<std::thread::id>();
  SubmitPad("s1", /*async=*/true, [async_thread](absl::Status s, std::thread::id t) {
    EXPECT_TRUE(s.ok()) << s;
    *async_thread = t;
  });
  EXPECT_EQ(*async_thread, std::this_thread::get_id()) << "done before Submit returned, inline";
  auto sync_done = std::make_shared<std::promise<std::thread::id>>();
  std::future<std::thread::id> sync_thread = sync_done->get_future();
  SubmitPad("s1", /*async=*/false,
            [sync_done](absl::Status, std::thread::id t) { sync_done->set_value(t); });
  EXPECT_NE(sync_thread.get(), std::this_thread::get_id())
      << "SYNC batches run on the queue's thread";
}

TEST_F(ExecutorTest, AsyncBatchWaitsBehindARunningBatchAndKeepsOrder) {
  std::promise<void> entered;
  std::promise<void> release;
  backend_->HoldNextRun(&entered, release.get_future().share());
  struct Seen {
    std::mutex mu;
    std::vector<std::string> order;
    std::promise<void> both;
  };
  auto seen = std::make_shared<Seen>();
  std::future<void> both = seen->both.get_future();
  const std::thread::id test_thread = std::this_thread::get_id();
  auto record = [seen, test_thread](std::string name) {
    return [seen, test_thread, name](absl::Status s, std::thread::id t) {
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_NE(t, test_thread) << name << " ran on the submitting thread";
      bool last = false;
      {
        std::lock_guard<std::mutex> lock(seen->mu);
        seen->order.push_back(name);
        last = seen->order.size() == 2;
      }
      if (last) seen->both.set_value();
    };
  };
  SubmitPad("s1", /*async=*/false, record("sync"));
  entered.get_future().wait();  // the SYNC batch is running on the queue's thread
  SubmitPad("s1", /*async=*/true, record("async"));
  {
    std::lock_guard<std::mutex> lock(seen->mu);
    EXPECT_TRUE(seen->order.empty()) << "the ASYNC batch must queue behind the running one";
  }
  release.set_value();
  both.wait();
  std::lock_guard<std::mutex> lock(seen->mu);
  EXPECT_EQ(seen->order, (std::vector<std::string>{"sync", "async"}));
}

TEST_F(ExecutorTest, SyncBatchOfACallerThatMayBlockRunsOnItOnAnIdleQueue) {
  // A submit ring's thread may wait for a SYNC batch; an RPC callback may not (test above).
  auto sync_thread = std::make_shared<std::thread::id>();
  SubmitPad(
      "s1", /*async=*/false,
      [sync_thread](absl::Status s, std::thread::id t) {
        EXPECT_TRUE(s.ok()) << s;
        *sync_thread = t;
      },
      /*caller_may_block=*/true);
  EXPECT_EQ(*sync_thread, std::this_thread::get_id()) << "done before Submit returned, inline";
  EXPECT_EQ(padded_ends_[1], 32);
}

TEST_F(ExecutorTest, WithoutInlineAsyncEveryBatchRunsOnTheQueuesThread) {
  Make(/*inline_async=*/false);
  auto done = std::make_shared<std::promise<std::thread::id>>();
  std::future<std::thread::id> thread = done->get_future();
  SubmitPad("s1", /*async=*/true, [done](absl::Status, std::thread::id t) { done->set_value(t); });
  EXPECT_NE(thread.get(), std::this_thread::get_id());
}

}  // namespace
}  // namespace kd
