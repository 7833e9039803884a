// The daemon on the CUDA backend, driven by separate client processes (kd_gpu_client): a client
// registers CUDA IPC handles of tensor slices, runs quantize and pad through the data plane
// (SYNC, and ASYNC ordered by wait/signal IPC events), and checks the results against the CPU
// backend; a client SIGKILLed with mappings open leaves the daemon serving, its mappings closed
// and device memory back at its baseline.
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/registry.h"
#include "server/daemon.h"
#include "tests/gpu/gpu_test_util.h"

namespace kd {
namespace {

using testing::PeerProcess;

class CudaDaemon {
 public:
  CudaDaemon() {
    char tmpl[] = "/tmp/kd_gpu_daemon_XXXXXX";
    dir_ = mkdtemp(tmpl);
    DaemonOptions o;
    o.data_socket = dir_ + "/data.sock";
    o.admin_socket = dir_ + "/admin.sock";
    o.metrics_address = "";
    o.backends.preferred = "cuda";
    o.backends.cpu_threads = 2;
    o.reap_interval = absl::Milliseconds(50);
    daemon_ = std::make_unique<Daemon>(o);
    started_ = daemon_->Start();
  }
  ~CudaDaemon() {
    daemon_->Shutdown(absl::Seconds(2));
    daemon_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  const absl::Status& started() const { return started_; }
  Daemon& daemon() { return *daemon_; }
  std::string socket() const { return dir_ + "/data.sock"; }
  uint64_t Imported() { return daemon_->backends().Get(BackendKind::kCuda)->Memory(0).imported; }

 private:
  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
  absl::Status started_;
};

#define KD_REQUIRE_CUDA_DAEMON(d) \
  CudaDaemon d;                   \
  if (!d.started().ok()) GTEST_SKIP() << "no CUDA daemon here: " << d.started()

PeerProcess StartClient(const std::string& socket, const std::string& mode, bool ring = false) {
  return PeerProcess({testing::SelfDir() + "/kd_gpu_client", socket, mode, ring ? "ring" : "grpc"});
}

// Polls `pred` for up to 20 s.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 400; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

size_t FreeDeviceBytes() {
  size_t free_bytes = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  return free_bytes;
}

TEST(CudaDaemon, ClientProcessQuantizesAndPadsThroughIpcHandles) {
  KD_REQUIRE_CUDA_DAEMON(d);
  PeerProcess client = StartClient(d.socket(), "check");
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client.Ask(""), "ok");
  // The session ends with the process; its mappings close.
  EXPECT_TRUE(Eventually([&] { return d.Imported() == 0; })) << d.Imported();
}

TEST(CudaDaemon, KilledClientsMappingsCloseAndTheDaemonKeepsServing) {
  KD_REQUIRE_CUDA_DAEMON(d);
  ASSERT_EQ(d.Imported(), 0u);
  const size_t baseline = FreeDeviceBytes();
  {
    PeerProcess holder = StartClient(d.socket(), "hold");
    ASSERT_TRUE(holder.ok());
    const std::string answer = holder.Ask("");
    ASSERT_EQ(answer.rfind("registered ", 0), 0u) << answer;
    // Imported bytes count whole mapped allocations, which hold the registered slices.
    EXPECT_GE(d.Imported(), std::stoull(answer.substr(11)));
    EXPECT_LT(FreeDeviceBytes(), baseline);
    holder.Kill();
  }
  EXPECT_TRUE(Eventually([&] { return d.Imported() == 0; })) << d.Imported();
  // The killed process's memory returns to the device once the daemon closed its mappings
  // (the driver keeps an allocation alive while another process maps it). 8 MiB of slack
  // for the driver's own bookkeeping.
  EXPECT_TRUE(Eventually([&] { return FreeDeviceBytes() + (8 << 20) >= baseline; }))
      << baseline - FreeDeviceBytes() << " bytes short of the baseline";
  PeerProcess next = StartClient(d.socket(), "check");
  EXPECT_EQ(next.Ask(""), "ok");
  EXPECT_TRUE(d.daemon().backends().Get(BackendKind::kCuda)->Healthy());
}

TEST(CudaDaemon, ClientProcessThroughASubmitRingQuantizesAndPads) {
  // The same checks (SYNC, and ASYNC ordered by wait/signal IPC events) with every op call
  // going through the client's submit ring.
  KD_REQUIRE_CUDA_DAEMON(d);
  PeerProcess client = StartClient(d.socket(), "check", /*ring=*/true);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client.Ask(""), "ok");
  EXPECT_TRUE(Eventually([&] { return d.Imported() == 0; })) << d.Imported();
}

TEST(CudaDaemon, KilledRingClientsMappingsCloseAndTheDaemonKeepsServing) {
  KD_REQUIRE_CUDA_DAEMON(d);
  {
    PeerProcess holder = StartClient(d.socket(), "hold", /*ring=*/true);
    ASSERT_TRUE(holder.ok());
    const std::string answer = holder.Ask("");
    ASSERT_EQ(answer.rfind("registered ", 0), 0u) << answer;
    holder.Kill();
  }
  EXPECT_TRUE(Eventually([&] { return d.Imported() == 0; })) << d.Imported();
  PeerProcess next = StartClient(d.socket(), "check", /*ring=*/true);
  EXPECT_EQ(next.Ask(""), "ok");
}

}  // namespace
}  // namespace kd
