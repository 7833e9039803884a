// End-to-end latency of a Quantize (1x128, 8192x4096 bf16 -> e4m3fn) called from this process
// through a running kerneld on the CUDA backend, against the kernel's own time as the daemon
// measures it (CUDA events around the kernel, OpResponse.kernel_seconds of the same SYNC calls).
//   SYNC:  wall time of the call (reply after completion)
//   ASYNC: wall time from the call to cudaEventSynchronize of the signal event returning
//   ASYNC pipelined: T client threads (one session) issue ASYNC calls back to back; wall time
//          from the first call to the last signal, per op (throughput, not latency)
// The tensors are slices of this process's allocations, registered once by CUDA IPC handle.
// Two same-run references split the time: the gRPC round trip alone (an empty Submit, which the
// daemon answers without touching a device) and the same Quantize on a 128x128 input, whose
// kernel takes a few microseconds (the daemon's request path plus the round trip).
// TRANSPORT "ring" attaches a submit ring (Client::AttachSubmitRing) so that every call goes
// through shared memory instead of a gRPC round trip (the floor is then the ring's round trip);
// env KD_E2E_RING_SPIN_US sets how long a caller polls its slot (default: the client's).
// ASYNC also reports when the reply came, a polling wait, and how long a stream of this process
// waits on the signal event (comments at the measurements). Prints one JSON document.
//
//   quant_e2e_bench SOCKET [REPS [M K [TRANSPORT]]]     TRANSPORT: grpc (default) or ring
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "kerneld/client/client.h"
#include "kerneld/client/tensor_ref.h"

namespace {

namespace v1 = ::kerneld::v1;
using Clock = std::chrono::steady_clock;

void Die(const std::string& why) {
  std::fprintf(stderr, "quant_e2e_bench: %s\n", why.c_str());
  std::exit(1);
}
void CheckCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Die(std::string(what) + ": " + cudaGetErrorString(e));
}

uint64_t RegisterSlice(kd::client::Client& c, char** data, size_t bytes, size_t offset) {
  char* base = nullptr;
  CheckCuda(cudaMalloc(reinterpret_cast<void**>(&base), offset + bytes), "cudaMalloc");
  *data = base + offset;
  cudaIpcMemHandle_t h;
  CheckCuda(cudaIpcGetMemHandle(&h, base), "cudaIpcGetMemHandle");
  v1::RegisterBufferRequest req;
  req.set_session_id(c.session_id());
  req.mutable_ipc()->set_kind(v1::IpcMemHandle::CUDA);
  req.mutable_ipc()->set_handle(std::string(reinterpret_cast<const char*>(&h), sizeof(h)));
  req.mutable_ipc()->set_offset(offset);
  req.set_size(bytes);
  grpc::ClientContext ctx;
  v1::RegisterBufferResponse resp;
  const grpc::Status st = c.stub()->RegisterBuffer(&ctx, req, &resp);
  if (!st.ok()) Die("RegisterBuffer: " + st.error_message());
  return resp.buffer_id();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Die("usage: quant_e2e_bench SOCKET [REPS [M K [grpc|ring]]]");
  const int reps = argc > 2 ? std::atoi(argv[2]) : 200;
  const int64_t m = argc > 4 ? std::atoll(argv[3]) : 8192,
                k = argc > 4 ? std::atoll(argv[4]) : 4096;
  if (reps < 4 || m < 128 || k < 128 || m % 128 != 0 || k % 128 != 0) Die("bad REPS, M or K");
  auto c = kd::client::Client::Connect(argv[1]);
  if (!c.ok()) Die("Connect: " + c.status().ToString());
  if (absl::Status s = (*c)->OpenSession("quant_e2e_bench"); !s.ok()) Die(s.ToString());
  const std::string transport = argc > 5 ? argv[5] : "grpc";
  if (transport != "grpc" && transport != "ring") Die("TRANSPORT must be grpc or ring");
  kd::client::SubmitRingOptions ring;
  if (const char* spin = std::getenv("KD_E2E_RING_SPIN_US")) {
    ring.spin = absl::Microseconds(std::atoi(spin));
  }
  if (transport == "ring") {
    if (absl::Status s = (*c)->AttachSubmitRing(ring); !s.ok())
      Die("AttachSubmitRing: " + s.ToString());
  }
  char *in = nullptr, *out = nullptr, *sc = nullptr;
  const uint64_t in_id = RegisterSlice(**c, &in, m * k * 2, 1 << 20);
  const uint64_t out_id = RegisterSlice(**c, &out, m * k, 4096);
  const uint64_t sc_id = RegisterSlice(**c, &sc, m * (k / 128) * 4, 256);
  {
    std::mt19937_64 rng(7);
    std::vector<uint16_t> host(m * k);
    for (auto& v : host) v = static_cast<uint16_t>((rng() & 0x807F) | ((100 + rng() % 40) << 7));
    CheckCuda(cudaMemcpy(in, host.data(), host.size() * 2, cudaMemcpyHostToDevice), "upload");
  }
  const v1::QuantizeOp op = kd::client::MakeQuantizeOp(
      kd::client::MakeTensorRef(in_id, v1::DTYPE_BF16, {m, k}),
      kd::client::MakeTensorRef(out_id, v1::DTYPE_E4M3FN, {m, k}),
      kd::client::MakeTensorRef(sc_id, v1::DTYPE_F32, {m, k / 128}), v1::QUANT_1X128);

  // The same op on the first 128x128 of the tensors (its rows are K apart in the input).
  v1::QuantizeOp tiny = op;
  for (v1::TensorRef* t : {tiny.mutable_input(), tiny.mutable_output(), tiny.mutable_scales()}) {
    t->set_shape(0, 128);
  }
  tiny.mutable_input()->set_shape(1, 128);
  tiny.mutable_output()->set_shape(1, 128);
  tiny.mutable_scales()->set_shape(1, 1);
  for (v1::TensorRef* t : {tiny.mutable_input(), tiny.mutable_output(), tiny.mutable_scales()}) {
    t->clear_strides();
  }
  tiny.mutable_input()->add_strides(k);
  tiny.mutable_input()->add_strides(1);
  tiny.mutable_output()->add_strides(k);
  tiny.mutable_output()->add_strides(1);
  tiny.mutable_scales()->add_strides(k / 128);
  tiny.mutable_scales()->add_strides(1);

  cudaEvent_t done;
  CheckCuda(cudaEventCreateWithFlags(&done, cudaEventInterprocess | cudaEventDisableTiming),
            "event");
  cudaIpcEventHandle_t hd;
  CheckCuda(cudaIpcGetEventHandle(&hd, done), "event handle");
  v1::Completion async;
  async.set_mode(v1::Completion::ASYNC);
  async.set_signal_event(std::string(reinterpret_cast<const char*>(&hd), sizeof(hd)));

  for (int i = 0; i < 20; ++i) {
    if (!(*c)->Quantize(op).ok() || !(*c)->Quantize(op, async).ok()) Die("warm-up failed");
    CheckCuda(cudaEventSynchronize(done), "wait");
  }
  // KD_E2E_ONLY=sync|async: only that loop of the full-size op (so that the daemon's
  // kerneld_request_phase_seconds, scraped around this process, describe one kind of call).
  if (const char* only = std::getenv("KD_E2E_ONLY")) {
    const std::string mode = only;
    if (mode != "sync" && mode != "async") Die("KD_E2E_ONLY must be sync or async");
    std::vector<double> us, kernel;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      auto r = mode == "sync" ? (*c)->Quantize(op) : (*c)->Quantize(op, async);
      if (!r.ok()) Die("Quantize: " + r.status().ToString());
      if (mode == "async") CheckCuda(cudaEventSynchronize(done), "wait");
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      if (mode == "sync") kernel.push_back(r->kernel_seconds * 1e6);
    }
    std::printf(
        "{\"op\": \"quantize 1x128 bf16>e4m3fn %lldx%lld\", \"transport\": \"%s\","
        " \"only\": \"%s\", \"reps\": %d, \"us_median\": %.1f,"
        " \"kernel_us_median\": %.1f}\n",
        static_cast<long long>(m), static_cast<long long>(k), transport.c_str(), mode.c_str(), reps,
        Median(us), kernel.empty() ? 0.0 : Median(kernel));
    return 0;
  }
  std::vector<double> floor_us, tiny_sync_us, tiny_async_us, tiny_kernel_us;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    if (!(*c)->Submit({}).ok()) Die("empty Submit failed");
    floor_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    auto r = (*c)->Quantize(tiny);
    if (!r.ok()) Die("tiny Quantize SYNC: " + r.status().ToString());
    tiny_sync_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    tiny_kernel_us.push_back(r->kernel_seconds * 1e6);
    t0 = Clock::now();
    if (!(*c)->Quantize(tiny, async).ok()) Die("tiny Quantize ASYNC failed");
    CheckCuda(cudaEventSynchronize(done), "wait");
    tiny_async_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::vector<double> sync_us, kernel_us, async_us, reply_us;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    auto r = (*c)->Quantize(op);
    const auto t1 = Clock::now();
    if (!r.ok()) Die("Quantize SYNC: " + r.status().ToString());
    sync_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    kernel_us.push_back(r->kernel_seconds * 1e6);
  }
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    auto r = (*c)->Quantize(op, async);
    const auto replied = Clock::now();
    if (!r.ok()) Die("Quantize ASYNC: " + r.status().ToString());
    CheckCuda(cudaEventSynchronize(done), "wait");
    const auto t1 = Clock::now();
    async_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    reply_us.push_back(std::chrono::duration<double, std::micro>(replied - t0).count());
  }
  // Two more looks at ASYNC. The stream wait: after the reply this process records a timing
  // event on its own stream, makes that stream wait on the signal event and records another;
  // their GPU-clock distance is how long a consumer stream of the client waits for the daemon's
  // signal (the rest of the kernel plus the cross-process event's own latency); beside it, the
  // host time from the reply to that second event completing. The query wait: the call waited
  // for by polling cudaEventQuery instead of cudaEventSynchronize.
  cudaStream_t probe_stream;
  CheckCuda(cudaStreamCreateWithFlags(&probe_stream, cudaStreamNonBlocking), "stream");
  cudaEvent_t before, after;
  CheckCuda(cudaEventCreate(&before), "event");
  CheckCuda(cudaEventCreate(&after), "event");
  std::vector<double> stream_wait_us, host_after_reply_us, query_us;
  for (int i = 0; i < reps; ++i) {
    auto r = (*c)->Quantize(op, async);
    const auto t1 = Clock::now();
    if (!r.ok()) Die("Quantize ASYNC: " + r.status().ToString());
    CheckCuda(cudaEventRecord(before, probe_stream), "record");
    CheckCuda(cudaStreamWaitEvent(probe_stream, done, 0), "wait event");
    CheckCuda(cudaEventRecord(after, probe_stream), "record");
    CheckCuda(cudaEventSynchronize(after), "wait");
    host_after_reply_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - t1).count());
    float ms = 0;
    CheckCuda(cudaEventElapsedTime(&ms, before, after), "elapsed");
    stream_wait_us.push_back(ms * 1e3);
  }
  // The same stream wait once the host has seen the signal: what waiting on an already
  // completed signal event costs a stream of this process.
  std::vector<double> completed_wait_host_us;
  for (int i = 0; i < reps; ++i) {
    auto r = (*c)->Quantize(op, async);
    if (!r.ok()) Die("Quantize ASYNC: " + r.status().ToString());
    CheckCuda(cudaEventSynchronize(done), "wait");
    const auto t1 = Clock::now();
    CheckCuda(cudaEventRecord(before, probe_stream), "record");
    CheckCuda(cudaStreamWaitEvent(probe_stream, done, 0), "wait event");
    CheckCuda(cudaEventRecord(after, probe_stream), "record");
    CheckCuda(cudaEventSynchronize(after), "wait");
    completed_wait_host_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - t1).count());
  }
  // ASYNC ordered after this process's stream: an IPC event recorded on it just before the
  // call is the request's wait_event (the daemon's stream waits on it before launching), as a
  // trainer hands over a tensor its stream just produced.
  cudaEvent_t ready;
  CheckCuda(cudaEventCreateWithFlags(&ready, cudaEventInterprocess | cudaEventDisableTiming),
            "event");
  cudaIpcEventHandle_t hr;
  CheckCuda(cudaIpcGetEventHandle(&hr, ready), "event handle");
  v1::Completion ordered = async;
  ordered.set_wait_event(std::string(reinterpret_cast<const char*>(&hr), sizeof(hr)));
  // How long an event recorded on this process's idle stream takes to read complete here, for
  // the IPC event and for a plain one (is the IPC event's own record slow to execute?).
  std::vector<double> ipc_record_us, plain_record_us;
  for (int i = 0; i < reps; ++i) {
    for (auto [event, us] :
         {std::pair{ready, &ipc_record_us}, std::pair{after, &plain_record_us}}) {
      const auto t0 = Clock::now();
      CheckCuda(cudaEventRecord(event, probe_stream), "record");
      cudaError_t state;
      while ((state = cudaEventQuery(event)) == cudaErrorNotReady) {
      }
      CheckCuda(state, "query");
      us->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
  }
  std::vector<double> wait_event_us;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    CheckCuda(cudaEventRecord(ready, probe_stream), "record");
    auto r = (*c)->Quantize(op, ordered);
    if (!r.ok()) Die("Quantize ASYNC with wait_event: " + r.status().ToString());
    CheckCuda(cudaEventSynchronize(done), "wait");
    wait_event_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    auto r = (*c)->Quantize(op, async);
    if (!r.ok()) Die("Quantize ASYNC: " + r.status().ToString());
    cudaError_t state;
    while ((state = cudaEventQuery(done)) == cudaErrorNotReady) {
    }
    CheckCuda(state, "query");
    query_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  auto pipelined = [&](int threads) {
    const int per_thread = reps / threads;
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int i = 0; i < per_thread; ++i) {
          auto r = (*c)->Quantize(op, async);
          if (!r.ok()) Die("Quantize ASYNC: " + r.status().ToString());
        }
      });
    }
    for (auto& th : pool) th.join();
    CheckCuda(cudaEventSynchronize(done), "wait");  // the last op recorded it last
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
           (per_thread * threads);
  };
  const double pipe1 = pipelined(1), pipe4 = pipelined(4);
  cudaDeviceProp prop;
  CheckCuda(cudaGetDeviceProperties(&prop, 0), "props");
  const double kernel = Median(kernel_us);
  std::printf(
      "{\n  \"device\": \"%s\",\n  \"op\": \"quantize 1x128 bf16>e4m3fn %lldx%lld\",\n"
      "  \"transport\": \"%s\", \"client_spin_us\": %.0f, \"ring_calls\": %llu,"
      " \"ring_fallbacks\": %llu,\n"
      "  \"reps\": %d,\n  \"kernel_us_median\": %.1f,\n"
      "  \"sync_us_median\": %.1f, \"sync_us_p90\": %.1f, \"sync_ratio\": %.3f,\n"
      "  \"async_us_median\": %.1f, \"async_us_p90\": %.1f, \"async_ratio\": %.3f,\n"
      "  \"async_pipelined_1thread_us_per_op\": %.1f, \"pipelined_1thread_ratio\": %.3f,\n"
      "  \"async_pipelined_4threads_us_per_op\": %.1f, \"pipelined_4threads_ratio\": %.3f,\n"
      "  \"rpc_floor_empty_submit_us_median\": %.1f, \"rpc_floor_us_p90\": %.1f,\n"
      "  \"tiny_128x128_kernel_us_median\": %.1f, \"tiny_sync_us_median\": %.1f,"
      " \"tiny_async_us_median\": %.1f,\n"
      "  \"async_reply_us_median\": %.1f, \"async_query_wait_us_median\": %.1f,"
      " \"async_query_wait_ratio\": %.3f,\n"
      "  \"stream_wait_gpu_us_median\": %.1f, \"stream_wait_host_after_reply_us_median\": %.1f,"
      " \"stream_wait_on_completed_signal_host_us_median\": %.1f,\n"
      "  \"async_with_wait_event_us_median\": %.1f,\n"
      "  \"record_to_complete_ipc_event_us_median\": %.1f,"
      " \"record_to_complete_plain_event_us_median\": %.1f\n}\n",
      prop.name, static_cast<long long>(m), static_cast<long long>(k), transport.c_str(),
      absl::ToDoubleMicroseconds(ring.spin),
      static_cast<unsigned long long>((*c)->submit_ring_counts().ring_calls),
      static_cast<unsigned long long>((*c)->submit_ring_counts().fallbacks), reps, kernel,
      Median(sync_us), Percentile(sync_us, 0.9), Median(sync_us) / kernel, Median(async_us),
      Percentile(async_us, 0.9), Median(async_us) / kernel, pipe1, pipe1 / kernel, pipe4,
      pipe4 / kernel, Median(floor_us), Percentile(floor_us, 0.9), Median(tiny_kernel_us),
      Median(tiny_sync_us), Median(tiny_async_us), Median(reply_us), Median(query_us),
      Median(query_us) / kernel, Median(stream_wait_us), Median(host_after_reply_us),
      Median(completed_wait_host_us), Median(wait_event_us), Median(ipc_record_us),
      Median(plain_record_us));
  return 0;
}
