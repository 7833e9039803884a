// rpc_bench: the cost of kerneld's RPC path over its Unix socket, and CPU kernel throughput
// seen through it. Prints one JSON document on stdout.
//
//   rpc_bench --daemon=build/server/kerneld       spawns a daemon (--backend=cpu) on a
//                                                 temporary socket and stops it at the end
//   rpc_bench --socket=/run/kerneld/kerneld.sock  uses a running daemon
//
// Latency cases, each sequential (1 client) and concurrent (--clients clients, as separate
// processes and as threads of one process, every client on its own connection and session):
//   submit_empty     Submit with no ops: the round trip of the RPC path alone
//   quantize_small   Quantize 1x128 of a --quantize_rows x --quantize_cols bf16 matrix
// With --ring every client attaches a submit ring, so the same calls go through shared memory.
// Each reports p50/p90/p99/max of the client-side round trip, the daemon-reported kernel time
// (p50), and the calls per second all clients completed together.
//
// With --throughput, larger ops run sequentially and report what the CPU kernels reach through
// the RPC path: bytes moved (quantize, pad) or FLOP/s (gemm), from the daemon's kernel time and
// from the client's round trip.
//
// Every measurement runs in a forked child process; the parent never touches gRPC (a gRPC
// process must not fork), it only spawns, synchronises and collects.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"
#include "kerneld/client/client.h"
#include "kerneld/client/shm_buffer.h"
#include "kerneld/client/tensor_ref.h"

ABSL_FLAG(std::string, socket, "", "data socket of a running kerneld");
ABSL_FLAG(std::string, daemon, "",
          "path of a kerneld binary to spawn on a temporary socket (--backend=cpu) instead");
ABSL_FLAG(int, cpu_threads, 0, "--cpu_threads passed to a spawned daemon (0: its default)");
ABSL_FLAG(int, iterations, 2000, "measured calls per client and case");
ABSL_FLAG(int, warmup, 200, "unmeasured calls per client before each case");
ABSL_FLAG(int, clients, 4, "concurrent clients");
ABSL_FLAG(int64_t, quantize_rows, 128, "rows (M) of the small quantize");
ABSL_FLAG(int64_t, quantize_cols, 128, "columns (K) of the small quantize, a multiple of 128");
ABSL_FLAG(bool, ring, false,
          "every client attaches a submit ring: op calls through shared memory, not gRPC");
ABSL_FLAG(bool, throughput, false, "also measure CPU kernel throughput with larger ops");
ABSL_FLAG(int, throughput_iterations, 10, "measured calls per throughput case");
ABSL_FLAG(std::string, quantize_large, "4096x4096", "MxK of the throughput quantize");
ABSL_FLAG(std::string, gemm, "1024x1024x1024", "MxNxK of the throughput NT gemm");
ABSL_FLAG(std::string, pad, "16384x1024", "TxH (bf16) of the throughput pad, 8 groups");

namespace {

namespace v1 = ::kerneld::v1;
using kd::client::Client;
using kd::client::ShmBuffer;
using Clock = std::chrono::steady_clock;

// ----- one client's work ----------------------------------------------------------------------

struct Sample {
  double round_trip_s;
  double kernel_s;
};

// A registered buffer plus its ref, filled with a fixed pattern.
struct Tensor {
  ShmBuffer buffer;
  v1::TensorRef ref;
};

absl::StatusOr<Tensor> MakeTensor(Client& client, v1::DType dtype,
                                  const std::vector<int64_t>& shape) {
  absl::StatusOr<uint64_t> bytes = kd::client::ContiguousBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Create(*bytes);
  if (!buffer.ok()) return buffer.status();
  absl::StatusOr<uint64_t> id = client.RegisterBuffer(*buffer);
  if (!id.ok()) return id.status();
  Tensor t{*std::move(buffer), kd::client::TensorRefBuilder(*id).Dtype(dtype).Shape(shape).Build()};
  // bf16 values in about [-8, 8): sign, a small exponent range and a varied mantissa.
  uint16_t* p = t.buffer.As<uint16_t>();
  for (uint64_t i = 0; i < t.buffer.size() / 2; ++i) {
    const uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    p[i] = static_cast<uint16_t>(((h >> 31) << 15) | ((124 + (h >> 24) % 6) << 7) | (h & 0x7F));
  }
  return t;
}

// A call under test: returns the daemon-reported kernel seconds.
using Call = std::function<absl::StatusOr<kd::client::OpResult>()>;

struct Case {
  std::string name;
  Call call;
};

// The cases of one client, set up on its own session.
class Workload {
 public:
  static absl::StatusOr<std::unique_ptr<Workload>> Create(const std::string& socket, int tag) {
    kd::client::ClientOptions options;
    options.channel_tag = tag + 1;
    options.op_timeout = absl::Seconds(600);
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(socket, options);
    if (!client.ok()) return client.status();
    auto w = std::unique_ptr<Workload>(new Workload(*std::move(client)));
    if (absl::Status s = w->client_->OpenSession(absl::StrCat("rpc_bench-", tag)); !s.ok()) {
      return s;
    }
    if (absl::GetFlag(FLAGS_ring)) {
      if (absl::Status s = w->client_->AttachSubmitRing(); !s.ok()) return s;
    }
    return w;
  }

  Client& client() { return *client_; }

  absl::Status AddTensor(const std::string& key, v1::DType dtype,
                         const std::vector<int64_t>& shape) {
    absl::StatusOr<Tensor> t = MakeTensor(*client_, dtype, shape);
    if (!t.ok()) return t.status();
    tensors_.emplace_back(key, std::make_unique<Tensor>(*std::move(t)));
    return absl::OkStatus();
  }
  const v1::TensorRef& Ref(const std::string& key) const {
    for (const auto& [k, t] : tensors_) {
      if (k == key) return t->ref;
    }
    std::fprintf(stderr, "rpc_bench: no tensor %s\n", key.c_str());
    std::abort();
  }
  Tensor& Get(const std::string& key) {
    for (auto& [k, t] : tensors_) {
      if (k == key) return *t;
    }
    std::abort();
  }

 private:
  explicit Workload(std::unique_ptr<Client> client) : client_(std::move(client)) {}

  std::unique_ptr<Client> client_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> tensors_;
};

absl::StatusOr<std::vector<Case>> LatencyCases(Workload& w) {
  const int64_t m = absl::GetFlag(FLAGS_quantize_rows), k = absl::GetFlag(FLAGS_quantize_cols);
  if (absl::Status s = w.AddTensor("x", v1::DTYPE_BF16, {m, k}); !s.ok()) return s;
  if (absl::Status s = w.AddTensor("xq", v1::DTYPE_E4M3FN, {m, k}); !s.ok()) return s;
  if (absl::Status s = w.AddTensor("xs", v1::DTYPE_F32, {m, k / 128}); !s.ok()) return s;
  const v1::QuantizeOp quantize =
      kd::client::MakeQuantizeOp(w.Ref("x"), w.Ref("xq"), w.Ref("xs"), v1::QUANT_1X128);
  Client* c = &w.client();
  return std::vector<Case>{
      {"submit_empty", [c] { return c->Submit({}); }},
      {"quantize_small", [c, quantize] { return c->Quantize(quantize); }},
  };
}

absl::Status ParseDims(const std::string& flag, const std::string& text, size_t count,
                       std::vector<int64_t>* dims) {
  dims->clear();
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", text, " is malformed"));
    }
    dims->push_back(v);
  }
  if (dims->size() != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", text, " needs ", count, " dimensions"));
  }
  return absl::OkStatus();
}

// The throughput ops' shapes, from the flags.
struct ThroughputPlan {
  int64_t qm, qk;      // quantize
  int64_t gm, gn, gk;  // gemm
  int64_t t, h;        // pad
  static constexpr int64_t kGroups = 8, kAlign = 128;
};

absl::StatusOr<ThroughputPlan> ParseThroughputPlan() {
  std::vector<int64_t> q, g, p;
  if (absl::Status s = ParseDims("quantize_large", absl::GetFlag(FLAGS_quantize_large), 2, &q);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseDims("gemm", absl::GetFlag(FLAGS_gemm), 3, &g); !s.ok()) return s;
  if (absl::Status s = ParseDims("pad", absl::GetFlag(FLAGS_pad), 2, &p); !s.ok()) return s;
  return ThroughputPlan{q[0], q[1], g[0], g[1], g[2], p[0], p[1]};
}

// Name of each throughput case and what it moves (bytes read + written) or computes (FLOPs),
// in the order ThroughputCases builds them.
struct CaseInfo {
  std::string name;
  double bytes;
  double flops;
};

std::vector<CaseInfo> ThroughputInfo(const ThroughputPlan& p) {
  const double q_bytes = static_cast<double>(p.qm) * p.qk * 3;  // bf16 in, fp8 out
  const int64_t padded_rows = p.t + ThroughputPlan::kGroups * (ThroughputPlan::kAlign - 1);
  return {
      {absl::StrFormat("quantize_1x128_%dx%d", p.qm, p.qk), q_bytes, 0},
      {absl::StrFormat("quantize_128x128_%dx%d", p.qm, p.qk), q_bytes, 0},
      {absl::StrFormat("gemm_nt_%dx%dx%d", p.gm, p.gn, p.gk),
       static_cast<double>(p.gm * p.gk + p.gn * p.gk + p.gm * p.gn * 2), 2.0 * p.gm * p.gn * p.gk},
      {absl::StrFormat("pad_a128_%dx%d", p.t, p.h),
       static_cast<double>(p.t * p.h * 2 + padded_rows * p.h * 2), 0},
  };
}

absl::StatusOr<std::vector<Case>> ThroughputCases(Workload& w, const ThroughputPlan& p) {
  constexpr int64_t kGroups = ThroughputPlan::kGroups, kAlign = ThroughputPlan::kAlign;
  for (const auto& [key, dtype, shape] :
       std::vector<std::tuple<std::string, v1::DType, std::vector<int64_t>>>{
           {"qx", v1::DTYPE_BF16, {p.qm, p.qk}},
           {"qy", v1::DTYPE_E4M3FN, {p.qm, p.qk}},
           {"qs1", v1::DTYPE_F32, {p.qm, p.qk / 128}},
           {"qs2", v1::DTYPE_F32, {p.qm / 128, p.qk / 128}},
           {"ga", v1::DTYPE_E4M3FN, {p.gm, p.gk}},
           {"gas", v1::DTYPE_F32, {p.gm, p.gk / 128}},
           {"gb", v1::DTYPE_E4M3FN, {p.gn, p.gk}},
           {"gbs", v1::DTYPE_F32, {p.gn / 128, p.gk / 128}},
           {"gd", v1::DTYPE_BF16, {p.gm, p.gn}},
           {"px", v1::DTYPE_BF16, {p.t, p.h}},
           {"pends", v1::DTYPE_I32, {kGroups}},
           {"py", v1::DTYPE_BF16, {p.t + kGroups * (kAlign - 1), p.h}},
           {"ppends", v1::DTYPE_I32, {kGroups}}}) {
    if (absl::Status s = w.AddTensor(key, dtype, shape); !s.ok()) return s;
  }
  // FP8 operands hold small finite codes (the bf16 fill pattern's bytes would include NaNs).
  for (const char* key : {"ga", "gb"}) {
    Tensor& t = w.Get(key);
    for (uint64_t i = 0; i < t.buffer.size(); ++i) t.buffer.As<uint8_t>()[i] = 0x30 + (i % 7);
  }
  for (const char* key : {"gas", "gbs"}) {
    for (float& s : w.Get(key).buffer.Span<float>()) s = 0.0625f;
  }
  int32_t* ends = w.Get("pends").buffer.As<int32_t>();
  for (int64_t i = 0; i < kGroups; ++i) ends[i] = static_cast<int32_t>(p.t * (i + 1) / kGroups);

  Client* c = &w.client();
  const v1::QuantizeOp q1 =
      kd::client::MakeQuantizeOp(w.Ref("qx"), w.Ref("qy"), w.Ref("qs1"), v1::QUANT_1X128);
  const v1::QuantizeOp q2 =
      kd::client::MakeQuantizeOp(w.Ref("qx"), w.Ref("qy"), w.Ref("qs2"), v1::QUANT_128X128);
  const v1::GemmOp gemm =
      kd::client::MakeGemmNT(w.Ref("ga"), w.Ref("gas"), w.Ref("gb"), w.Ref("gbs"), w.Ref("gd"));
  const v1::PadOp pad =
      kd::client::MakePadOp(w.Ref("px"), w.Ref("pends"), w.Ref("py"), w.Ref("ppends"), kAlign);
  const std::vector<CaseInfo> info = ThroughputInfo(p);
  return std::vector<Case>{
      {info[0].name, [c, q1] { return c->Quantize(q1); }},
      {info[1].name, [c, q2] { return c->Quantize(q2); }},
      {info[2].name, [c, gemm] { return c->Gemm(gemm); }},
      {info[3].name, [c, pad] { return c->Pad(pad); }},
  };
}

// Runs `c` warmup + n times, timing each call; `measured_s` receives the time of the n calls.
absl::StatusOr<std::vector<Sample>> Measure(const Case& c, int warmup, int n, double* measured_s) {
  for (int i = 0; i < warmup; ++i) {
    if (auto r = c.call(); !r.ok()) return r.status();
  }
  std::vector<Sample> samples;
  samples.reserve(n);
  const auto begin = Clock::now();
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    absl::StatusOr<kd::client::OpResult> r = c.call();
    const auto end = Clock::now();
    if (!r.ok()) return r.status();
    samples.push_back({std::chrono::duration<double>(end - start).count(), r->kernel_seconds});
  }
  *measured_s = std::chrono::duration<double>(Clock::now() - begin).count();
  return samples;
}

// ----- process plumbing -----------------------------------------------------------------------

// Pipes between the parent and one child: the child writes 'r' when ready for the next case and
// then blocks until the parent writes 'g'; results follow as raw doubles.
struct ChildPipes {
  int ready[2];
  int go[2];
  int results[2];
};

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// One measured batch from one client, as sent through the results pipe.
void SendSamples(int fd, const std::vector<Sample>& samples, double wall_s) {
  const uint64_t n = samples.size();
  WriteAll(fd, &n, sizeof(n));
  WriteAll(fd, &wall_s, sizeof(wall_s));
  WriteAll(fd, samples.data(), n * sizeof(Sample));
}

bool ReceiveSamples(int fd, std::vector<Sample>* samples, double* wall_s) {
  uint64_t n;
  if (!ReadAll(fd, &n, sizeof(n)) || !ReadAll(fd, wall_s, sizeof(*wall_s))) return false;
  const size_t old = samples->size();
  samples->resize(old + n);
  return ReadAll(fd, samples->data() + old, n * sizeof(Sample));
}

// What a child runs: `threads` clients (1 for a process client), each on its own connection,
// every case behind a barrier so that all clients run it at the same time.
[[noreturn]] void ChildMain(const std::string& socket, int tag, int threads, ChildPipes pipes,
                            bool throughput) {
  close(pipes.ready[0]);
  close(pipes.go[1]);
  close(pipes.results[0]);
  std::vector<std::unique_ptr<Workload>> workloads;
  std::vector<std::vector<Case>> cases;
  for (int t = 0; t < threads; ++t) {
    absl::StatusOr<std::unique_ptr<Workload>> w = Workload::Create(socket, tag * 64 + t);
    if (!w.ok()) {
      std::fprintf(stderr, "rpc_bench: client %d: %s\n", tag, w.status().ToString().c_str());
      _exit(1);
    }
    if (throughput) {
      absl::StatusOr<ThroughputPlan> plan = ParseThroughputPlan();
      absl::StatusOr<std::vector<Case>> tc =
          plan.ok() ? ThroughputCases(**w, *plan) : plan.status();
      if (!tc.ok()) {
        std::fprintf(stderr, "rpc_bench: %s\n", tc.status().ToString().c_str());
        _exit(1);
      }
      cases.push_back(*std::move(tc));
    } else {
      absl::StatusOr<std::vector<Case>> lc = LatencyCases(**w);
      if (!lc.ok()) {
        std::fprintf(stderr, "rpc_bench: %s\n", lc.status().ToString().c_str());
        _exit(1);
      }
      cases.push_back(*std::move(lc));
    }
    workloads.push_back(*std::move(w));
  }
  const int warmup = throughput ? 1 : absl::GetFlag(FLAGS_warmup);
  const int iterations =
      throughput ? absl::GetFlag(FLAGS_throughput_iterations) : absl::GetFlag(FLAGS_iterations);
  for (size_t ci = 0; ci < cases[0].size(); ++ci) {
    char byte = 'r';
    if (!WriteAll(pipes.ready[1], &byte, 1) || !ReadAll(pipes.go[0], &byte, 1)) _exit(1);
    std::vector<std::vector<Sample>> samples(threads);
    std::vector<double> walls(threads);
    std::vector<absl::Status> errors(threads);
    absl::Barrier* barrier = new absl::Barrier(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        if (barrier->Block()) delete barrier;
        absl::StatusOr<std::vector<Sample>> s =
            Measure(cases[t][ci], warmup, iterations, &walls[t]);
        if (s.ok()) {
          samples[t] = *std::move(s);
        } else {
          errors[t] = s.status();
        }
      });
    }
    for (std::thread& th : pool) th.join();
    for (int t = 0; t < threads; ++t) {
      if (!errors[t].ok()) {
        std::fprintf(stderr, "rpc_bench: %s: %s\n", cases[t][ci].name.c_str(),
                     errors[t].ToString().c_str());
        _exit(1);
      }
      SendSamples(pipes.results[1], samples[t], walls[t]);
    }
  }
  workloads.clear();
  _exit(0);
}

struct Child {
  pid_t pid;
  int ready, go, results;
};

Child SpawnChild(const std::string& socket, int tag, int threads, bool throughput) {
  ChildPipes p;
  if (pipe(p.ready) != 0 || pipe(p.go) != 0 || pipe(p.results) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  const pid_t pid = fork();
  if (pid == 0) ChildMain(socket, tag, threads, p, throughput);
  close(p.ready[1]);
  close(p.go[0]);
  close(p.results[1]);
  return {pid, p.ready[0], p.go[1], p.results[0]};
}

struct Stats {
  std::string name, mode;
  int clients = 0;
  std::vector<Sample> samples;
  double wall_s = 0;  // the longest client's time for its measured calls
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * v.size()));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// Runs one configuration (`processes` children with `threads` clients each) and returns one
// Stats per case, or an empty vector when a child failed.
std::vector<Stats> RunConfiguration(const std::string& socket, const std::string& mode,
                                    int processes, int threads, size_t case_count,
                                    const std::vector<std::string>& names, bool throughput) {
  std::vector<Child> children;
  for (int i = 0; i < processes; ++i) {
    children.push_back(SpawnChild(socket, i, threads, throughput));
  }
  std::vector<Stats> stats;
  bool failed = false;
  for (size_t ci = 0; ci < case_count && !failed; ++ci) {
    char byte;
    for (const Child& c : children) failed = failed || !ReadAll(c.ready, &byte, 1);
    if (failed) break;
    for (const Child& c : children) WriteAll(c.go, "g", 1);
    Stats s{names[ci], mode, processes * threads, {}, 0};
    for (const Child& c : children) {
      for (int t = 0; t < threads; ++t) {
        double wall;
        if (!ReceiveSamples(c.results, &s.samples, &wall)) failed = true;
        s.wall_s = std::max(s.wall_s, wall);
      }
    }
    stats.push_back(std::move(s));
  }
  for (const Child& c : children) {
    close(c.ready);
    close(c.go);
    close(c.results);
    int status = 0;
    waitpid(c.pid, &status, 0);
    failed = failed || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (failed) stats.clear();
  return stats;
}

// ----- the daemon -----------------------------------------------------------------------------

struct SpawnedDaemon {
  pid_t pid = -1;
  std::string dir, socket, log;
};

bool StartDaemon(const std::string& binary, SpawnedDaemon* d) {
  char dir_template[] = "/tmp/kerneld-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return false;
  }
  d->dir = dir_template;
  d->socket = d->dir + "/kerneld.sock";
  d->log = d->dir + "/kerneld.log";
  std::vector<std::string> args = {binary, "--socket=" + d->socket,
                                   "--admin_socket=" + d->dir + "/admin.sock",
                                   "--metrics_address=", "--backend=cpu"};
  if (const int threads = absl::GetFlag(FLAGS_cpu_threads); threads > 0) {
    args.push_back(absl::StrCat("--cpu_threads=", threads));
  }
  d->pid = fork();
  if (d->pid == 0) {
    FILE* log = std::fopen(d->log.c_str(), "w");
    if (log != nullptr) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::perror("execv");
    _exit(127);
  }
  // The socket appears once the daemon listens.
  for (int i = 0; i < 200; ++i) {
    struct stat st;
    if (stat(d->socket.c_str(), &st) == 0) return true;
    int status;
    if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
      std::fprintf(stderr, "rpc_bench: the daemon exited early; see %s\n", d->log.c_str());
      d->pid = -1;
      return false;
    }
    usleep(50000);
  }
  std::fprintf(stderr, "rpc_bench: no socket after 10 s; see %s\n", d->log.c_str());
  return false;
}

void StopDaemon(SpawnedDaemon* d) {
  if (d->pid > 0) {
    kill(d->pid, SIGTERM);
    waitpid(d->pid, nullptr, 0);
  }
  unlink(d->log.c_str());
  rmdir(d->dir.c_str());
}

// ----- output -----------------------------------------------------------------------------------

std::string LatencyJson(const Stats& s) {
  std::vector<double> rt, kernel;
  for (const Sample& x : s.samples) {
    rt.push_back(x.round_trip_s * 1e6);
    kernel.push_back(x.kernel_s * 1e6);
  }
  double mean = 0;
  for (double v : rt) mean += v;
  mean /= std::max<size_t>(1, rt.size());
  return absl::StrFormat(
      "    {\"case\": \"%s\", \"mode\": \"%s\", \"clients\": %d, \"calls\": %d, "
      "\"p50_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f, "
      "\"mean_us\": %.1f, \"kernel_p50_us\": %.1f, \"calls_per_second\": %.0f}",
      s.name, s.mode, s.clients, s.samples.size(), Percentile(rt, 0.5), Percentile(rt, 0.9),
      Percentile(rt, 0.99), Percentile(rt, 1.0), mean, Percentile(kernel, 0.5),
      s.samples.size() / std::max(s.wall_s, 1e-9));
}

std::string ThroughputJson(const Stats& s, double bytes, double flops) {
  std::vector<double> rt, kernel;
  for (const Sample& x : s.samples) {
    rt.push_back(x.round_trip_s);
    kernel.push_back(x.kernel_s);
  }
  const double k50 = Percentile(kernel, 0.5), r50 = Percentile(rt, 0.5);
  auto rate = [](double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; };
  std::string row = absl::StrFormat(
      "    {\"case\": \"%s\", \"calls\": %d, \"kernel_p50_ms\": %.3f, "
      "\"round_trip_p50_ms\": %.3f, \"kernel_gb_per_s\": %.2f, \"round_trip_gb_per_s\": %.2f",
      s.name, s.samples.size(), k50 * 1e3, r50 * 1e3, rate(bytes, k50) / 1e9,
      rate(bytes, r50) / 1e9);
  if (flops > 0) {
    absl::StrAppendFormat(&row, ", \"kernel_gflop_per_s\": %.2f, \"round_trip_gflop_per_s\": %.2f",
                          rate(flops, k50) / 1e9, rate(flops, r50) / 1e9);
  }
  return row + "}";
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures kerneld's RPC round trip (empty Submit, small Quantize; sequential and "
      "concurrent) and, with --throughput, CPU kernel throughput over RPC. Prints JSON.\n"
      "usage: rpc_bench (--daemon=PATH | --socket=PATH) [options]");
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  const std::string daemon_path = absl::GetFlag(FLAGS_daemon);
  std::string socket = absl::GetFlag(FLAGS_socket);
  if (daemon_path.empty() == socket.empty()) {
    std::fprintf(stderr, "rpc_bench: give exactly one of --daemon=PATH or --socket=PATH\n");
    return 2;
  }
  const int clients = absl::GetFlag(FLAGS_clients);
  if (clients < 1 || absl::GetFlag(FLAGS_iterations) < 1 ||
      absl::GetFlag(FLAGS_quantize_cols) % 128 != 0) {
    std::fprintf(stderr,
                 "rpc_bench: --clients and --iterations must be >= 1, "
                 "--quantize_cols a multiple of 128\n");
    return 2;
  }
  SpawnedDaemon daemon;
  if (!daemon_path.empty()) {
    if (!StartDaemon(daemon_path, &daemon)) {
      StopDaemon(&daemon);
      return 1;
    }
    socket = daemon.socket;
  }

  const std::vector<std::string> latency_names = {"submit_empty", "quantize_small"};
  std::vector<Stats> latency;
  bool ok = true;
  for (const auto& [mode, processes, threads] : std::vector<std::tuple<std::string, int, int>>{
           {"sequential", 1, 1}, {"processes", clients, 1}, {"threads", 1, clients}}) {
    std::vector<Stats> s = RunConfiguration(socket, mode, processes, threads, latency_names.size(),
                                            latency_names, false);
    ok = ok && !s.empty();
    for (Stats& x : s) latency.push_back(std::move(x));
  }
  std::vector<std::string> throughput_rows;
  if (ok && absl::GetFlag(FLAGS_throughput)) {
    absl::StatusOr<ThroughputPlan> plan = ParseThroughputPlan();
    if (!plan.ok()) {
      std::fprintf(stderr, "rpc_bench: %s\n", plan.status().ToString().c_str());
      ok = false;
    } else {
      const std::vector<CaseInfo> info = ThroughputInfo(*plan);
      std::vector<std::string> names;
      for (const CaseInfo& i : info) names.push_back(i.name);
      std::vector<Stats> s =
          RunConfiguration(socket, "sequential", 1, 1, names.size(), names, true);
      ok = !s.empty();
      for (size_t i = 0; i < s.size(); ++i) {
        throughput_rows.push_back(ThroughputJson(s[i], info[i].bytes, info[i].flops));
      }
    }
  }
  if (!daemon_path.empty()) StopDaemon(&daemon);
  if (!ok) {
    std::fprintf(stderr, "rpc_bench: a client failed (see above)\n");
    return 1;
  }

  std::vector<std::string> rows;
  for (const Stats& s : latency) rows.push_back(LatencyJson(s));
  std::printf("{\n  \"benchmark\": \"rpc\",\n  \"socket\": \"%s\",\n  \"daemon\": \"%s\",\n",
              daemon_path.empty() ? socket.c_str() : "(temporary)",
              daemon_path.empty() ? "external" : "spawned --backend=cpu");
  std::printf("  \"transport\": \"%s\",\n", absl::GetFlag(FLAGS_ring) ? "submit ring" : "grpc");
  std::printf("  \"host_cpus\": %u,\n  \"iterations\": %d,\n  \"warmup\": %d,\n",
              std::thread::hardware_concurrency(), absl::GetFlag(FLAGS_iterations),
              absl::GetFlag(FLAGS_warmup));
  std::printf("  \"quantize_small_shape\": [%ld, %ld],\n", absl::GetFlag(FLAGS_quantize_rows),
              absl::GetFlag(FLAGS_quantize_cols));
  std::printf("  \"latency\": [\n%s\n  ]", absl::StrJoin(rows, ",\n").c_str());
  if (!throughput_rows.empty()) {
    std::printf(",\n  \"throughput\": [\n%s\n  ]", absl::StrJoin(throughput_rows, ",\n").c_str());
  }
  std::printf("\n}\n");
  return 0;
}
