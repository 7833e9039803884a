// Helpers of the benchmarks that start a second process of their own binary (cuda_call_bench,
// ipc_order_bench): IPC handles travel on its command line as hex, and a one-thread kernel
// keeps a stream busy for a set time.
#ifndef KERNELD_BENCH_GPU_CROSS_PROCESS_CUH_
#define KERNELD_BENCH_GPU_CROSS_PROCESS_CUH_

#include <cstddef>
#include <cstdio>
#include <string>

namespace kd_bench {

// Spins for about `ns` nanoseconds of the GPU's global timer.
__global__ void SpinKernel(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

inline std::string Hex(const void* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof(b), "%02x", static_cast<const unsigned char*>(p)[i]);
    s += b;
  }
  return s;
}

inline void Unhex(const char* s, void* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    std::sscanf(s + 2 * i, "%2x", &v);
    static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(v);
  }
}

}  // namespace kd_bench

#endif  // KERNELD_BENCH_GPU_CROSS_PROCESS_CUH_
