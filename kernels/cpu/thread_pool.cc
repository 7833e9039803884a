#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace kd {

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) threads = 1;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = std::max<int64_t>(1, n / grain);
  // A few chunks per thread balance uneven rows without much scheduling cost.
  const int64_t chunks = std::min<int64_t>(max_chunks, int64_t{threads()} * 4);
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    chunk_ = (n + chunks - 1) / chunks;
    next_chunk_ = 0;
    pending_ = chunks;
    ++generation_;
  }
  work_cv_.notify_all();
  // The caller works too.
  for (;;) {
    int64_t c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_chunk_ >= chunks_) break;
      c = next_chunk_++;
    }
    const int64_t begin = c * chunk_;
    fn(begin, std::min(n, begin + chunk_));
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_cv_.notify_all();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && next_chunk_ < chunks_); });
    if (stop_) return;
    seen = generation_;
    while (next_chunk_ < chunks_) {
      const int64_t c = next_chunk_++;
      const auto* fn = fn_;
      const int64_t begin = c * chunk_;
      const int64_t end = std::min(n_, begin + chunk_);
      lock.unlock();
      (*fn)(begin, end);
      lock.lock();
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
}

}  // namespace kd
