// The executor on the CUDA backend: a device-side check that fails in one session's ASYNC batch
// is reported to that session's next request, never to another session's.
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/kernels/registry.h"
#include "server/executor.h"
#include "server/metrics.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/pattern.h"

namespace kd {
namespace {

using testing::MakeTensor;
using testing::PeerProcess;

const DeviceLoc kGpu{BackendKind::kCuda, 0};

std::unique_ptr<Region> Upload(Backend& gpu, const std::vector<uint8_t>& host) {
  auto region = gpu.Allocate(0, host.size());
  EXPECT_TRUE(region.ok()) << region.status();
  EXPECT_EQ(cudaMemcpy((*region)->data(), host.data(), host.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  return std::move(region).value();
}

std::vector<uint8_t> Ends(std::vector<int32_t> ends) {
  std::vector<uint8_t> out(ends.size() * 4);
  std::memcpy(out.data(), ends.data(), out.size());
  return out;
}

// Submits `batch` and waits for its status.
absl::Status RunAndWait(Executor& ex, ExecBatch batch) {
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> f = done->get_future();
  batch.done = [done](absl::Status s, double) { done->set_value(std::move(s)); };
  ex.Submit(std::move(batch));
  if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    return absl::DeadlineExceededError("the batch did not finish");
  }
  return f.get();
}

TEST(ExecutorOnCuda, AsyncDeviceFailureFailsTheSameSessionsNextRequestOnly) {
  RegistryOptions options;
  options.preferred = "cuda";
  options.cpu_threads = 2;
  auto registry = BackendRegistry::Create(options);
  if (!registry.ok()) GTEST_SKIP() << "no CUDA device: " << registry.status();
  Backend* gpu = (*registry)->Get(BackendKind::kCuda);
  ASSERT_NE(gpu, nullptr);
  Metrics metrics("test", "cuda,cpu");
  Executor ex(registry->get(), &metrics);
  ASSERT_TRUE(ex.Start().ok());

  PeerProcess peer({testing::SelfDir() + "/kd_ipc_peer"});
  ASSERT_TRUE(peer.ok());
  const std::string answer = peer.Ask("event 1");
  ASSERT_EQ(answer.rfind("ok ", 0), 0u) << answer;
  auto signal = gpu->OpenEvent(0, testing::FromHex(answer.substr(3)));
  ASSERT_TRUE(signal.ok()) << signal.status();
  std::shared_ptr<Event> signal_event = std::move(signal).value();

  const int64_t rows = 100, cols = 64, groups = 4, padded_rows = rows + groups * 15;
  std::shared_ptr<Region> in = Upload(*gpu, std::vector<uint8_t>(rows * cols * 2, 1));
  std::shared_ptr<Region> out = Upload(*gpu, std::vector<uint8_t>(padded_rows * cols * 2, 0));
  std::shared_ptr<Region> padded = Upload(*gpu, std::vector<uint8_t>(groups * 4, 0));
  std::shared_ptr<Region> bad = Upload(*gpu, Ends({10, 50, 40, 100}));
  std::shared_ptr<Region> good = Upload(*gpu, Ends({10, 50, 60, 100}));
  auto batch_of = [&](const std::string& session, const std::shared_ptr<Region>& ends, bool async) {
    PadArgs a;
    a.input = MakeTensor(in->data(), DType::kBF16, {rows, cols}, cols, kGpu);
    a.group_ends = MakeTensor(ends->data(), DType::kI32, {groups}, 0, kGpu);
    a.output = MakeTensor(out->data(), DType::kBF16, {padded_rows, cols}, cols, kGpu);
    a.padded_group_ends = MakeTensor(padded->data(), DType::kI32, {groups}, 0, kGpu);
    a.alignment = 16;
    ExecBatch b;
    b.backend = gpu;
    b.device = 0;
    absl::StatusOr<ValidatedOp> op = Validate(a);
    EXPECT_TRUE(op.ok()) << op.status();
    if (op.ok()) b.ops.push_back(*std::move(op));
    b.async = async;
    if (async) b.signal_event = signal_event;
    b.session_id = session;
    return b;
  };

  // Session a's ASYNC pad with bad ends is accepted (the check runs later); its signal event is
  // still recorded, so a waiter does not hang.
  EXPECT_TRUE(RunAndWait(ex, batch_of("a", bad, true)).ok());
  EXPECT_EQ(peer.Ask("wait 1"), "ok");
  // Session b's SYNC request on the same stream is not blamed for it.
  EXPECT_TRUE(RunAndWait(ex, batch_of("b", good, false)).ok());
  // The poller delivers a's verdict within its poll interval once the work completed.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(RunAndWait(ex, batch_of("b", good, true)).ok());
  const absl::Status next = RunAndWait(ex, batch_of("a", good, false));
  EXPECT_EQ(next.code(), absl::StatusCode::kFailedPrecondition) << next;
  EXPECT_NE(next.message().find("group_ends[2]=40 is less than group_ends[1]=50"),
            absl::string_view::npos)
      << next;
  // Reported once.
  EXPECT_TRUE(RunAndWait(ex, batch_of("a", good, false)).ok());
  // A SYNC request's own failure is its own.
  const absl::Status sync_bad = RunAndWait(ex, batch_of("b", bad, false));
  EXPECT_EQ(sync_bad.code(), absl::StatusCode::kInvalidArgument) << sync_bad;
  EXPECT_TRUE(RunAndWait(ex, batch_of("a", good, false)).ok());
  EXPECT_EQ(peer.Ask("quit"), "ok");
}

}  // namespace
}  // namespace kd
