#include "kernels/cuda/kernel_timer.h"

#include "absl/time/time.h"
#include "kernels/cuda/cuda_check.h"

namespace kd {
namespace {

// How long the poller sleeps between looks while spans are in flight. Kernel times feed
// histograms, so a delivery some tens of microseconds late costs nothing.
constexpr absl::Duration kPollInterval = absl::Microseconds(50);

}  // namespace

KernelTimer::KernelTimer(int device_count) : free_events_(device_count) {
  poller_ = std::thread([this] { Poll(); });
}

KernelTimer::~KernelTimer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  poller_.join();
  absl::MutexLock lock(&mu_);
  for (size_t device = 0; device < free_events_.size(); ++device) {
    cudaSetDevice(static_cast<int>(device));
    for (cudaEvent_t e : free_events_[device]) cudaEventDestroy(e);
  }
}

absl::StatusOr<cudaEvent_t> KernelTimer::TakeEvent(int device) {
  {
    absl::MutexLock lock(&mu_);
    auto& events = free_events_[device];
    if (!events.empty()) {
      cudaEvent_t e = events.back();
      events.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  KD_GPU_RETURN_IF_ERROR(cudaEventCreate(&e));
  return e;
}

void KernelTimer::RecycleLocked(const Span& span) {
  free_events_[span.device].push_back(span.start);
  free_events_[span.device].push_back(span.stop);
}

absl::StatusOr<KernelTimer::Span> KernelTimer::Begin(int device, cudaStream_t stream) {
  Span span;
  span.device = device;
  auto start = TakeEvent(device);
  if (!start.ok()) return start.status();
  span.start = *start;
  auto stop = TakeEvent(device);
  if (!stop.ok()) {
    absl::MutexLock lock(&mu_);
    free_events_[device].push_back(span.start);
    return stop.status();
  }
  span.stop = *stop;
  const cudaError_t err = cudaEventRecord(span.start, stream);
  if (err != cudaSuccess) {
    Abandon(span);
    return CudaStatus(err, "cudaEventRecord(start)");
  }
  return span;
}

absl::Status KernelTimer::End(const Span& span, cudaStream_t stream, KernelTimingFn fn) {
  const cudaError_t err = cudaEventRecord(span.stop, stream);
  if (err != cudaSuccess) {
    Abandon(span);
    return CudaStatus(err, "cudaEventRecord(stop)");
  }
  absl::MutexLock lock(&mu_);
  pending_.push_back(Pending{span, std::move(fn)});
  return absl::OkStatus();
}

void KernelTimer::Abandon(const Span& span) {
  absl::MutexLock lock(&mu_);
  RecycleLocked(span);
}

std::list<KernelTimer::Pending> KernelTimer::TakeCompletedLocked(bool wait) {
  std::list<Pending> done;
  for (auto it = pending_.begin(); it != pending_.end();) {
    cudaSetDevice(it->span.device);
    const cudaError_t state = wait ? cudaEventSynchronize(it->span.stop)
                                   : cudaEventQuery(it->span.stop);
    if (state == cudaErrorNotReady) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    done.splice(done.end(), pending_, it);
    it = next;
  }
  delivering_ += static_cast<int>(done.size());
  return done;
}

void KernelTimer::Deliver(std::list<Pending>& done) {
  for (Pending& p : done) {
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, p.span.start, p.span.stop) == cudaSuccess && p.fn) {
      p.fn(static_cast<double>(ms) * 1e-3);
    } else {
      cudaGetLastError();
    }
    absl::MutexLock lock(&mu_);
    RecycleLocked(p.span);
    --delivering_;
  }
}

void KernelTimer::DeliverCompleted() {
  std::list<Pending> done;
  {
    absl::MutexLock lock(&mu_);
    done = TakeCompletedLocked(false);
  }
  Deliver(done);
  absl::MutexLock lock(&mu_);
  auto idle = [this] { return delivering_ == 0; };
  mu_.Await(absl::Condition(&idle));
}

void KernelTimer::Poll() {
  for (;;) {
    std::list<Pending> done;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this] { return stopping_ || !pending_.empty(); };
      mu_.Await(absl::Condition(&ready));
      stopping = stopping_;
      if (stopping && pending_.empty()) return;
      // At shutdown the remaining spans are waited for; otherwise only looked at.
      done = TakeCompletedLocked(stopping);
    }
    const bool none = done.empty();
    Deliver(done);
    if (none && !stopping) absl::SleepFor(kPollInterval);
  }
}

}  // namespace kd
