// A fixed pool of worker threads for data-parallel CPU kernels.
#ifndef KERNELD_KERNELS_CPU_THREAD_POOL_H_
#define KERNELD_KERNELS_CPU_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kd {

// Runs ParallelFor bodies on `threads` threads (the caller's thread is one of them). One
// ParallelFor runs at a time; concurrent callers are serialised, which is what the executor
// wants (ops on one device run in order anyway).
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), in parallel, and returns when all
  // are done. `grain` is the smallest chunk worth a thread.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  std::mutex run_mu_;  // one ParallelFor at a time
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int64_t chunks_ = 0;
  int64_t next_chunk_ = 0;
  int64_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kd

#endif  // KERNELD_KERNELS_CPU_THREAD_POOL_H_
