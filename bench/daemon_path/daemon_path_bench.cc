// daemon_path_bench: where the daemon's host time goes for one request on the submit-ring path,
// measured on the CPU backend (no GPU needed): parse, session lookup, bind, validate, the
// executor's per-op metric series, the RPC metric, and the whole call through a ring.
//
// An in-process kerneld (CPU backend, one kernel thread, no metrics endpoint) on a temporary
// socket; one client session with a submit ring and three registered shm tensors: a 1x128
// quantize of a 4x128 bf16 matrix into e4m3fn (the smallest real op, so that the kernel does not
// hide the path). The component cases call the daemon's own code the way the ring path does.
// BM_RingQuantizeSync reports the means of kerneld_request_phase_seconds over its calls
// (admit: bind, validate, events, hand-off; queue; launch: on the CPU backend the kernel itself
// and the executor around it) and the kernel time, in µs.
//
//   daemon_path_bench [--benchmark_repetitions=5] [--benchmark_format=json]
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "google/protobuf/arena.h"
#include "kerneld/client/client.h"
#include "kerneld/client/shm_buffer.h"
#include "kerneld/client/tensor_ref.h"
#include "kerneld/kernels/ops.h"
#include "prometheus/metric_family.h"
#include "server/daemon.h"
#include "server/proto_convert.h"

namespace {

namespace v1 = ::kerneld::v1;
using kd::client::Client;
using kd::client::ShmBuffer;

void Check(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "daemon_path_bench: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

struct Env {
  std::string dir;
  std::unique_ptr<kd::Daemon> daemon;
  std::unique_ptr<Client> client;
  std::vector<ShmBuffer> buffers;
  v1::QuantizeOp op;
  std::string ring_request_bytes;  // a serialized RingRequest of `op`, SYNC

  Env() {
    char tmpl[] = "/tmp/kd_path_bench.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) Check(absl::InternalError("mkdtemp"), "temp dir");
    dir = tmpl;
    kd::DaemonOptions o;
    o.data_socket = dir + "/data.sock";
    o.admin_socket = dir + "/admin.sock";
    o.metrics_address = "";
    o.backends.preferred = "cpu";
    o.backends.cpu_threads = 1;
    daemon = std::make_unique<kd::Daemon>(o);
    Check(daemon->Start(), "daemon start");
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o.data_socket);
    Check(c.status(), "connect");
    client = *std::move(c);
    Check(client->OpenSession("daemon_path_bench"), "open session");
    const int64_t m = 4, k = 128;
    v1::TensorRef refs[3];
    const struct {
      v1::DType dtype;
      std::vector<int64_t> shape;
    } specs[3] = {
        {v1::DTYPE_BF16, {m, k}}, {v1::DTYPE_E4M3FN, {m, k}}, {v1::DTYPE_F32, {m, k / 128}}};
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<uint64_t> bytes = kd::client::ContiguousBytes(specs[i].dtype, specs[i].shape);
      Check(bytes.status(), "bytes");
      absl::StatusOr<ShmBuffer> b = ShmBuffer::Create(*bytes);
      Check(b.status(), "shm");
      absl::StatusOr<uint64_t> id = client->RegisterBuffer(*b);
      Check(id.status(), "register");
      refs[i] =
          kd::client::TensorRefBuilder(*id).Dtype(specs[i].dtype).Shape(specs[i].shape).Build();
      buffers.push_back(*std::move(b));
    }
    op = kd::client::MakeQuantizeOp(refs[0], refs[1], refs[2], v1::QUANT_1X128);
    v1::RingRequest r;
    *r.mutable_quantize()->mutable_op() = op;
    r.mutable_quantize()->mutable_completion()->set_mode(v1::Completion::SYNC);
    ring_request_bytes = r.SerializeAsString();
    Check(client->AttachSubmitRing(), "attach ring");
  }

  ~Env() {
    client.reset();
    buffers.clear();
    daemon->Shutdown(absl::Seconds(1));
    daemon.reset();
    rmdir(dir.c_str());
  }

  std::shared_ptr<kd::Session> session() {
    absl::StatusOr<std::shared_ptr<kd::Session>> s = daemon->sessions().Find(client->session_id());
    Check(s.status(), "find session");
    return *s;
  }

  kd::Op BoundOp() {
    std::shared_ptr<kd::Session> s = session();
    kd::OpBinder binder(*s);
    absl::StatusOr<kd::Op> bound = binder.BindOp(op);
    Check(bound.status(), "bind");
    return *bound;
  }

  // Sum and count of kerneld_request_phase_seconds{phase} (or, for "kernel", of every
  // kerneld_kernel_duration_seconds series).
  std::pair<double, double> Histogram(const std::string& phase) {
    double sum = 0, count = 0;
    const std::string family =
        phase == "kernel" ? "kerneld_kernel_duration_seconds" : "kerneld_request_phase_seconds";
    for (const prometheus::MetricFamily& f : daemon->metrics().registry()->Collect()) {
      if (f.name != family) continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        bool match = phase == "kernel";
        for (const auto& l : m.label) match |= l.name == "phase" && l.value == phase;
        if (!match) continue;
        sum += m.histogram.sample_sum;
        count += static_cast<double>(m.histogram.sample_count);
      }
    }
    return {sum, count};
  }
};

Env* env = nullptr;

// The whole call through the ring, as a trainer makes it (SYNC).
void BM_RingQuantizeSync(benchmark::State& state) {
  const char* const kPhases[] = {"admit", "queue", "launch", "kernel"};
  std::pair<double, double> before[4];
  for (int i = 0; i < 4; ++i) before[i] = env->Histogram(kPhases[i]);
  for (auto _ : state) Check(env->client->Quantize(env->op).status(), "quantize");
  for (int i = 0; i < 4; ++i) {
    const auto after = env->Histogram(kPhases[i]);
    const double n = after.second - before[i].second;
    state.counters[absl::StrCat(kPhases[i], "_us")] =
        n > 0 ? (after.first - before[i].first) / n * 1e6 : 0.0;
  }
}
BENCHMARK(BM_RingQuantizeSync)->UseRealTime();

// An empty Submit through the ring: the transport and the daemon's request skeleton.
void BM_RingEmptySubmit(benchmark::State& state) {
  for (auto _ : state) Check(env->client->Submit({}).status(), "submit");
}
BENCHMARK(BM_RingEmptySubmit)->UseRealTime();

// The ring thread's copy and parse of one slot (what SubmitRingServer::TakeSlot does).
void BM_ParseRingRequest(benchmark::State& state) {
  for (auto _ : state) {
    std::string bytes(env->ring_request_bytes.data(), env->ring_request_bytes.size());
    v1::RingRequest request;
    benchmark::DoNotOptimize(request.ParseFromString(bytes));
  }
}
BENCHMARK(BM_ParseRingRequest);

// The same into reused memory: a copy buffer and an arena whose first block is reused (what
// SubmitRingServer::TakeSlot does since the arena parse).
void BM_ParseRingRequestArena(benchmark::State& state) {
  constexpr size_t kBlock = 16 << 10;
  std::unique_ptr<char[]> copy(new char[64 << 10]);
  std::unique_ptr<char[]> block(new char[kBlock]);
  const std::string& bytes = env->ring_request_bytes;
  for (auto _ : state) {
    std::memcpy(copy.get(), bytes.data(), bytes.size());
    google::protobuf::ArenaOptions options;
    options.initial_block = block.get();
    options.initial_block_size = kBlock;
    google::protobuf::Arena arena(options);
    auto* request = google::protobuf::Arena::CreateMessage<v1::RingRequest>(&arena);
    benchmark::DoNotOptimize(request->ParseFromArray(copy.get(), static_cast<int>(bytes.size())));
  }
}
BENCHMARK(BM_ParseRingRequestArena);

void BM_SessionFind(benchmark::State& state) {
  const std::string id = env->client->session_id();
  for (auto _ : state) benchmark::DoNotOptimize(env->daemon->sessions().Find(id));
}
BENCHMARK(BM_SessionFind);

// OpBinder::BindOp of a QuantizeOp: enums, three tensors looked up in the session and bound,
// regions taken.
void BM_BindQuantize(benchmark::State& state) {
  std::shared_ptr<kd::Session> s = env->session();
  for (auto _ : state) {
    kd::OpBinder binder(*s);
    benchmark::DoNotOptimize(binder.BindOp(env->op));
    benchmark::DoNotOptimize(binder.TakeRegions());
  }
}
BENCHMARK(BM_BindQuantize);

// The shared validation and the backend's Supports, as the service runs them before hand-off.
void BM_ValidateSupports(benchmark::State& state) {
  const kd::Op op = env->BoundOp();
  kd::Backend* backend = env->daemon->backends().Default();
  for (auto _ : state) {
    absl::StatusOr<kd::ValidatedOp> validated = kd::Validate(op);
    benchmark::DoNotOptimize(validated);
    benchmark::DoNotOptimize(backend->Supports(*validated));
  }
}
BENCHMARK(BM_ValidateSupports);

// The op's kerneld_kernel_duration_seconds series, looked up from its labels.
void BM_KernelSeriesFromLabels(benchmark::State& state) {
  const kd::Op op = env->BoundOp();
  kd::Metrics& metrics = env->daemon->metrics();
  for (auto _ : state) {
    benchmark::DoNotOptimize(&metrics.KernelSeries(kd::OpName(op), kd::OpVariantLabel(op),
                                                   kd::OpDTypeLabel(op), "cpu:0",
                                                   kd::OpShapeClass(op)));
  }
}
BENCHMARK(BM_KernelSeriesFromLabels);

// What the executor does instead since it caches series per queue: the op's OpLabelKey looked
// up in a flat_hash_map of series (Executor::KernelSeries).
void BM_KernelSeriesCached(benchmark::State& state) {
  const kd::Op op = env->BoundOp();
  absl::flat_hash_map<uint64_t, prometheus::Histogram*> cache;
  cache[kd::OpLabelKey(op)] = &env->daemon->metrics().KernelSeries(
      kd::OpName(op), kd::OpVariantLabel(op), kd::OpDTypeLabel(op), "cpu:0", kd::OpShapeClass(op));
  for (auto _ : state) benchmark::DoNotOptimize(cache[kd::OpLabelKey(op)]);
}
BENCHMARK(BM_KernelSeriesCached);

// One finished ring call's kerneld_rpc_* observation.
void BM_ObserveRpc(benchmark::State& state) {
  kd::Metrics& metrics = env->daemon->metrics();
  for (auto _ : state) {
    metrics.ObserveRpc("ring.Quantize", absl::StatusCodeToString(absl::StatusCode::kOk), 1e-5);
  }
}
BENCHMARK(BM_ObserveRpc);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  env = new Env();
  benchmark::RunSpecifiedBenchmarks();
  delete env;
  benchmark::Shutdown();
  return 0;
}
