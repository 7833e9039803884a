// Blockwise FP8 GEMM: kerneld's sm_90a kernel against cuBLASLt's block-scaled FP8 matmul
// (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F for the 1x128 activation operand,
// CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F for the 128x128 weight operand; VEC128 on both for
// wgrad; kernels/cuda/gemm/cublaslt.h, the code kerneld's own cuBLASLt family runs) in the same
// process, on the shapes of issue 5. Prints one JSON object.
//
// Timing: inputs rotate over enough copies that one pass over them is several times the L2, so
// no launch finds its operands cached by the one before; each sample times a batch of launches
// with events, ours and the peer alternate sample by sample, and the median sample is reported.
// Scales are all 1.0 in both (their values do not change the work, and any layout of ones is
// right), which also lets the two outputs be compared: "max_rel_diff" is the largest
// |ours - peer| / (|peer| + 1) over the output, a check that both computed the same product.
//
//   gpu_gemm_bench [--quick] [--config=bm128.bn128.s6.c1.r8.p0] [--samples=N] [--only=A,B]
//                  [--unsplit] [--candidates=s5,c2,lt0,wt,...] [--trace=PREFIX] [--shape=MxNxK]
//                  [--shapes=tn:MxNxK,nn:MxNxK,...] [--power=SECONDS]
//
// --candidates times, in the same loop as ours and the peer, variants of each case's config
// (the default or --config): `sN` sets the stages, `c1` and `c2` the cluster, `mN` and `nN` the
// tile's rows and columns, `rN` the raster group; joined by '+' they combine (s5+c2,
// m192+n128+s4). A candidate the kernel does not build for that config (CheckGemmConfig) is
// skipped. `ltN` (TN cases) runs kerneld's cuBLASLt family with algorithm N of cuBLASLt's ranking
// (CublasLtGemmConfig, through the same launcher the CUDA backend uses, with its scratch); `wt`
// (NN cases) runs the NT kernel, with NT's default config, on a transpose of W made beforehand:
// dgrad as a trainer runs it with Wᵀ from the 128x128 dual quantize. Each appears in
// "candidates" with its time, its ratio to the peer, its speed over the default ("vs_default")
// and its own max_rel_diff against the peer.
//
// --shapes replaces the case list with TN and NN cases of those shapes (M x N x K as in
// GemmVariant: TN M = out features, N = in features, K = tokens; NN M = tokens, N = in, K = out).
// NN's peer is cuBLASLt's NT on the transposed W (there is no block-scaled NN in cuBLASLt); NN
// needs N a multiple of 128 (W is made by transposing Wᵀ on the device).
//
// --only runs the cases whose name contains any of the comma-separated substrings. Ours runs
// with the scratch GemmFp8ScratchBytes asks for, as the CUDA backend passes it (so the split
// tail is on); --unsplit passes none, which runs the kernel without the split tail.
//
// --shape=MxNxK runs one NT case of that shape instead of the list (e.g. one wave of tiles with
// a long K, whose time is the main loop's alone).
//
// --power=SECONDS: after timing, ours and the peer each run back to back for SECONDS, twice in
// turn (ours, peer, ours, peer), each after 0.3 s of the same launches to settle the clocks;
// NVML's energy counter gives the watts and joules per GEMM of each soak, and the SM clock and
// clock-event reasons are sampled every batch (nvml_power.h: an H100 running FP8 GEMMs sits at
// its power limit, so speed follows energy per GEMM). "power" in the case's JSON.
//
// --trace=PREFIX: after timing, one more launch of the default and of each candidate writes the
// kernel's clock trace (gemm_fp8_kernel.h, SetGemmFp8Trace) to PREFIX_<case>_<config>.bin; only
// a build with -DKD_GEMM_TRACE=ON records (its marks cost the kernel 8-13% of its speed), others
// write zeros. bench/gpu_gemm/trace_summary.py summarises the files.
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/gpu_gemm/nvml_power.h"
#include "kerneld/kernels/fp8.h"
#include "kernels/cuda/gemm/cublaslt.h"
#include "kernels/cuda/gemm/cublaslt_gemm.h"
#include "kernels/cuda/gemm/gemm_fp8.h"
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/gemm_launch.h"
#include "kernels/gpu/transpose_fp8.h"

namespace kd {
namespace {

#define BENCH_CHECK_CUDA(expr)                                                                     \
  do {                                                                                             \
    cudaError_t err_ = (expr);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) { BENCH_CHECK_CUDA(cudaMalloc(&ptr, n)); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Random e4m3fn codes (N(0,1) encoded) written once on the host, copied to the device.
void FillCodes(DeviceBuffer& b, std::mt19937_64& rng) {
  std::vector<uint8_t> host(b.bytes);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<uint8_t> table(4096);
  for (auto& c : table) c = fp8::Encode<fp8::E4M3FN>(gauss(rng));
  for (size_t i = 0; i < host.size(); ++i) host[i] = table[(i * 2654435761u + rng() % 7) % 4096];
  BENCH_CHECK_CUDA(cudaMemcpy(b.ptr, host.data(), host.size(), cudaMemcpyHostToDevice));
}

void FillOnes(DeviceBuffer& b) {
  std::vector<float> host(b.bytes / 4, 1.0f);
  BENCH_CHECK_CUDA(cudaMemcpy(b.ptr, host.data(), b.bytes, cudaMemcpyHostToDevice));
}

Tensor View(void* data, DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.strides[d] = stride;
    stride *= shape[d];
  }
  t.loc = DeviceLoc{BackendKind::kCuda, 0};
  return t;
}

// The peer: cuBLASLt's block-scaled FP8 matmul on our operands (kernels/cuda/gemm/cublaslt.h),
// in its own orientation: cuBLASLt's A is our A (m,k), its B our B (n,k) with BLK128x128 scales
// (VEC128 for wgrad), its column-major m x n result our D transposed: the same work, written as
// Dᵀ. (kerneld's cuBLASLt family swaps the operands to write D itself: the `ltN` candidates.)
absl::StatusOr<std::shared_ptr<cuda_gemm::CublasLtPlan>> PeerPlan(int64_t m, int64_t n, int64_t k,
                                                                  bool weight_blocks) {
  cuda_gemm::BlockScaledProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = k;
  p.ldb = k;
  p.ldd = m;
  p.b_tiles = weight_blocks;
  p.d_transposed = true;
  return cuda_gemm::CublasLtPlan::Get(p);
}

struct Case {
  std::string name;
  GemmVariant variant;  // kNT, kTN, kNN or kMGroupedNT
  int64_t m, n, k;      // for M-grouped, m is the rows of one group
  int64_t groups;
};

struct Options {
  bool quick = false;
  int samples = 15;
  bool has_config = false;
  GemmConfig config;
  std::vector<std::string> only;  // empty: every case
  bool split = true;              // pass the scratch (split tail)
  std::vector<std::string> candidates;
  double power_seconds = 0;  // --power: soak length per kernel and round; 0: no power soak
  std::string trace;         // prefix of per-launch clock trace files (experiment); empty: none
  std::vector<Case> shapes;  // --shape / --shapes: these cases instead of the list
};

// A candidate: a config of kerneld's kernel, of its cuBLASLt family, or (NN) the NT kernel on a
// ready Wᵀ.
struct Candidate {
  GemmKernelConfig config;
  bool on_wt = false;
  std::string Name() const { return on_wt ? "nt_on_wt" : GemmKernelConfigToString(config); }
  bool operator==(const Candidate& o) const { return config == o.config && on_wt == o.on_wt; }
};

// Applies a candidate spec (see the file comment) to `c`; false when the spec is malformed.
bool ApplyCandidate(const std::string& spec, GemmConfig& c) {
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t plus = std::min(spec.find('+', start), spec.size());
    const std::string part = spec.substr(start, plus - start);
    if (part.size() >= 2 && part[0] == 's') {
      c.stages = std::atoi(part.c_str() + 1);
    } else if (part == "c1" || part == "c2") {
      c.cluster = part == "c1" ? 1 : 2;
    } else if (part.size() >= 2 && part[0] == 'm' && std::isdigit(part[1])) {
      c.block_m = std::atoi(part.c_str() + 1);
    } else if (part.size() >= 2 && part[0] == 'n' && std::isdigit(part[1])) {
      c.block_n = std::atoi(part.c_str() + 1);
    } else if (part.size() >= 2 && part[0] == 'r' && std::isdigit(part[1])) {
      c.raster_group = std::atoi(part.c_str() + 1);
    } else {
      return false;
    }
    start = plus + 1;
  }
  return true;
}

// A candidate spec of the case's variant (see the file comment); false when it does not apply.
bool MakeCandidate(const std::string& spec, const Case& c, const GemmConfig& config,
                   Candidate* out) {
  if (spec == "wt") {
    out->on_wt = true;
    return c.variant == GemmVariant::kNN;
  }
  if (spec.size() >= 3 && spec.compare(0, 2, "lt") == 0) {
    absl::StatusOr<CublasLtGemmConfig> lt = ParseCublasLtGemmConfig(spec);
    out->config = lt.ok() ? *lt : CublasLtGemmConfig{};
    return lt.ok() && c.variant == GemmVariant::kTN;
  }
  GemmConfig v = config;
  out->config = v;
  if (!ApplyCandidate(spec, v) || !CheckGemmConfig(v).ok() || v == config) return false;
  out->config = v;
  return true;
}

bool ValidSpec(const std::string& spec) {
  if (spec == "wt") return true;
  if (spec.size() >= 3 && spec.compare(0, 2, "lt") == 0) {
    return ParseCublasLtGemmConfig(spec).ok();
  }
  GemmConfig probe;
  return ApplyCandidate(spec, probe);
}

bool Selected(const Options& opt, const std::string& name) {
  if (opt.only.empty()) return true;
  for (const std::string& s : opt.only) {
    if (name.find(s) != std::string::npos) return true;
  }
  return false;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `launch(set)` over rotating sets; returns the median milliseconds of one launch.
template <typename F>
double TimeBatches(F&& launch, int sets, int per_sample, cudaEvent_t start, cudaEvent_t stop,
                   int& rotation) {
  BENCH_CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < per_sample; ++i) launch(rotation++ % sets);
  BENCH_CHECK_CUDA(cudaEventRecord(stop));
  BENCH_CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms / per_sample;
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One power soak: `launch(set)` back to back for `seconds` after 0.3 s of settling, batches of
// `per_batch` launches kept two deep in the stream (no idle gaps), the SM clock and clock-event
// reasons sampled as each batch completes. Returns a JSON object.
template <typename F>
std::string Soak(F&& launch, int sets, int per_batch, double seconds, double flops,
                 const NvmlPower& nv, int& rotation) {
  cudaEvent_t ev[2];
  for (cudaEvent_t& e : ev) BENCH_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  std::vector<double> mhz;
  uint64_t reasons = 0;
  int64_t launches = 0;
  auto loop = [&](double span, bool sample) {
    const double end = NowSeconds() + span;
    for (int64_t i = 0;; ++i) {
      if (i >= 2) {
        BENCH_CHECK_CUDA(cudaEventSynchronize(ev[i % 2]));  // batch i - 2 is done
        if (sample) {
          mhz.push_back(nv.SmMhz());
          reasons |= nv.EventReasons();
        }
      }
      if (NowSeconds() >= end) break;
      for (int j = 0; j < per_batch; ++j) launch(rotation++ % sets);
      BENCH_CHECK_CUDA(cudaEventRecord(ev[i % 2]));
      if (sample) launches += per_batch;
    }
    BENCH_CHECK_CUDA(cudaDeviceSynchronize());
  };
  loop(0.3, false);
  const uint64_t e0 = nv.EnergyMj();
  const double t0 = NowSeconds();
  loop(seconds, true);
  const double t1 = NowSeconds();
  const uint64_t e1 = nv.EnergyMj();
  for (cudaEvent_t e : ev) cudaEventDestroy(e);
  const double span = t1 - t0, joules = (e1 - e0) * 1e-3;
  char hex[32];
  std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(reasons));
  return absl::StrCat("{\"seconds\":", span, ",\"launches\":", launches,
                      ",\"tflops\":", flops * launches / span / 1e12, ",\"watts\":", joules / span,
                      ",\"joules_per_gemm\":", joules / launches,
                      ",\"gflop_per_joule\":", flops * launches / joules / 1e9,
                      ",\"sm_mhz_median\":", mhz.empty() ? 0.0 : Median(mhz),
                      ",\"clock_event_reasons\":\"", hex, "\"}");
}

std::string RunCase(const Case& c, const Options& opt, void* workspace, const cudaDeviceProp& prop,
                    std::mt19937_64& rng) {
  const bool nn = c.variant == GemmVariant::kNN;
  const int64_t total_m = c.m * c.groups;
  const int64_t kb = c.k / 128, nb = (c.n + 127) / 128;
  const size_t a_bytes = total_m * c.k, b_bytes = c.groups * c.n * c.k;
  // Rotate until one pass over the inputs is at least 4x the L2.
  const size_t set_bytes = a_bytes + b_bytes * (nn ? 2 : 1);
  const int sets = static_cast<int>(
      std::max<size_t>(2, std::min<size_t>(16, (4 * prop.l2CacheSize) / set_bytes + 1)));
  // b: the B operand as the variant takes it; NN's W (k, n) is made on the device as the exact
  // transpose of bt (n, k), which the peer and the `wt` candidate read.
  std::vector<std::unique_ptr<DeviceBuffer>> a, b, bt;
  for (int s = 0; s < sets; ++s) {
    a.push_back(std::make_unique<DeviceBuffer>(a_bytes));
    b.push_back(std::make_unique<DeviceBuffer>(b_bytes));
    FillCodes(*a.back(), rng);
    if (nn) {
      bt.push_back(std::make_unique<DeviceBuffer>(b_bytes));
      FillCodes(*bt.back(), rng);
      cuda::TransposeFp8Params t;
      t.src = static_cast<const uint8_t*>(bt.back()->ptr);
      t.src_stride = c.k;
      t.rows = c.n;
      t.cols = c.k;
      t.dst = static_cast<uint8_t*>(b.back()->ptr);
      BENCH_CHECK_CUDA(cuda::LaunchTransposeFp8(t, nullptr));
    } else {
      FillCodes(*b.back(), rng);
    }
  }
  BENCH_CHECK_CUDA(cudaDeviceSynchronize());
  // Ones, sized for the largest layout either library may read.
  DeviceBuffer a_scales(total_m * kb * 4 + 256);
  DeviceBuffer b_scales(std::max<int64_t>(c.groups * c.n * kb, c.groups * nb * kb) * 4 + 256);
  FillOnes(a_scales);
  FillOnes(b_scales);
  DeviceBuffer d_ours(total_m * c.n * 2), d_peer(total_m * c.n * 2);
  DeviceBuffer ends(c.groups * 4);
  {
    std::vector<int32_t> host(c.groups);
    for (int64_t g = 0; g < c.groups; ++g) host[g] = static_cast<int32_t>((g + 1) * c.m);
    BENCH_CHECK_CUDA(cudaMemcpy(ends.ptr, host.data(), c.groups * 4, cudaMemcpyHostToDevice));
  }

  GemmArgs args;
  args.variant = c.variant;
  args.a_scales = View(a_scales.ptr, DType::kF32, {total_m, kb});
  if (c.variant == GemmVariant::kMGroupedNT) {
    args.b_scales = View(b_scales.ptr, DType::kF32, {c.groups, nb, kb});
    args.group_ends = View(ends.ptr, DType::kI32, {c.groups});
  } else if (c.variant == GemmVariant::kTN) {
    args.b_scales = View(b_scales.ptr, DType::kF32, {c.n, kb});
  } else if (nn) {
    args.b_scales = View(b_scales.ptr, DType::kF32, {kb, nb});
  } else {
    args.b_scales = View(b_scales.ptr, DType::kF32, {nb, kb});
  }
  args.d = View(d_ours.ptr, DType::kBF16, {total_m, c.n});
  auto bind = [&](int s) {
    GemmArgs g = args;
    g.a = View(a[s]->ptr, DType::kE4M3FN, {total_m, c.k});
    if (c.variant == GemmVariant::kMGroupedNT) {
      g.b = View(b[s]->ptr, DType::kE4M3FN, {c.groups, c.n, c.k});
    } else if (nn) {
      g.b = View(b[s]->ptr, DType::kE4M3FN, {c.k, c.n});
    } else {
      g.b = View(b[s]->ptr, DType::kE4M3FN, {c.n, c.k});
    }
    return g;
  };
  // NN's `wt` candidate: NT on bt with its 128x128 scales (ones, any layout).
  auto bind_wt = [&](int s) {
    GemmArgs g = bind(s);
    g.variant = GemmVariant::kNT;
    g.b = View(bt[s]->ptr, DType::kE4M3FN, {c.n, c.k});
    g.b_scales = View(b_scales.ptr, DType::kF32, {nb, kb});
    return g;
  };
  const GemmConfig config = opt.has_config ? opt.config : DefaultGemmConfig(bind(0), prop);
  std::vector<Candidate> cand;
  for (const std::string& spec : opt.candidates) {
    Candidate v;
    if (MakeCandidate(spec, c, config, &v) &&
        std::find(cand.begin(), cand.end(), v) == cand.end()) {
      cand.push_back(v);
    }
  }
  bool ok = true;
  uint64_t scratch_bytes = opt.split ? GemmFp8ScratchBytes(bind(0)) : 0;
  for (const Candidate& v : cand) {
    if (std::holds_alternative<CublasLtGemmConfig>(v.config)) {
      scratch_bytes = std::max(scratch_bytes, CublasLtGemmScratchBytes(bind(0)));
    }
    if (v.on_wt && opt.split)
      scratch_bytes = std::max(scratch_bytes, GemmFp8ScratchBytes(bind_wt(0)));
  }
  DeviceBuffer scratch(std::max<uint64_t>(scratch_bytes, 256));
  void* scratch_ptr = scratch_bytes > 0 ? scratch.ptr : nullptr;
  auto report = [&](const absl::Status& st) {
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), std::string(st.message()).c_str());
      ok = false;
    }
  };
  auto ours = [&](int s) { report(LaunchGemmFp8(bind(s), config, nullptr, scratch_ptr)); };
  const GemmConfig wt_config = nn ? DefaultGemmConfig(bind_wt(0), prop) : config;
  // A candidate that fails (a cuBLASLt config cuBLASLt has no algorithm for) is reported in its
  // row and left out of the timing; the case goes on.
  std::vector<std::string> cand_error(cand.size());
  auto launch_candidate = [&](int s, size_t j) {
    if (!cand_error[j].empty()) return;
    const Candidate& v = cand[j];
    const absl::Status st = v.on_wt ? LaunchGemmFp8(bind_wt(s), wt_config, nullptr, scratch_ptr)
                                    : LaunchGemmConfig(bind(s), v.config, nullptr, scratch_ptr);
    if (!st.ok()) cand_error[j] = std::string(st.message());
  };
  std::vector<std::vector<double>> t_cand(cand.size());
  // The peer: one cuBLASLt matmul per group (one for the dense cases; NN's on bt).
  absl::StatusOr<std::shared_ptr<cuda_gemm::CublasLtPlan>> peer =
      PeerPlan(c.m, c.n, c.k, c.variant != GemmVariant::kTN);
  const bool peer_ok = peer.ok();
  if (!peer_ok) {
    std::fprintf(stderr, "%s: peer: %s\n", c.name.c_str(),
                 std::string(peer.status().message()).c_str());
  }
  auto cublas = [&](int s) {
    const uint8_t* pb = static_cast<const uint8_t*>((nn ? bt[s] : b[s])->ptr);
    for (int64_t g = 0; g < c.groups; ++g) {
      const uint8_t* ga = static_cast<const uint8_t*>(a[s]->ptr) + g * c.m * c.k;
      const uint8_t* gb = pb + g * c.n * c.k;
      void* gd = static_cast<uint16_t*>(d_peer.ptr) + g * c.m * c.n;
      report((*peer)->Run(0, ga, static_cast<const float*>(a_scales.ptr), gb,
                          static_cast<const float*>(b_scales.ptr), gd, workspace, nullptr));
    }
  };

  const double flops = 2.0 * total_m * c.n * c.k;
  cudaEvent_t start, stop;
  BENCH_CHECK_CUDA(cudaEventCreate(&start));
  BENCH_CHECK_CUDA(cudaEventCreate(&stop));
  // Warm up everything (module load, heuristics, plans, clocks), then size a sample to ~2 ms.
  int rotation = 0;
  for (int i = 0; i < 3; ++i) {
    ours(i % sets);
    if (peer_ok) cublas(i % sets);
    for (size_t j = 0; j < cand.size(); ++j) launch_candidate(i % sets, j);
  }
  BENCH_CHECK_CUDA(cudaDeviceSynchronize());
  const double probe = TimeBatches(ours, sets, 3, start, stop, rotation);
  const int per_sample = static_cast<int>(std::max(1.0, std::min(200.0, 2.0 / probe)));
  std::vector<double> t_ours, t_peer;
  const int samples = opt.quick ? 5 : opt.samples;
  for (int i = 0; i < samples && ok; ++i) {
    t_ours.push_back(TimeBatches(ours, sets, per_sample, start, stop, rotation));
    if (peer_ok) t_peer.push_back(TimeBatches(cublas, sets, per_sample, start, stop, rotation));
    for (size_t j = 0; j < cand.size(); ++j) {
      if (!cand_error[j].empty()) continue;
      auto run = [&](int s) { launch_candidate(s, j); };
      t_cand[j].push_back(TimeBatches(run, sets, per_sample, start, stop, rotation));
    }
  }
  cudaError_t err = cudaDeviceSynchronize();

  // Same inputs through both, then compare.
  double max_rel = -1;
  int64_t nonzero = 0;  // output elements of ours that are not zero: the comparison is not vacuous
  std::vector<double> cand_rel;  // max_rel_diff of each candidate
  if (ok && peer_ok && err == cudaSuccess) {
    ours(0);
    cublas(0);
    err = cudaDeviceSynchronize();
    std::vector<uint16_t> x(total_m * c.n), y(total_m * c.n);
    BENCH_CHECK_CUDA(cudaMemcpy(x.data(), d_ours.ptr, x.size() * 2, cudaMemcpyDeviceToHost));
    BENCH_CHECK_CUDA(cudaMemcpy(y.data(), d_peer.ptr, y.size() * 2, cudaMemcpyDeviceToHost));
    auto max_rel_of = [&](const std::vector<uint16_t>& ours_out) {
      double worst = 0;
      for (size_t i = 0; i < ours_out.size(); ++i) {
        // Ours is row-major (groups*m, n); the peer wrote each group's D transposed.
        const int64_t g = i / (c.m * c.n), row = (i / c.n) % c.m, col = i % c.n;
        const double u = fp8::BF16ToFloat(ours_out[i]);
        const double v = fp8::BF16ToFloat(y[g * c.m * c.n + col * c.m + row]);
        const double rel = std::fabs(u - v) / (std::fabs(v) + 1.0);
        if (!(rel <= worst)) worst = std::isnan(rel) ? INFINITY : rel;
      }
      return worst;
    };
    for (uint16_t v : x) nonzero += (v & 0x7FFF) != 0;
    max_rel = max_rel_of(x);
    for (size_t j = 0; j < cand.size(); ++j) {
      BENCH_CHECK_CUDA(cudaMemset(d_ours.ptr, 0xFF, x.size() * 2));
      launch_candidate(0, j);
      BENCH_CHECK_CUDA(cudaMemcpy(x.data(), d_ours.ptr, x.size() * 2, cudaMemcpyDeviceToHost));
      cand_rel.push_back(max_rel_of(x));
    }
  }
  // Power soaks: ours, the peer, ours, the peer.
  std::string power;
  if (opt.power_seconds > 0 && ok && peer_ok && err == cudaSuccess) {
    char bus[32] = {0};
    BENCH_CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof(bus), 0));
    static const NvmlPower nv(bus);
    if (!nv.ok()) {
      power = "{\"error\":\"NVML not available (libnvidia-ml.so.1)\"}";
    } else {
      power = absl::StrCat("{\"limit_watts\":", nv.LimitWatts(), ",\"rounds\":[");
      for (int r = 0; r < 2; ++r) {
        absl::StrAppend(
            &power, r ? "," : "",
            "{\"ours\":", Soak(ours, sets, per_sample, opt.power_seconds, flops, nv, rotation),
            ",\"cublaslt\":",
            Soak(cublas, sets, per_sample, opt.power_seconds, flops, nv, rotation), "}");
      }
      absl::StrAppend(&power, "]}");
    }
    err = cudaDeviceSynchronize();
  }
  // Clock traces (a KD_GEMM_TRACE build; others write zeros): one launch of the default and of
  // each candidate.
  if (!opt.trace.empty() && ok && err == cudaSuccess) {
    DeviceBuffer tbuf(cuda_gemm::kTraceWords * 4);
    std::vector<uint32_t> host(cuda_gemm::kTraceWords);
    for (size_t j = 0; j <= cand.size(); ++j) {
      BENCH_CHECK_CUDA(cudaMemset(tbuf.ptr, 0, tbuf.bytes));
      const GemmConfig* kernel = j == 0 ? &config : std::get_if<GemmConfig>(&cand[j - 1].config);
      if (kernel == nullptr || (j > 0 && cand[j - 1].on_wt)) continue;  // not the kernel's trace
      const GemmConfig& cfg = *kernel;
      cuda_gemm::SetGemmFp8Trace(static_cast<uint32_t*>(tbuf.ptr));
      const absl::Status st = LaunchGemmFp8(bind(1 % sets), cfg, nullptr, scratch_ptr);
      cuda_gemm::SetGemmFp8Trace(nullptr);
      BENCH_CHECK_CUDA(cudaDeviceSynchronize());
      if (!st.ok()) continue;
      BENCH_CHECK_CUDA(cudaMemcpy(host.data(), tbuf.ptr, tbuf.bytes, cudaMemcpyDeviceToHost));
      std::string name = c.name;
      std::replace(name.begin(), name.end(), '^', 'p');
      const std::string path =
          absl::StrCat(opt.trace, "_", name, "_", GemmConfigToString(cfg), ".bin");
      if (FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(host.data(), 4, host.size(), f);
        std::fclose(f);
      }
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);

  std::string out = absl::StrCat(
      "{\"name\":\"", c.name, "\",\"variant\":\"", GemmVariantName(c.variant), "\",\"m\":", c.m,
      ",\"n\":", c.n, ",\"k\":", c.k, ",\"groups\":", c.groups, ",\"config\":\"",
      GemmConfigToString(config), "\",\"split_scratch\":", scratch_bytes > 0 ? "true" : "false",
      ",\"resident_ctas\":", GemmFp8ResidentCtas(config), ",\"rotating_sets\":", sets,
      ",\"launches_per_sample\":", per_sample);
  if (!ok || err != cudaSuccess) {
    absl::StrAppend(&out, ",\"error\":\"", err != cudaSuccess ? cudaGetErrorString(err) : "launch",
                    "\"}");
    return out;
  }
  const double ms = Median(t_ours);
  absl::StrAppend(&out, ",\"ours_ms\":", ms, ",\"ours_tflops\":", flops / ms / 1e9);
  if (peer_ok) {
    const double peer_ms = Median(t_peer);
    absl::StrAppend(&out, ",\"cublaslt_ms\":", peer_ms,
                    ",\"cublaslt_tflops\":", flops / peer_ms / 1e9, ",\"ratio\":", peer_ms / ms,
                    ",\"max_rel_diff\":", max_rel,
                    ",\"nonzero_fraction\":", static_cast<double>(nonzero) / (total_m * c.n));
  } else {
    absl::StrAppend(&out, ",\"cublaslt\":\"", peer.status().message(), "\"");
  }
  if (!cand.empty()) {
    absl::StrAppend(&out, ",\"candidates\":[");
    for (size_t j = 0; j < cand.size(); ++j) {
      if (!cand_error[j].empty()) {
        std::string why = cand_error[j];
        std::replace(why.begin(), why.end(), '"', '\'');
        absl::StrAppend(&out, j ? "," : "", "{\"config\":\"", cand[j].Name(), "\",\"error\":\"",
                        why, "\"}");
        continue;
      }
      const double cms = Median(t_cand[j]);
      absl::StrAppend(&out, j ? "," : "", "{\"config\":\"", cand[j].Name(), "\",\"ms\":", cms,
                      ",\"tflops\":", flops / cms / 1e9, ",\"vs_default\":", ms / cms);
      if (peer_ok) absl::StrAppend(&out, ",\"ratio\":", Median(t_peer) / cms);
      if (j < cand_rel.size()) absl::StrAppend(&out, ",\"max_rel_diff\":", cand_rel[j]);
      absl::StrAppend(&out, "}");
    }
    absl::StrAppend(&out, "]");
  }
  if (!power.empty()) absl::StrAppend(&out, ",\"power\":", power);
  absl::StrAppend(&out, "}");
  return out;
}

}  // namespace
}  // namespace kd

int main(int argc, char** argv) {
  using namespace kd;
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      opt.quick = true;
    } else if (arg.rfind("--samples=", 0) == 0) {
      opt.samples = std::max(1, std::atoi(arg.c_str() + 10));
    } else if (arg.rfind("--only=", 0) == 0) {
      size_t start = 7;
      while (start <= arg.size()) {
        const size_t comma = std::min(arg.find(',', start), arg.size());
        if (comma > start) opt.only.push_back(arg.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (arg.rfind("--candidates=", 0) == 0) {
      size_t start = 13;
      while (start <= arg.size()) {
        const size_t comma = std::min(arg.find(',', start), arg.size());
        if (comma > start) opt.candidates.push_back(arg.substr(start, comma - start));
        start = comma + 1;
      }
      for (const std::string& spec : opt.candidates) {
        if (!ValidSpec(spec)) {
          std::fprintf(stderr, "bad candidate \"%s\"\n", spec.c_str());
          return 2;
        }
      }
    } else if (arg.rfind("--trace=", 0) == 0) {
      opt.trace = arg.substr(8);
    } else if (arg.rfind("--shape=", 0) == 0 || arg.rfind("--shapes=", 0) == 0) {
      // --shape=MxNxK: one NT case; --shapes=v:MxNxK,... with v one of nt, tn, nn.
      const bool one = arg.rfind("--shape=", 0) == 0;
      size_t start = one ? 8 : 9;
      while (start <= arg.size()) {
        const size_t comma = std::min(arg.find(',', start), arg.size());
        std::string spec = one ? "nt:" + arg.substr(start) : arg.substr(start, comma - start);
        start = one ? arg.size() + 1 : comma + 1;
        const size_t colon = spec.find(':');
        const std::string v = colon == std::string::npos ? "" : spec.substr(0, colon);
        const GemmVariant variant = v == "nt"   ? GemmVariant::kNT
                                    : v == "tn" ? GemmVariant::kTN
                                    : v == "nn" ? GemmVariant::kNN
                                                : GemmVariant::kInvalid;
        long long m = 0, n = 0, k = 0;
        char tail = 0;
        if (variant == GemmVariant::kInvalid ||
            std::sscanf(spec.c_str() + colon + 1, "%lldx%lldx%lld%c", &m, &n, &k, &tail) != 3 ||
            m < 1 || n < 1 || k < 128 || k % 128 != 0 ||
            (variant == GemmVariant::kNN && n % 128 != 0)) {
          std::fprintf(stderr,
                       "--shape(s) wants [nt|tn|nn:]MxNxK (K a multiple of 128; nn: N too), got "
                       "\"%s\"\n",
                       spec.c_str());
          return 2;
        }
        opt.shapes.push_back({v + "_" + spec.substr(colon + 1), variant, m, n, k, 1});
      }
    } else if (arg.rfind("--power=", 0) == 0) {
      opt.power_seconds = std::atof(arg.c_str() + 8);
      if (!(opt.power_seconds > 0 && opt.power_seconds <= 60)) {
        std::fprintf(stderr, "--power wants seconds in (0, 60]\n");
        return 2;
      }
    } else if (arg == "--unsplit") {
      opt.split = false;
    } else if (arg.rfind("--config=", 0) == 0) {
      auto parsed = ParseGemmConfig(arg.substr(9));
      if (!parsed.ok()) {
        std::fprintf(stderr, "%s\n", std::string(parsed.status().message()).c_str());
        return 2;
      }
      opt.config = *parsed;
      opt.has_config = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--samples=N] [--config=STRING] [--only=A,B] "
                   "[--unsplit] [--candidates=SPEC,...] [--trace=PREFIX] [--shape=MxNxK] "
                   "[--shapes=tn:MxNxK,nn:MxNxK,...] [--power=SECONDS]\n",
                   argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  BENCH_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (const auto lt = cuda_gemm::LoadCublasLt(); !lt.ok()) {
    std::fprintf(stderr, "%s\n", std::string(lt.status().message()).c_str());
  }
  DeviceBuffer workspace(cuda_gemm::kCublasLtWorkspaceBytes);
  const Case cases[] = {
      {"nt_4096^3", GemmVariant::kNT, 4096, 4096, 4096, 1},
      {"nt_8192^3", GemmVariant::kNT, 8192, 8192, 8192, 1},
      {"nt_16384x8192x5120", GemmVariant::kNT, 16384, 8192, 5120, 1},
      {"nt_8192x7168x2048", GemmVariant::kNT, 8192, 7168, 2048, 1},
      {"nt_4096x2112x7168", GemmVariant::kNT, 4096, 2112, 7168, 1},
      {"nt_4096x24576x1536", GemmVariant::kNT, 4096, 24576, 1536, 1},
      {"nt_4096x7168x16384", GemmVariant::kNT, 4096, 7168, 16384, 1},
      {"nt_128x7168x2048", GemmVariant::kNT, 128, 7168, 2048, 1},
      {"nt_64x4096x7168", GemmVariant::kNT, 64, 4096, 7168, 1},
      {"m_grouped_8x4096_4096x7168", GemmVariant::kMGroupedNT, 4096, 4096, 7168, 8},
      {"m_grouped_8x4096_7168x2048", GemmVariant::kMGroupedNT, 4096, 7168, 2048, 8},
      {"tn_wgrad_16640x5120x8192", GemmVariant::kTN, 16640, 5120, 8192, 1},
  };
  std::mt19937_64 rng(20261122);
  std::printf("{\"device\":\"%s\",\"sms\":%d,\"l2_bytes\":%d,\"results\":[\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize);
  bool first = true;
  // --shape(s) replace the list; with --only too, the selected cases of the list run after them.
  std::vector<Case> run = opt.shapes;
  if (opt.shapes.empty() || !opt.only.empty()) {
    for (const Case& c : cases) {
      if (Selected(opt, c.name)) run.push_back(c);
    }
  }
  for (const Case& c : run) {
    const std::string line = RunCase(c, opt, workspace.ptr, prop, rng);
    std::printf("%s%s\n", first ? "" : ",", line.c_str());
    std::fflush(stdout);
    first = false;
  }
  std::printf("]}\n");
  return 0;
}
