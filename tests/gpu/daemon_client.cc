// kd_gpu_client: a trainer-like process for the daemon-level GPU tests. It owns CUDA memory,
// registers slices of it with the daemon through CUDA IPC handles, and runs ops through the
// data plane with the C++ client.
//
//   kd_gpu_client SOCKET check   quantize (SYNC, and ASYNC ordered by wait/signal IPC events) and
//                                pad through the daemon, each checked against the CPU backend in
//                                this process; prints "ok" or "fail <reason>", exit 0 / 1
//   kd_gpu_client SOCKET hold    registers three 64 MiB slices, prints "registered <bytes>", and
//                                waits to be killed
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "kerneld/client/client.h"
#include "kerneld/client/tensor_ref.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/kernels/registry.h"
#include "tests/support/run_op.h"

namespace kd {
namespace {

namespace v1 = ::kerneld::v1;

[[noreturn]] void Fail(const std::string& why) {
  std::printf("fail %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(1);
}
void Check(bool ok, const std::string& what) {
  if (!ok) Fail(what);
}
void CheckCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}
template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) Fail(absl::StrCat(what, ": ", v.status().ToString()));
  return *std::move(v);
}

// `bytes` at byte `offset` inside a larger allocation of this process (as PyTorch tensors are
// slices of the caching allocator's blocks), registered with the daemon by IPC handle.
struct Slice {
  char* base = nullptr;
  char* data = nullptr;
  size_t bytes = 0;
  uint64_t id = 0;
};
Slice RegisterSlice(client::Client& c, size_t bytes, size_t offset) {
  Slice s;
  s.bytes = bytes;
  CheckCuda(cudaMalloc(reinterpret_cast<void**>(&s.base), offset + bytes + 4096), "cudaMalloc");
  s.data = s.base + offset;
  cudaIpcMemHandle_t h;
  CheckCuda(cudaIpcGetMemHandle(&h, s.base), "cudaIpcGetMemHandle");
  v1::RegisterBufferRequest req;
  req.set_session_id(c.session_id());
  v1::IpcMemHandle* ipc = req.mutable_ipc();
  ipc->set_kind(v1::IpcMemHandle::CUDA);
  ipc->set_handle(std::string(reinterpret_cast<const char*>(&h), sizeof(h)));
  ipc->set_offset(offset);
  ipc->set_device(0);
  req.set_size(bytes);
  grpc::ClientContext ctx;
  v1::RegisterBufferResponse resp;
  const grpc::Status st = c.stub()->RegisterBuffer(&ctx, req, &resp);
  Check(st.ok(), absl::StrCat("RegisterBuffer: ", st.error_message()));
  s.id = resp.buffer_id();
  return s;
}

std::vector<uint16_t> RandomBF16(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = static_cast<uint16_t>((rng() & 0x807F) | ((100 + rng() % 40) << 7));
  return v;
}

std::vector<uint8_t> Read(const void* dev, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  CheckCuda(cudaMemcpy(out.data(), dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  return out;
}

Tensor HostTensor2(void* data, DType dtype, int64_t rows, int64_t cols) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.rank = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.strides[0] = cols;
  t.strides[1] = 1;
  return t;
}

void HoldStream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<uintptr_t>(ms)));
}

void RunCheck(client::Client& c) {
  const int64_t m = 512, k = 1024;
  const size_t in_bytes = m * k * 2, out_bytes = m * k, sc_bytes = m * (k / 128) * 4;
  Slice in = RegisterSlice(c, in_bytes, (1 << 20) + 256);
  Slice out = RegisterSlice(c, out_bytes, 4096);
  Slice sc = RegisterSlice(c, sc_bytes, 512);
  auto cpu = CreateCpuBackend(2);
  auto cpu_stream = Must(cpu->CreateStream(0), "cpu stream");
  auto reference = [&](std::vector<uint16_t>& x, std::vector<uint8_t>& o, std::vector<uint8_t>& s) {
    QuantizeArgs a;
    a.input = HostTensor2(x.data(), DType::kBF16, m, k);
    a.output = HostTensor2(o.data(), DType::kE4M3FN, m, k);
    a.scales = HostTensor2(s.data(), DType::kF32, m, k / 128);
    a.granularity = QuantGranularity::k1x128;
    Check(RunOp(*cpu, a, *cpu_stream, nullptr).ok(), "cpu reference");
  };
  const v1::QuantizeOp op = client::MakeQuantizeOp(
      client::MakeTensorRef(in.id, v1::DTYPE_BF16, {m, k}),
      client::MakeTensorRef(out.id, v1::DTYPE_E4M3FN, {m, k}),
      client::MakeTensorRef(sc.id, v1::DTYPE_F32, {m, k / 128}), v1::QUANT_1X128);

  // SYNC.
  std::vector<uint16_t> x1 = RandomBF16(m * k, 1);
  CheckCuda(cudaMemcpy(in.data, x1.data(), in_bytes, cudaMemcpyHostToDevice), "upload");
  CheckCuda(cudaMemset(out.data, 0xA5, out_bytes), "poison");
  Must(c.Quantize(op), "Quantize SYNC");
  std::vector<uint8_t> want_out(out_bytes), want_sc(sc_bytes);
  reference(x1, want_out, want_sc);
  Check(Read(out.data, out_bytes) == want_out, "SYNC quantize output differs from the cpu");
  Check(Read(sc.data, sc_bytes) == want_sc, "SYNC quantize scales differ from the cpu");

  // ASYNC: this process writes the input late on its own stream and records `ready`; the
  // daemon's stream waits on it, quantizes and records `done`; only `done` says it finished.
  cudaStream_t stream;
  CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cudaEvent_t ready, done;
  const unsigned flags = cudaEventInterprocess | cudaEventDisableTiming;
  CheckCuda(cudaEventCreateWithFlags(&ready, flags), "event");
  CheckCuda(cudaEventCreateWithFlags(&done, flags), "event");
  cudaIpcEventHandle_t hr, hd;
  CheckCuda(cudaIpcGetEventHandle(&hr, ready), "event handle");
  CheckCuda(cudaIpcGetEventHandle(&hd, done), "event handle");
  v1::Completion async;
  async.set_mode(v1::Completion::ASYNC);
  async.set_wait_event(std::string(reinterpret_cast<const char*>(&hr), sizeof(hr)));
  async.set_signal_event(std::string(reinterpret_cast<const char*>(&hd), sizeof(hd)));
  std::vector<uint16_t> x2 = RandomBF16(m * k, 2);
  void* pinned = nullptr;
  CheckCuda(cudaMallocHost(&pinned, in_bytes), "pinned");
  std::memcpy(pinned, x2.data(), in_bytes);
  CheckCuda(cudaLaunchHostFunc(stream, HoldStream, reinterpret_cast<void*>(uintptr_t{300})),
            "hold");
  CheckCuda(cudaMemcpyAsync(in.data, pinned, in_bytes, cudaMemcpyHostToDevice, stream), "copy");
  CheckCuda(cudaEventRecord(ready, stream), "record");
  Must(c.Quantize(op, async), "Quantize ASYNC");
  CheckCuda(cudaEventSynchronize(done), "wait done");
  reference(x2, want_out, want_sc);
  Check(Read(out.data, out_bytes) == want_out, "ASYNC quantize output differs from the cpu");
  Check(Read(sc.data, sc_bytes) == want_sc, "ASYNC quantize scales differ from the cpu");

  // ASYNC whose wait event has already completed when the request arrives: the result must
  // still be the new input's.
  std::vector<uint16_t> x3 = RandomBF16(m * k, 3);
  std::memcpy(pinned, x3.data(), in_bytes);
  CheckCuda(cudaMemcpyAsync(in.data, pinned, in_bytes, cudaMemcpyHostToDevice, stream), "copy");
  CheckCuda(cudaEventRecord(ready, stream), "record");
  CheckCuda(cudaStreamSynchronize(stream), "sync");
  Must(c.Quantize(op, async), "Quantize ASYNC after a completed wait event");
  CheckCuda(cudaEventSynchronize(done), "wait done");
  reference(x3, want_out, want_sc);
  Check(Read(out.data, out_bytes) == want_out,
        "ASYNC (completed wait) output differs from the cpu");
  Check(Read(sc.data, sc_bytes) == want_sc, "ASYNC (completed wait) scales differ from the cpu");

  // Pad, SYNC: 4 groups, alignment 128.
  const int64_t groups = 4, padded_rows = m + groups * 127;
  Slice ends = RegisterSlice(c, groups * 4, 0);
  Slice padded = RegisterSlice(c, padded_rows * k * 2, 256);
  Slice pends = RegisterSlice(c, groups * 4, 64);
  std::vector<int32_t> e = {100, 100, 300, static_cast<int32_t>(m)};
  CheckCuda(cudaMemcpy(ends.data, e.data(), groups * 4, cudaMemcpyHostToDevice), "ends");
  CheckCuda(cudaMemset(padded.data, 0xA5, padded_rows * k * 2), "poison");
  Must(c.Pad(client::MakePadOp(client::MakeTensorRef(in.id, v1::DTYPE_BF16, {m, k}),
                               client::MakeTensorRef(ends.id, v1::DTYPE_I32, {groups}),
                               client::MakeTensorRef(padded.id, v1::DTYPE_BF16, {padded_rows, k}),
                               client::MakeTensorRef(pends.id, v1::DTYPE_I32, {groups}), 128)),
       "Pad SYNC");
  std::vector<uint8_t> want_pad(padded_rows * k * 2, 0xA5), want_pe(groups * 4);
  PadArgs p;
  p.input = HostTensor2(x3.data(), DType::kBF16, m, k);
  Tensor te;
  te.data = e.data();
  te.dtype = DType::kI32;
  te.rank = 1;
  te.shape[0] = groups;
  te.strides[0] = 1;
  p.group_ends = te;
  p.output = HostTensor2(want_pad.data(), DType::kBF16, padded_rows, k);
  Tensor tp = te;
  tp.data = want_pe.data();
  p.padded_group_ends = tp;
  p.alignment = 128;
  Check(RunOp(*cpu, p, *cpu_stream, nullptr).ok(), "cpu pad");
  Check(Read(padded.data, want_pad.size()) == want_pad, "pad output differs from the cpu");
  Check(Read(pends.data, want_pe.size()) == want_pe, "padded group ends differ from the cpu");
  std::printf("ok\n");
  std::fflush(stdout);
}

}  // namespace
}  // namespace kd

int main(int argc, char** argv) {
  using namespace kd;
  if (argc < 3) {
    std::fprintf(stderr, "usage: kd_gpu_client SOCKET check|hold [ring]\n");
    return 2;
  }
  auto c = Must(client::Client::Connect(argv[1]), "Connect");
  const absl::Status opened = c->OpenSession(argv[2]);
  if (!opened.ok()) Fail(absl::StrCat("OpenSession: ", opened.ToString()));
  if (argc > 3 && std::string(argv[3]) == "ring") {
    const absl::Status attached = c->AttachSubmitRing();
    if (!attached.ok()) Fail(absl::StrCat("AttachSubmitRing: ", attached.ToString()));
  }
  const std::string mode = argv[2];
  if (mode == "check") {
    RunCheck(*c);
    if (c->has_submit_ring() && c->submit_ring_counts().ring_calls == 0) {
      Fail("the ring was attached but no call went through it");
    }
    return 0;
  }
  if (mode == "hold") {
    const size_t bytes = size_t{64} << 20;
    for (int i = 0; i < 3; ++i) RegisterSlice(*c, bytes, 4096 * i);
    std::printf("registered %zu\n", 3 * bytes);
    std::fflush(stdout);
    for (;;) pause();
  }
  Fail("unknown mode " + mode);
}
