// The CUDA backend's memory, IPC, stream/event and timing contracts, with a separate peer
// process (kd_ipc_peer, and a PyTorch process where python3 with torch exists) as the client.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/kernels/registry.h"
#include "kernels/gpu/gpu_kernels.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/pattern.h"
#include "tests/support/run_op.h"

namespace kd {
namespace {

using testing::FillPattern;
using testing::Fnv1a;
using testing::FromHex;
using testing::MakeTensor;
using testing::PeerProcess;

const DeviceLoc kGpu{BackendKind::kCuda, 0};
constexpr uint64_t kMiB = 1 << 20;

std::vector<uint8_t> ReadDevice(const void* ptr, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

std::vector<uint8_t> Pattern(uint64_t seed, size_t offset, size_t bytes) {
  std::vector<uint8_t> all(offset + bytes);
  FillPattern(seed, all.data(), all.size());
  return std::vector<uint8_t>(all.begin() + offset, all.end());
}

// The word after "ok " in a peer's answer.
std::string Value(const std::string& answer) {
  EXPECT_EQ(answer.rfind("ok", 0), 0u) << answer;
  return answer.size() > 3 ? answer.substr(3) : "";
}

PeerProcess StartPeer() { return PeerProcess({testing::SelfDir() + "/kd_ipc_peer"}); }

MemoryHandle HandleOf(const std::string& hex, uint64_t offset, uint64_t size) {
  MemoryHandle h;
  h.ipc_handle = FromHex(hex);
  h.offset = offset;
  h.size = size;
  h.device = 0;
  return h;
}

TEST(CudaBackend, RegistryPrefersCudaWhenADeviceExists) {
  KD_REQUIRE_CUDA(probe);
  RegistryOptions options;
  options.preferred = "cuda";
  auto registry = BackendRegistry::Create(options);
  ASSERT_TRUE(registry.ok()) << registry.status();
  EXPECT_EQ((*registry)->Default()->kind(), BackendKind::kCuda);
  EXPECT_GE((*registry)->Default()->DeviceCount(), 1);
  EXPECT_EQ((*registry)->All().back()->kind(), BackendKind::kCpu);
}

TEST(CudaBackend, EveryVisibleDeviceIsServed) {
  KD_REQUIRE_CUDA(gpu);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(gpu->DeviceCount(), count);
  for (int d = 0; d < count; ++d) {
    const DeviceProperties p = gpu->Properties(d);
    EXPECT_FALSE(p.name.empty());
    EXPECT_EQ(p.arch.rfind("sm_", 0), 0u) << p.arch;
    auto region = gpu->Allocate(d, kMiB);
    ASSERT_TRUE(region.ok()) << region.status();
    EXPECT_EQ((*region)->loc().device, d);
    auto stream = gpu->CreateStream(d);
    ASSERT_TRUE(stream.ok()) << stream.status();
    EXPECT_TRUE(gpu->Synchronize(**stream).ok());
  }
  EXPECT_EQ(gpu->Allocate(count, kMiB).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu->CreateStream(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackend, ReleasedBlockIsReusedAndCounted) {
  KD_REQUIRE_CUDA(gpu);
  EXPECT_EQ(gpu->Allocate(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  void* first = nullptr;
  {
    auto region = gpu->Allocate(0, 3 * kMiB);
    ASSERT_TRUE(region.ok()) << region.status();
    first = (*region)->data();
    EXPECT_EQ((*region)->size(), 3 * kMiB);
    EXPECT_TRUE((*region)->owned());
    EXPECT_EQ(gpu->Memory(0).used, 4 * kMiB);  // the 2 MiB granule above 2 MiB
    EXPECT_EQ(gpu->Memory(0).pooled, 0u);
  }
  EXPECT_EQ(gpu->Memory(0).used, 0u);
  EXPECT_EQ(gpu->Memory(0).pooled, 4 * kMiB);
  auto again = gpu->Allocate(0, 3 * kMiB + 5);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->data(), first);
  EXPECT_EQ(gpu->Memory(0).pooled, 0u);
}

TEST(CudaBackend, PoolCapRefusesWithResourceExhaustedAndGivesFreeBlocksBack) {
  auto gpu = testing::MaybeCudaBackend(8 * kMiB);
  if (gpu == nullptr) GTEST_SKIP() << "no CUDA device on this machine";
  auto a = gpu->Allocate(0, 6 * kMiB);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(gpu->Allocate(0, 4 * kMiB).status().code(), absl::StatusCode::kResourceExhausted);
  a->reset();
  EXPECT_EQ(gpu->Memory(0).pooled, 6 * kMiB);
  auto b = gpu->Allocate(0, 4 * kMiB);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(gpu->Memory(0).pooled, 0u) << "the free 6 MiB block was given back to fit the cap";
  EXPECT_EQ(gpu->Memory(0).used, 4 * kMiB);
}

TEST(CudaBackend, DeviceMemoryReturnsToBaselineWhenTheBackendGoes) {
  size_t free_before = 0, total = 0;
  {
    auto probe = testing::MaybeCudaBackend();
    if (probe == nullptr) GTEST_SKIP() << "no CUDA device on this machine";
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  {
    auto gpu = testing::MaybeCudaBackend();
    auto stream = gpu->CreateStream(0).value();
    std::vector<std::unique_ptr<Region>> regions;
    for (int i = 0; i < 4; ++i) regions.push_back(gpu->Allocate(0, 64 * kMiB).value());
    size_t free_during = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_during, &total), cudaSuccess);
    EXPECT_LE(free_during + 256 * kMiB, free_before);
    regions.clear();
    EXPECT_EQ(gpu->Memory(0).used, 0u);
    EXPECT_TRUE(gpu->Synchronize(*stream).ok());
  }
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_GE(free_after + 8 * kMiB, free_before);
}

TEST(CudaBackend, ImportsASliceOfAnotherProcessAllocation) {
  KD_REQUIRE_CUDA(gpu);
  PeerProcess peer = StartPeer();
  ASSERT_TRUE(peer.ok());
  ASSERT_EQ(peer.Ask("alloc 1 4194304 11"), "ok");
  const std::string hex = Value(peer.Ask("export 1 0"));
  auto region = gpu->Import(HandleOf(hex, kMiB + 512, kMiB));
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_FALSE((*region)->owned());
  EXPECT_EQ((*region)->size(), kMiB);
  EXPECT_EQ(ReadDevice((*region)->data(), kMiB), Pattern(11, kMiB + 512, kMiB));
  EXPECT_GE(gpu->Memory(0).imported, 4 * kMiB);
  region->reset();
  EXPECT_EQ(gpu->Memory(0).imported, 0u);
  EXPECT_EQ(peer.Ask("quit"), "ok");
}

TEST(CudaBackend, SameAllocationImportedTwiceSharesOneMapping) {
  KD_REQUIRE_CUDA(gpu);
  PeerProcess peer = StartPeer();
  ASSERT_EQ(peer.Ask("alloc 1 4194304 12"), "ok");
  const std::string hex = Value(peer.Ask("export 1 0"));
  auto first = gpu->Import(HandleOf(hex, 0, 4096));
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = gpu->Import(HandleOf(hex, 2 * kMiB, 4096));
  ASSERT_TRUE(second.ok()) << second.status();
  const uint64_t mapped = gpu->Memory(0).imported;
  EXPECT_GE(mapped, 4 * kMiB);
  EXPECT_LT(mapped, 8 * kMiB) << "one allocation is counted once";
  first->reset();
  EXPECT_EQ(gpu->Memory(0).imported, mapped) << "the second region still holds the mapping";
  EXPECT_EQ(ReadDevice((*second)->data(), 4096), Pattern(12, 2 * kMiB, 4096));
  second->reset();
  EXPECT_EQ(gpu->Memory(0).imported, 0u);
  EXPECT_EQ(peer.Ask("quit"), "ok");
}

TEST(CudaBackend, OversizeImportIsInvalidArgumentAndLeavesNothingOpen) {
  KD_REQUIRE_CUDA(gpu);
  PeerProcess peer = StartPeer();
  ASSERT_EQ(peer.Ask("alloc 1 4194304 13"), "ok");
  const std::string hex = Value(peer.Ask("export 1 0"));
  auto over = gpu->Import(HandleOf(hex, 3 * kMiB, 2 * kMiB));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument) << over.status();
  EXPECT_NE(over.status().message().find("exceeds the real size"), absl::string_view::npos);
  EXPECT_EQ(gpu->Memory(0).imported, 0u);
  auto past = gpu->Import(HandleOf(hex, uint64_t{1} << 62, 1));
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  auto wraps = gpu->Import(HandleOf(hex, 16, ~uint64_t{0} - 8));
  EXPECT_EQ(wraps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu->Memory(0).imported, 0u);
  auto exact = gpu->Import(HandleOf(hex, 3 * kMiB, kMiB));
  EXPECT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(peer.Ask("quit"), "ok");
}

TEST(CudaBackend, GarbageHandleIsInvalidArgument) {
  KD_REQUIRE_CUDA(gpu);
  MemoryHandle h;
  h.ipc_handle = std::string(sizeof(cudaIpcMemHandle_t), '\x5a');
  h.size = 4096;
  EXPECT_EQ(gpu->Import(h).status().code(), absl::StatusCode::kInvalidArgument);
  h.ipc_handle = "short";
  EXPECT_EQ(gpu->Import(h).status().code(), absl::StatusCode::kInvalidArgument);
  h.ipc_handle.clear();
  EXPECT_EQ(gpu->Import(h).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu->Memory(0).imported, 0u);
  EXPECT_EQ(gpu->OpenEvent(0, std::string(sizeof(cudaIpcEventHandle_t), '\x11')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu->OpenEvent(0, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(gpu->Healthy());
}

TEST(CudaBackend, OwnProcessHandleIsInvalidArgument) {
  KD_REQUIRE_CUDA(gpu);
  auto region = gpu->Allocate(0, kMiB).value();
  auto exported = gpu->Export(*region);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->size, kMiB);
  EXPECT_EQ(exported->ipc_handle.size(), sizeof(cudaIpcMemHandle_t));
  EXPECT_EQ(gpu->Import(*exported).status().code(), absl::StatusCode::kInvalidArgument);
  // Memory of this process that the pool did not hand out: cudaIpcOpenMemHandle refuses it.
  void* raw = nullptr;
  ASSERT_EQ(cudaMalloc(&raw, 2 * kMiB), cudaSuccess);
  cudaIpcMemHandle_t h;
  ASSERT_EQ(cudaIpcGetMemHandle(&h, raw), cudaSuccess);
  MemoryHandle own;
  own.ipc_handle.assign(reinterpret_cast<const char*>(&h), sizeof(h));
  own.size = 4096;
  EXPECT_EQ(gpu->Import(own).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu->Memory(0).imported, 0u);
  cudaFree(raw);
  EXPECT_TRUE(gpu->Healthy());
}

TEST(CudaBackend, ExportedPoolMemoryIsReadableByAnotherProcess) {
  KD_REQUIRE_CUDA(gpu);
  auto region = gpu->Allocate(0, kMiB).value();
  std::vector<uint8_t> data = Pattern(21, 0, kMiB);
  ASSERT_EQ(cudaMemcpy(region->data(), data.data(), kMiB, cudaMemcpyHostToDevice), cudaSuccess);
  auto exported = gpu->Export(*region).value();
  EXPECT_EQ(exported.offset, 0u);
  EXPECT_EQ(gpu->Export(*region).value().ipc_handle, exported.ipc_handle);
  PeerProcess peer = StartPeer();
  std::ostringstream want;
  want << std::hex << Fnv1a(data.data() + 4096, 8192);
  EXPECT_EQ(
      peer.Ask(absl::StrCat("open_hash ",
                            testing::ToHex(exported.ipc_handle.data(), exported.ipc_handle.size()),
                            " 4096 8192")),
      "ok " + want.str());
  EXPECT_EQ(peer.Ask("quit"), "ok");
}

// Event ordering across processes, both ways. The peer fills the input only after a 300 ms spin
// and records an event; the backend's stream waits for that event before quantizing, so the
// result matches the new data (without the wait it would match the old). Then the backend
// quantizes into the peer's memory and records the peer's event; the peer waits on that event
// and sees the finished output.
TEST(CudaBackend, IpcEventsOrderWorkBetweenProcesses) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(2);
  auto cpu_stream = cpu->CreateStream(0).value();
  const int64_t m = 256, k = 512;
  const size_t in_bytes = m * k * 2, out_bytes = m * k, scale_bytes = m * (k / 128) * 4;
  PeerProcess peer = StartPeer();
  ASSERT_EQ(peer.Ask(absl::StrCat("alloc 1 ", in_bytes, " 31")), "ok");
  ASSERT_EQ(peer.Ask(absl::StrCat("alloc 2 ", out_bytes, " 32")), "ok");
  ASSERT_EQ(peer.Ask(absl::StrCat("alloc 3 ", scale_bytes, " 33")), "ok");
  const std::string in_hex = Value(peer.Ask("export 1 0"));
  const std::string out_hex = Value(peer.Ask("export 2 0"));
  const std::string scale_hex = Value(peer.Ask("export 3 0"));
  const std::string ready_hex = Value(peer.Ask("event 1"));
  const std::string done_hex = Value(peer.Ask("event 2"));
  auto input = gpu->Import(HandleOf(in_hex, 0, in_bytes)).value();
  auto output = gpu->Import(HandleOf(out_hex, 0, out_bytes)).value();
  auto scales = gpu->Import(HandleOf(scale_hex, 0, scale_bytes)).value();
  auto ready = gpu->OpenEvent(0, FromHex(ready_hex));
  ASSERT_TRUE(ready.ok()) << ready.status();
  auto done = gpu->OpenEvent(0, FromHex(done_hex));
  ASSERT_TRUE(done.ok()) << done.status();
  auto stream = gpu->CreateStream(0).value();

  // The CPU reference on the data the peer writes late (pattern 41).
  std::vector<uint8_t> host_in = Pattern(41, 0, in_bytes);
  std::vector<uint8_t> want_out(out_bytes), want_scales(scale_bytes);
  QuantizeArgs ref;
  ref.input = MakeTensor(host_in.data(), DType::kBF16, {m, k}, k, {});
  ref.output = MakeTensor(want_out.data(), DType::kE4M3FN, {m, k}, k, {});
  ref.scales = MakeTensor(want_scales.data(), DType::kF32, {m, k / 128}, k / 128, {});
  ref.granularity = QuantGranularity::k1x128;
  ASSERT_TRUE(RunOp(*cpu, ref, *cpu_stream, nullptr).ok());

  ASSERT_EQ(peer.Ask("delayed_fill 1 41 300 1"), "ok");
  ASSERT_TRUE(gpu->StreamWaitEvent(*stream, **ready).ok());
  QuantizeArgs q = ref;
  q.input = MakeTensor(input->data(), DType::kBF16, {m, k}, k, kGpu);
  q.output = MakeTensor(output->data(), DType::kE4M3FN, {m, k}, k, kGpu);
  q.scales = MakeTensor(scales->data(), DType::kF32, {m, k / 128}, k / 128, kGpu);
  ASSERT_TRUE(RunOp(*gpu, q, *stream, nullptr).ok());
  ASSERT_TRUE(gpu->RecordEvent(*stream, **done).ok());
  // No Synchronize here: the peer learns completion from the event alone.
  ASSERT_EQ(peer.Ask("wait 2"), "ok");
  std::ostringstream out_hash, scale_hash;
  out_hash << std::hex << Fnv1a(want_out.data(), out_bytes);
  scale_hash << std::hex << Fnv1a(want_scales.data(), scale_bytes);
  EXPECT_EQ(peer.Ask(absl::StrCat("hash 2 0 ", out_bytes)), "ok " + out_hash.str());
  EXPECT_EQ(peer.Ask(absl::StrCat("hash 3 0 ", scale_bytes)), "ok " + scale_hash.str());
  EXPECT_TRUE(gpu->Synchronize(*stream).ok());
  EXPECT_EQ(peer.Ask("quit"), "ok");
}

TEST(CudaBackend, PeerKilledWithMappingsOpenLeavesTheBackendServing) {
  KD_REQUIRE_CUDA(gpu);
  auto stream = gpu->CreateStream(0).value();
  {
    PeerProcess peer = StartPeer();
    ASSERT_EQ(peer.Ask("alloc 1 4194304 51"), "ok");
    const std::string hex = Value(peer.Ask("export 1 0"));
    auto region = gpu->Import(HandleOf(hex, 0, 4 * kMiB)).value();
    peer.Kill();
    region.reset();  // what the server does when the session of a dead client ends
  }
  EXPECT_EQ(gpu->Memory(0).imported, 0u);
  EXPECT_TRUE(gpu->Healthy());
  auto input = gpu->Allocate(0, 128 * 128 * 2).value();
  auto output = gpu->Allocate(0, 128 * 128).value();
  auto scales = gpu->Allocate(0, 128 * 4).value();
  ASSERT_EQ(cudaMemset(input->data(), 0x3c, 128 * 128 * 2), cudaSuccess);
  QuantizeArgs q;
  q.input = MakeTensor(input->data(), DType::kBF16, {128, 128}, 128, kGpu);
  q.output = MakeTensor(output->data(), DType::kE4M3FN, {128, 128}, 128, kGpu);
  q.scales = MakeTensor(scales->data(), DType::kF32, {128, 1}, 1, kGpu);
  q.granularity = QuantGranularity::k1x128;
  ASSERT_TRUE(RunOp(*gpu, q, *stream, nullptr).ok());
  EXPECT_TRUE(gpu->Synchronize(*stream).ok());
}

TEST(CudaBackend, KernelTimeArrivesThroughTheCallbackWithoutASynchronize) {
  KD_REQUIRE_CUDA(gpu);
  const int64_t m = 4096, k = 4096;
  auto input = gpu->Allocate(0, m * k * 2).value();
  auto output = gpu->Allocate(0, m * k).value();
  auto scales = gpu->Allocate(0, m * (k / 128) * 4).value();
  ASSERT_EQ(cudaMemset(input->data(), 0x41, m * k * 2), cudaSuccess);
  auto stream = gpu->CreateStream(0).value();
  QuantizeArgs q;
  q.input = MakeTensor(input->data(), DType::kBF16, {m, k}, k, kGpu);
  q.output = MakeTensor(output->data(), DType::kE4M3FN, {m, k}, k, kGpu);
  q.scales = MakeTensor(scales->data(), DType::kF32, {m, k / 128}, k / 128, kGpu);
  q.granularity = QuantGranularity::k1x128;
  std::atomic<int> calls{0};
  std::atomic<double> seconds{-1.0};
  ASSERT_TRUE(RunOp(*gpu, q, *stream, [&](double s) {
                seconds.store(s);
                calls.fetch_add(1);
              }).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (calls.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(calls.load(), 1);
  EXPECT_GT(seconds.load(), 0.0);
  EXPECT_LT(seconds.load(), 1.0);
}

TEST(CudaBackend, UnsupportedOpsAndForeignTensorsAreRefused) {
  KD_REQUIRE_CUDA(gpu);
  auto stream = gpu->CreateStream(0).value();
  auto input = gpu->Allocate(0, 256 * 256 * 4).value();
  auto output = gpu->Allocate(0, 256 * 256).value();
  auto scales = gpu->Allocate(0, 256 * 256 * 4).value();
  QuantizeArgs q;
  q.input = MakeTensor(input->data(), DType::kBF16, {256, 256}, 256, kGpu);
  q.output = MakeTensor(output->data(), DType::kE4M3FN, {256, 256}, 256, kGpu);
  q.scales = MakeTensor(scales->data(), DType::kF32, {256, 2}, 2, kGpu);
  // An op that breaks its contract never reaches a backend: Validate refuses it.
  q.granularity = QuantGranularity::kInvalid;
  EXPECT_EQ(Validate(q).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SupportsOp(*gpu, q).code(), absl::StatusCode::kInvalidArgument);
  // A valid GEMM whose operand format no NVIDIA matrix core reads (e4m3fnuz, MI300's), refused
  // before anything runs; e5m2, which the wgmma kernel does not read, runs on the tile GEMM.
  auto a = gpu->Allocate(0, 128 * 128).value();
  auto b = gpu->Allocate(0, 128 * 128).value();
  auto d = gpu->Allocate(0, 128 * 128 * 2).value();
  GemmArgs g;
  g.variant = GemmVariant::kNT;
  g.a = MakeTensor(a->data(), DType::kE4M3FNUZ, {128, 128}, 128, kGpu);
  g.a_scales = MakeTensor(scales->data(), DType::kF32, {128, 1}, 1, kGpu);
  g.b = MakeTensor(b->data(), DType::kE4M3FNUZ, {128, 128}, 128, kGpu);
  g.b_scales = MakeTensor(static_cast<char*>(scales->data()) + 4096, DType::kF32, {1, 1}, 1, kGpu);
  g.d = MakeTensor(d->data(), DType::kBF16, {128, 128}, 128, kGpu);
  ASSERT_TRUE(Validate(g).ok()) << Validate(g).status();
  // A device without FP8 matrix instructions (before sm_89) has no GEMM at all.
  const std::string arch = gpu->Properties(0).arch;
  const bool fp8_mma = arch.size() > 3 && std::atoi(arch.c_str() + 3) >= 89;  // "sm_89", "sm_90"
  const absl::StatusCode refused =
      fp8_mma ? absl::StatusCode::kFailedPrecondition : absl::StatusCode::kUnimplemented;
  EXPECT_EQ(SupportsOp(*gpu, g).code(), refused);
  EXPECT_EQ(RunOp(*gpu, g, *stream, nullptr).code(), refused);
  g.a.dtype = DType::kE5M2;
  g.b.dtype = DType::kE5M2;
  if (fp8_mma) EXPECT_TRUE(SupportsOp(*gpu, g).ok()) << SupportsOp(*gpu, g);

  q.granularity = QuantGranularity::k1x128;
  q.scales = MakeTensor(scales->data(), DType::kF32, {256, 2}, 2, kGpu);
  q.output.loc.device = 1;  // as if on a second GPU
  EXPECT_EQ(Validate(q).status().code(), absl::StatusCode::kFailedPrecondition);
  q.output.loc = {BackendKind::kCpu, 0};
  q.input.loc = {BackendKind::kCpu, 0};
  q.scales.loc = {BackendKind::kCpu, 0};
  // Valid, but on another backend than the stream's.
  EXPECT_EQ(RunOp(*gpu, q, *stream, nullptr).code(), absl::StatusCode::kFailedPrecondition);
}

// A PyTorch process exports a slice of a tensor the way trainers do (allocator block handle +
// the slice's byte offset); the backend reads exactly the slice's bytes.
TEST(CudaBackend, ImportsAPyTorchTensorSlice) {
  KD_REQUIRE_CUDA(gpu);
  const char* env = std::getenv("KD_TORCH_PEER");
  const std::string script = env != nullptr ? env : testing::SelfDir() + "/torch_peer.py";
  if (access(script.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << script;
  if (std::system("python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3 with CUDA PyTorch is not available";
  }
  PeerProcess peer({"python3", script});
  std::istringstream line(peer.Ask(""));
  std::string hex, want_hash;
  uint64_t offset = 0, bytes = 0;
  line >> hex >> offset >> bytes >> want_hash;
  ASSERT_EQ(hex.size(), 2 * sizeof(cudaIpcMemHandle_t)) << "peer said: " << line.str();
  EXPECT_GT(offset, 0u);
  auto region = gpu->Import(HandleOf(hex, offset, bytes));
  ASSERT_TRUE(region.ok()) << region.status();
  std::ostringstream got;
  got << std::hex << Fnv1a(ReadDevice((*region)->data(), bytes).data(), bytes);
  EXPECT_EQ(got.str(), want_hash);
}

// The quantizer converts blocks whose products are all finite with the hardware conversion
// (plus a fix-up for e4m3fnuz); it must give fp8::Encode's byte for every non-NaN float.
TEST(Fp8HardwareEncode, MatchesEncodeOnEveryNonNanFloat) {
  KD_REQUIRE_CUDA(backend);
  unsigned long long* mismatches = nullptr;
  uint32_t* first_bad = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&mismatches), sizeof(*mismatches)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&first_bad), sizeof(*first_bad)), cudaSuccess);
  const std::pair<cuda::Fp8Format, const char*> formats[] = {
      {cuda::Fp8Format::kE4M3FN, "e4m3fn"},
      {cuda::Fp8Format::kE4M3FNUZ, "e4m3fnuz"},
      {cuda::Fp8Format::kE5M2, "e5m2"}};
  for (const auto& [format, name] : formats) {
    ASSERT_EQ(cudaMemset(mismatches, 0, sizeof(*mismatches)), cudaSuccess);
    ASSERT_EQ(cudaMemset(first_bad, 0xFF, sizeof(*first_bad)), cudaSuccess);
    ASSERT_EQ(cuda::LaunchFp8EncodeCheck(format, mismatches, first_bad, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    unsigned long long bad = 0;
    uint32_t first = 0;
    ASSERT_EQ(cudaMemcpy(&bad, mismatches, sizeof(bad), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(&first, first_bad, sizeof(first), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(bad, 0u) << name << ": first differing input 0x" << std::hex << first;
  }
  cudaFree(mismatches);
  cudaFree(first_bad);
}

}  // namespace
}  // namespace kd
