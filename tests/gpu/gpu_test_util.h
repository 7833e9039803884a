// Helpers of the GPU test suite: the CUDA backend or a skip, tensors over host or device memory,
// and a peer process speaking kd_ipc_peer's line protocol.
#ifndef KERNELD_TESTS_GPU_GPU_TEST_UTIL_H_
#define KERNELD_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/backend.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/cuda_backend.h"
#include "kerneld/kernels/registry.h"

namespace kd {
namespace testing {

// The CUDA backend, or nullptr when this machine has no CUDA device (the caller skips).
inline std::unique_ptr<Backend> MaybeCudaBackend(uint64_t cap = 0) {
  return CreateCudaBackend(cap);
}

#define KD_REQUIRE_CUDA(backend)                    \
  auto backend = ::kd::testing::MaybeCudaBackend(); \
  if (backend == nullptr) GTEST_SKIP() << "no CUDA device on this machine"

inline Tensor MakeTensor(void* data, DType dtype, std::vector<int64_t> shape, int64_t row_stride,
                         DeviceLoc loc) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  t.loc = loc;
  for (int i = 0; i < t.rank; ++i) t.shape[i] = shape[i];
  t.strides[t.rank - 1] = 1;
  if (t.rank == 2) t.strides[0] = row_stride;
  return t;
}

// The directory of this test binary (peers and scripts are bundled beside it).
inline std::string SelfDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  return path.substr(0, path.rfind('/'));
}

// A child process with its stdin and stdout connected to us, one line per message.
class PeerProcess {
 public:
  explicit PeerProcess(std::vector<std::string> argv) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
  }
  ~PeerProcess() {
    if (in_ != nullptr) fclose(in_);
    if (out_ != nullptr) fclose(out_);
    if (pid_ > 0) {
      int status;
      waitpid(pid_, &status, 0);
    }
  }
  bool ok() const { return pid_ > 0 && in_ != nullptr && out_ != nullptr; }
  // Sends `line` (when not empty) and returns the answer line without its newline.
  std::string Ask(const std::string& line) {
    if (!line.empty()) {
      std::fprintf(in_, "%s\n", line.c_str());
      std::fflush(in_);
    }
    char buf[1 << 16];
    if (std::fgets(buf, sizeof(buf), out_) == nullptr) return "error peer closed";
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  void Kill() {
    if (pid_ > 0) kill(pid_, SIGKILL);
  }

 private:
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

// Device memory from the backend's pool, filled from and read back to host bytes.
class DeviceBuffer {
 public:
  DeviceBuffer(Backend& backend, const std::vector<uint8_t>& host) : size_(host.size()) {
    auto region = backend.Allocate(0, std::max<size_t>(host.size(), 1));
    EXPECT_TRUE(region.ok()) << region.status();
    region_ = std::move(region).value();
    EXPECT_EQ(cudaMemcpy(region_->data(), host.data(), host.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    // A copy from pageable memory may return before its DMA lands, and the backend's streams
    // do not wait for the legacy stream: finish the upload before an op reads it.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  void* data() const { return region_->data(); }
  // The first `bytes` bytes (all of them by default).
  std::vector<uint8_t> Read(size_t bytes) const {
    std::vector<uint8_t> out(bytes);
    EXPECT_EQ(cudaMemcpy(out.data(), region_->data(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  std::vector<uint8_t> Read() const { return Read(size_); }

 private:
  size_t size_;
  std::unique_ptr<Region> region_;
};

}  // namespace testing
}  // namespace kd

#endif  // KERNELD_TESTS_GPU_GPU_TEST_UTIL_H_
