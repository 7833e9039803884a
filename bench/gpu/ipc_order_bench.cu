// How long a stream of one process waits after another process's stream finished the work it
// depends on, for two ways of expressing the dependency across processes:
//   event: the producer records an IPC event (cudaEventInterprocess | cudaEventDisableTiming),
//          the consumer's stream waits on it (cudaStreamWaitEvent) - kerneld's wait_event;
//   value: the producer's stream writes a 32-bit value into IPC-shared device memory
//          (cuStreamWriteValue32), the consumer's stream waits for it (cuStreamWaitValue32).
// Both sides stamp %globaltimer from a one-thread kernel right after the producer's work and
// right after the consumer's wait; one GPU, one clock, so the difference is the hand-over time.
// The producer (the parent) queues 200 µs of work, the dependency and its stamp; then the
// consumer queues its wait and stamp while that work still runs: a child process started from
// the same binary, and, for comparison, a second stream of the parent itself (one process, one
// context). Prints one JSON document.
//
//   ipc_order_bench [REPS]
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/gpu/cross_process.cuh"

extern char** environ;

namespace {

using kd_bench::Hex;
using kd_bench::SpinKernel;
using kd_bench::Unhex;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "ipc_order_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void CheckCu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "ipc_order_bench: %s: CUresult %d\n", what, static_cast<int>(r));
    std::exit(1);
  }
}

__global__ void StampKernel(unsigned long long* slot) {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  *slot = now;
}

using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

template <typename Fn>
Fn Entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  Check(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q), name);
  if (p == nullptr || q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "ipc_order_bench: no driver entry point %s\n", name);
    std::exit(1);
  }
  return reinterpret_cast<Fn>(p);
}

// Shared device memory layout (uint64 slots): [0] the value (low 32 bits), [1] the producer's
// stamp, [2] the child consumer's stamp, [3] the same-process consumer's stamp.
constexpr size_t kSharedBytes = 4096;

void ReadLine(FILE* f, char* buf, size_t n) {
  if (std::fgets(buf, static_cast<int>(n), f) == nullptr) {
    std::fprintf(stderr, "ipc_order_bench: pipe closed\n");
    std::exit(1);
  }
}

// The consumer: for each request line "<mode> <value>" it queues the wait and its stamp, says
// "queued", waits for its stream, and says "done".
int Child(const char* event_hex, const char* mem_hex) {
  Check(cudaSetDevice(0), "set device");
  cudaIpcEventHandle_t eh;
  cudaIpcMemHandle_t mh;
  Unhex(event_hex, &eh, sizeof(eh));
  Unhex(mem_hex, &mh, sizeof(mh));
  cudaEvent_t event;
  Check(cudaIpcOpenEventHandle(&event, eh), "open event");
  void* shared = nullptr;
  Check(cudaIpcOpenMemHandle(&shared, mh, cudaIpcMemLazyEnablePeerAccess), "open mem");
  auto* slots = static_cast<unsigned long long*>(shared);
  const auto wait_value = Entry<WaitValueFn>("cuStreamWaitValue32");
  cudaStream_t s;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  char line[64];
  for (;;) {
    if (std::fgets(line, sizeof(line), stdin) == nullptr) return 0;
    char mode = 0;
    unsigned value = 0;
    if (std::sscanf(line, "%c %u", &mode, &value) != 2) return 0;
    if (mode == 'e') {
      Check(cudaStreamWaitEvent(s, event, 0), "wait event");
    } else {
      CheckCu(wait_value(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(slots), value,
                         CU_STREAM_WAIT_VALUE_GEQ),
              "cuStreamWaitValue32");
    }
    StampKernel<<<1, 1, 0, s>>>(slots + 2);
    Check(cudaGetLastError(), "stamp");
    std::printf("queued\n");
    std::fflush(stdout);
    Check(cudaStreamSynchronize(s), "sync");
    std::printf("done\n");
    std::fflush(stdout);
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) return Child(argv[2], argv[3]);
  const int reps = argc > 1 ? std::atoi(argv[1]) : 200;
  if (reps < 10) return 1;
  Check(cudaSetDevice(0), "set device");
  cudaEvent_t event;
  Check(cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming), "event");
  cudaIpcEventHandle_t eh;
  Check(cudaIpcGetEventHandle(&eh, event), "event handle");
  void* shared = nullptr;
  Check(cudaMalloc(&shared, kSharedBytes), "malloc");
  Check(cudaMemset(shared, 0, kSharedBytes), "memset");
  cudaIpcMemHandle_t mh;
  Check(cudaIpcGetMemHandle(&mh, shared), "mem handle");
  auto* slots = static_cast<unsigned long long*>(shared);
  const auto write_value = Entry<WriteValueFn>("cuStreamWriteValue32");
  cudaStream_t s, local;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  Check(cudaStreamCreateWithFlags(&local, cudaStreamNonBlocking), "stream");
  const auto wait_value = Entry<WaitValueFn>("cuStreamWaitValue32");

  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
  posix_spawn_file_actions_addclose(&fa, to_child[1]);
  posix_spawn_file_actions_addclose(&fa, from_child[0]);
  const std::string ehex = Hex(&eh, sizeof(eh)), mhex = Hex(&mh, sizeof(mh));
  char* child_argv[] = {argv[0], const_cast<char*>("--child"), const_cast<char*>(ehex.c_str()),
                        const_cast<char*>(mhex.c_str()), nullptr};
  pid_t pid;
  if (posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, child_argv, environ) != 0) return 1;
  close(to_child[0]);
  close(from_child[1]);
  FILE* out = fdopen(to_child[1], "w");
  FILE* in = fdopen(from_child[0], "r");

  std::vector<double> event_us, value_us, local_event_us, local_value_us;
  unsigned value = 0;
  char line[64];
  for (int i = 0; i < 2 * reps; ++i) {
    const bool by_event = i % 2 == 0;
    ++value;
    SpinKernel<<<1, 1, 0, s>>>(200000);
    if (by_event) {
      Check(cudaEventRecord(event, s), "record");
    } else {
      CheckCu(write_value(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(slots),
                          value, CU_STREAM_WRITE_VALUE_DEFAULT),
              "cuStreamWriteValue32");
    }
    StampKernel<<<1, 1, 0, s>>>(slots + 1);
    // The same-process consumer, then the child's (both queued while the spin runs).
    if (by_event) {
      Check(cudaStreamWaitEvent(local, event, 0), "wait event");
    } else {
      CheckCu(wait_value(reinterpret_cast<CUstream>(local), reinterpret_cast<CUdeviceptr>(slots),
                         value, CU_STREAM_WAIT_VALUE_GEQ),
              "cuStreamWaitValue32");
    }
    StampKernel<<<1, 1, 0, local>>>(slots + 3);
    std::fprintf(out, "%c %u\n", by_event ? 'e' : 'v', value);
    std::fflush(out);
    ReadLine(in, line, sizeof(line));  // "queued"
    Check(cudaStreamSynchronize(s), "sync");
    Check(cudaStreamSynchronize(local), "sync");
    ReadLine(in, line, sizeof(line));  // "done"
    unsigned long long stamps[4];
    Check(cudaMemcpy(stamps, slots, sizeof(stamps), cudaMemcpyDeviceToHost), "read stamps");
    const double us = (static_cast<double>(stamps[2]) - static_cast<double>(stamps[1])) * 1e-3;
    const double local_us =
        (static_cast<double>(stamps[3]) - static_cast<double>(stamps[1])) * 1e-3;
    (by_event ? event_us : value_us).push_back(us);
    (by_event ? local_event_us : local_value_us).push_back(local_us);
  }
  fclose(out);
  fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, 0), "props");
  std::printf(
      "{\"device\": \"%s\", \"reps\": %d, \"producer_done_to_consumer_start_us\": "
      "{\"other_process\": {\"ipc_event_median\": %.1f, \"stream_value_median\": %.1f},"
      " \"same_process\": {\"ipc_event_median\": %.1f, \"stream_value_median\": %.1f}}}\n",
      prop.name, reps, Median(event_us), Median(value_us), Median(local_event_us),
      Median(local_value_us));
  return 0;
}
