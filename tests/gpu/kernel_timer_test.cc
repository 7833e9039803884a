// The CUDA backend's kernel timer on a real device: every span reaches its callback exactly
// once with a positive time, through the caller after a stream synchronize (what a SYNC reply
// carries) or through the poller (ASYNC), and the destructor delivers what is still in flight.
// The work timed is cudaMemsetAsync of a large buffer (hundreds of microseconds), so spans are
// really in flight when they are looked at.
#include "kernels/gpu/kernel_timer.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kd {
namespace {

constexpr size_t kBytes = size_t{1} << 30;

class KernelTimerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();
      GTEST_SKIP() << "no CUDA device";
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&buffer_, kBytes), cudaSuccess);
    for (cudaStream_t* s : {&a_, &b_}) {
      ASSERT_EQ(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), cudaSuccess);
    }
  }
  void TearDown() override {
    for (cudaStream_t s : {a_, b_}) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
    if (buffer_ != nullptr) cudaFree(buffer_);
  }

  // One timed memset on `stream`; its callback counts into `calls` and checks the time.
  void TimedMemset(KernelTimer& timer, cudaStream_t stream, std::atomic<int>* calls) {
    absl::StatusOr<KernelTimer::Span> span = timer.Begin(0, stream);
    ASSERT_TRUE(span.ok()) << span.status();
    ASSERT_EQ(cudaMemsetAsync(buffer_, 1, kBytes, stream), cudaSuccess);
    ASSERT_TRUE(timer
                    .End(*span, stream,
                         [calls](double seconds) {
                           EXPECT_GT(seconds, 1e-6);
                           EXPECT_LT(seconds, 10.0);
                           calls->fetch_add(1);
                         })
                    .ok());
  }

  void* buffer_ = nullptr;
  cudaStream_t a_ = nullptr;
  cudaStream_t b_ = nullptr;
};

bool WaitFor(const std::atomic<int>& value, int want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (value.load() < want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return value.load() == want;
}

TEST_F(KernelTimerTest, SynchronizedStreamDeliversItsSpansBeforeReturning) {
  KernelTimer timer(1);
  std::atomic<int> calls{0};
  for (int i = 0; i < 3; ++i) TimedMemset(timer, a_, &calls);
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  timer.DeliverCompleted(a_);
  EXPECT_EQ(calls.load(), 3);
}

TEST_F(KernelTimerTest, PollerDeliversUnsynchronizedSpansExactlyOnce) {
  KernelTimer timer(1);
  std::atomic<int> calls{0};
  for (int i = 0; i < 20; ++i) TimedMemset(timer, i % 2 ? a_ : b_, &calls);
  EXPECT_TRUE(WaitFor(calls, 20)) << calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(calls.load(), 20);
}

// One stream is synchronized and delivered by the caller while the poller works on the other's
// spans: each span still reaches its callback once.
TEST_F(KernelTimerTest, CallerAndPollerShareSpansWithoutLosingOrRepeatingAny) {
  KernelTimer timer(1);
  std::atomic<int> calls_a{0}, calls_b{0};
  for (int round = 0; round < 10; ++round) {
    TimedMemset(timer, a_, &calls_a);
    TimedMemset(timer, b_, &calls_b);
    ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
    timer.DeliverCompleted(a_);
    EXPECT_EQ(calls_a.load(), round + 1);
  }
  EXPECT_TRUE(WaitFor(calls_b, 10)) << calls_b.load();
}

TEST_F(KernelTimerTest, DestructorDeliversSpansStillInFlight) {
  std::atomic<int> calls{0};
  {
    KernelTimer timer(1);
    for (int i = 0; i < 4; ++i) TimedMemset(timer, a_, &calls);
  }
  EXPECT_EQ(calls.load(), 4);
}

}  // namespace
}  // namespace kd
