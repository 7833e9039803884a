#include "kernels/gpu/kernel_timer.h"

#include "absl/time/time.h"
#include "kernels/gpu/gpu_check.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace {

// How long the poller sleeps between looks: while spans are in flight, and while none is.
constexpr absl::Duration kPollInterval = absl::Microseconds(50);
constexpr absl::Duration kIdleInterval = absl::Milliseconds(1);

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

absl::Status KernelTimer::TakeEvents(int device, Span& span) {
  cudaEvent_t* const slots[2] = {&span.start, &span.stop};
  int taken = 0;
  {
    absl::MutexLock lock(&mu_);
    auto& events = free_events_[device];
    for (; taken < 2 && !events.empty(); ++taken) {
      *slots[taken] = events.back();
      events.pop_back();
    }
  }
  for (; taken < 2; ++taken) {
    const cudaError_t err = cudaEventCreate(slots[taken]);
    if (err != cudaSuccess) {
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < taken; ++i) free_events_[device].push_back(*slots[i]);
      return CudaStatus(err, "cudaEventCreate");
    }
  }
  return absl::OkStatus();
}

void KernelTimer::RecycleLocked(const Span& span) {
  free_events_[span.device].push_back(span.start);
  free_events_[span.device].push_back(span.stop);
}

absl::StatusOr<KernelTimer::Span> KernelTimer::Begin(int device, cudaStream_t stream) {
  Span span;
  span.device = device;
  span.stream = stream;
  if (absl::Status taken = TakeEvents(device, span); !taken.ok()) return taken;
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

std::list<KernelTimer::Pending> KernelTimer::TakeCompletedLocked(cudaStream_t synced) {
  std::list<Pending> done;
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool complete = synced != nullptr && it->span.stream == synced;
    if (!complete) {
      cudaSetDevice(it->span.device);
      complete = cudaEventQuery(it->span.stop) != cudaErrorNotReady;
    }
    if (!complete) {
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

void KernelTimer::DeliverCompleted(cudaStream_t synced) {
  std::list<Pending> done;
  {
    absl::MutexLock lock(&mu_);
    // The poller may hold some spans while it queries them: wait until they are back.
    auto idle = [this] { return polling_ == 0; };
    mu_.Await(absl::Condition(&idle));
    done = TakeCompletedLocked(synced);
  }
  Deliver(done);
  absl::MutexLock lock(&mu_);
  auto idle = [this] { return delivering_ == 0; };
  mu_.Await(absl::Condition(&idle));
}

void KernelTimer::Poll() {
  for (;;) {
    // The spans are taken out of pending_ while they are queried, so that Begin and End never
    // wait behind a query (each costs a microsecond or more).
    std::list<Pending> mine;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
      if (stopping && pending_.empty()) return;
      mine.splice(mine.end(), pending_);
      polling_ = static_cast<int>(mine.size());
    }
    std::list<Pending> done;
    for (auto it = mine.begin(); it != mine.end();) {
      cudaSetDevice(it->span.device);
      // At shutdown the remaining spans are waited for; otherwise only looked at.
      const cudaError_t state =
          stopping ? cudaEventSynchronize(it->span.stop) : cudaEventQuery(it->span.stop);
      auto next = std::next(it);
      if (state != cudaErrorNotReady) done.splice(done.end(), mine, it);
      it = next;
    }
    bool in_flight = false;
    {
      absl::MutexLock lock(&mu_);
      pending_.splice(pending_.begin(), mine);  // still first: they were recorded first
      polling_ = 0;
      delivering_ += static_cast<int>(done.size());
      in_flight = !pending_.empty();
    }
    Deliver(done);
    if (!stopping) absl::SleepFor(in_flight ? kPollInterval : kIdleInterval);
  }
}

}  // namespace KD_GPU_NS
}  // namespace kd
