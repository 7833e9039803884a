// What the CUDA runtime calls on kerneld's request path cost on the host, on this machine: the
// daemon's launch phase (kerneld_request_phase_seconds{phase="launch"}) is made of them. Each
// figure is the median host time of one call over REPS calls, on an idle stream and on a stream
// busy with a long kernel, and again while another thread polls an event every 50 µs as the
// backend's kernel timer does. The IPC event rows record an event that another process created
// (this program started again as a child, like a client), which is what an ASYNC request's
// signal is to the daemon. Prints one JSON document.
//
//   cuda_call_bench [REPS]
#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/gpu/cross_process.cuh"

extern char** environ;

namespace {

using kd_bench::Hex;
using kd_bench::SpinKernel;
using kd_bench::Unhex;
using Clock = std::chrono::steady_clock;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cuda_call_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void EmptyKernel() {}

double MedianUs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median host time of `call`, `reps` times; with `busy` a 2 ms kernel is queued on `stream`
// before every 100 calls (so the calls land behind running work), else the stream is drained
// before every call.
double Time(int reps, cudaStream_t stream, bool busy, const std::function<void()>& call) {
  std::vector<double> us;
  us.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    if (busy && i % 100 == 0) {
      Check(cudaStreamSynchronize(stream), "sync");
      SpinKernel<<<1, 1, 0, stream>>>(2000000);
    } else if (!busy) {
      Check(cudaStreamSynchronize(stream), "sync");
    }
    const auto t0 = Clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  Check(cudaStreamSynchronize(stream), "sync");
  return MedianUs(us);
}

// The rows of one process: `ipc` is an event opened from another process's handle, or null.
std::string Rows(int reps, cudaEvent_t ipc) {
  Check(cudaSetDevice(0), "set device");
  cudaStream_t s;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cudaEvent_t timing, done;
  Check(cudaEventCreate(&timing), "event");
  Check(cudaEventCreate(&done), "event");
  Check(cudaEventRecord(done, s), "record");
  Check(cudaStreamSynchronize(s), "sync");
  std::string out;
  auto row = [&](const char* name, const std::function<void()>& call) {
    const double idle = Time(reps, s, false, call), busy = Time(reps, s, true, call);
    char b[200];
    std::snprintf(b, sizeof(b), "%s    \"%s\": {\"idle_us\": %.2f, \"busy_us\": %.2f}",
                  out.empty() ? "" : ",\n", name, idle, busy);
    out += b;
  };
  auto rows = [&](const char* suffix) {
    const std::string p = suffix;
    row((p + "cudaSetDevice").c_str(), [] { Check(cudaSetDevice(0), "set device"); });
    row((p + "cudaEventRecord_timing").c_str(),
        [&] { Check(cudaEventRecord(timing, s), "record"); });
    if (ipc != nullptr) {
      row((p + "cudaEventRecord_ipc").c_str(), [&] { Check(cudaEventRecord(ipc, s), "record"); });
      row((p + "cudaStreamWaitEvent_ipc").c_str(),
          [&] { Check(cudaStreamWaitEvent(s, ipc, 0), "wait event"); });
    }
    row((p + "launch_empty_1x32").c_str(), [&] {
      EmptyKernel<<<1, 32, 0, s>>>();
      Check(cudaGetLastError(), "launch");
    });
    row((p + "launch_empty_32768x256").c_str(), [&] {
      EmptyKernel<<<32768, 256, 0, s>>>();
      Check(cudaGetLastError(), "launch");
    });
    row((p + "cudaEventQuery_done").c_str(), [&] { cudaEventQuery(done); });
    row((p + "cudaStreamWaitEvent_done").c_str(),
        [&] { Check(cudaStreamWaitEvent(s, done, 0), "wait event"); });
    row((p + "timed_launch_record_launch_record").c_str(), [&] {
      Check(cudaEventRecord(timing, s), "record");
      EmptyKernel<<<32768, 256, 0, s>>>();
      Check(cudaEventRecord(timing, s), "record");
    });
  };
  rows("");
  // The same with a thread that polls an event every 50 µs (the kernel timer's poller).
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    Check(cudaSetDevice(0), "set device");
    while (!stop.load()) {
      cudaEventQuery(done);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  rows("polled_");
  stop = true;
  poller.join();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[2], "--child") == 0) {
    // The daemon's side: open the parent's IPC event and time the calls on it.
    cudaIpcEventHandle_t h;
    Unhex(argv[3], &h, sizeof(h));
    Check(cudaSetDevice(0), "set device");
    cudaEvent_t ipc;
    Check(cudaIpcOpenEventHandle(&ipc, h), "open event handle");
    std::printf("%s\n", Rows(std::atoi(argv[1]), ipc).c_str());
    return 0;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (reps < 100) {
    std::fprintf(stderr, "usage: cuda_call_bench [REPS>=100]\n");
    return 1;
  }
  Check(cudaSetDevice(0), "set device");
  cudaEvent_t ipc;
  Check(cudaEventCreateWithFlags(&ipc, cudaEventInterprocess | cudaEventDisableTiming), "event");
  cudaIpcEventHandle_t h;
  Check(cudaIpcGetEventHandle(&h, ipc), "event handle");
  const std::string own = Rows(reps, nullptr);
  // The child prints its rows on a pipe.
  int fds[2];
  if (pipe(fds) != 0) return 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  const std::string reps_s = std::to_string(reps), hex = Hex(&h, sizeof(h));
  char* child_argv[] = {argv[0], const_cast<char*>(reps_s.c_str()), const_cast<char*>("--child"),
                        const_cast<char*>(hex.c_str()), nullptr};
  pid_t pid;
  if (posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, child_argv, environ) != 0) return 1;
  close(fds[1]);
  std::string child;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) child.append(buf, n);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || child.empty()) {
    std::fprintf(stderr, "cuda_call_bench: the child failed\n");
    return 1;
  }
  while (!child.empty() && child.back() == '\n') child.pop_back();
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, 0), "props");
  std::printf(
      "{\n  \"device\": \"%s\", \"reps\": %d,\n  \"one_process\": {\n%s\n  },\n"
      "  \"ipc_event_from_another_process\": {\n%s\n  }\n}\n",
      prop.name, reps, own.c_str(), child.c_str());
  return 0;
}
