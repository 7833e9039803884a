// The portable tile GEMM (kernels/gpu/tile_gemm: mma.sync FP8, the fallback for GPUs without
// wgmma) against cuBLASLt's block-scaled FP8 matmul and kerneld's sm_90a wgmma GEMM
// (kernels/cuda/gemm), on the same operands in one process. Prints one JSON object.
//
// Each case times the tile GEMM at the heuristic's config and at every other config of the
// device's space, the wgmma kernel at its default config (with its scratch, as the CUDA backend
// runs it), and cuBLASLt where it takes the variant (NT: VEC128 A scales, BLK128x128 B scales;
// TN: VEC128 on both; M-grouped: one call per group). Inputs rotate over enough copies that one
// pass is several times the L2; samples alternate between the kernels; the median is reported,
// with the ratios tile / cuBLASLt and tile / wgmma in TFLOP/s. Scales are all 1.0 (their values
// do not change the work, and any layout of ones is right); "max_rel_diff" is the largest
// |tile - wgmma| / (|wgmma| + 1) over the output, a check that both computed the same product.
//
//   tile_gemm_bench [--quick] [--samples=N] [--only=A,B] [--tile_only]
//
// --tile_only times the tile GEMM alone: under CUDA_FORCE_PTX_JIT=1 (the driver compiles the
// compute_89 PTX instead of loading the sm_90a SASS, so an H100 runs what an sm_89 part runs)
// the sm_90a-only wgmma kernel cannot load. "tile_code" says which code ran.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/fp8.h"
#include "kernels/cuda/gemm/gemm_fp8.h"
#include "kernels/gpu/tile_gemm/tile_gemm.h"
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"
#include "kernels/gpu/tile_gemm/tile_gemm_launch.h"

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

// cuBLASLt's block-scaled FP8 matmul on our operands, as bench/gpu_gemm/gpu_gemm_bench.cc calls
// it: its A is our A (m,k) as a k x m column-major matrix transposed, its B our B (n,k) as k x n
// column-major; D is our D transposed (bf16).
class LtGemm {
 public:
  ~LtGemm() {
    if (pref_) cublasLtMatmulPreferenceDestroy(pref_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (d_) cublasLtMatrixLayoutDestroy(d_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }
  bool Init(cublasLtHandle_t lt, int64_t m, int64_t n, int64_t k, bool weight_blocks,
            const float* a_scales, const float* b_scales, void* workspace, size_t bytes) {
    lt_ = lt;
    workspace_ = workspace;
    workspace_bytes_ = bytes;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    const cublasLtMatmulMatrixScale_t b_mode = weight_blocks
                                                   ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                                                   : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    bool ok = cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0;
    auto set = [&](cublasLtMatmulDescAttributes_t attr, const void* v, size_t size) {
      ok = ok && cublasLtMatmulDescSetAttribute(desc_, attr, v, size) == 0;
    };
    set(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode));
    set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode));
    set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scales, sizeof(a_scales));
    set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scales, sizeof(b_scales));
    ok = ok && cublasLtMatrixLayoutCreate(&a_, CUDA_R_8F_E4M3, k, m, k) == 0;
    ok = ok && cublasLtMatrixLayoutCreate(&b_, CUDA_R_8F_E4M3, k, n, k) == 0;
    ok = ok && cublasLtMatrixLayoutCreate(&d_, CUDA_R_16BF, m, n, m) == 0;
    ok = ok && cublasLtMatmulPreferenceCreate(&pref_) == 0;
    ok = ok &&
         cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &workspace_bytes_, sizeof(workspace_bytes_)) == 0;
    int found = 0;
    cublasLtMatmulHeuristicResult_t result{};
    ok = ok &&
         cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, d_, d_, pref_, 1, &result, &found) == 0;
    algo_ = result.algo;
    return ok && found > 0;
  }
  bool Run(const void* a, const void* b, void* d) {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(lt_, desc_, &alpha, a, a_, b, b_, &beta, d, d_, d, d_, &algo_, workspace_,
                          workspace_bytes_, nullptr) == 0;
  }

 private:
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

struct Case {
  const char* name;
  GemmVariant variant;
  int64_t m, n, k;  // M-grouped: m rows per group; K-grouped: k tokens per group
  int64_t groups;
};

struct Options {
  bool quick = false;
  int samples = 11;
  bool tile_only = false;
  std::vector<std::string> only;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

template <typename F>
double TimeBatch(F&& launch, int sets, int per_sample, cudaEvent_t start, cudaEvent_t stop,
                 int& rotation) {
  BENCH_CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < per_sample; ++i) launch(rotation++ % sets);
  BENCH_CHECK_CUDA(cudaEventRecord(stop));
  BENCH_CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms / per_sample;
}

std::string Timing(double ms, double flops) {
  return absl::StrCat("{\"ms\":", ms, ",\"tflops\":", ms > 0 ? flops / ms / 1e9 : 0.0, "}");
}

std::string RunCase(const Case& c, const Options& opt, cublasLtHandle_t lt, void* workspace,
                    size_t workspace_bytes, const cudaDeviceProp& prop,
                    const tile_gemm::TileDevice& device, std::mt19937_64& rng) {
  const bool m_grouped = c.variant == GemmVariant::kMGroupedNT;
  const bool k_grouped = c.variant == GemmVariant::kKGroupedTN;
  const int64_t rows = m_grouped ? c.m * c.groups : c.m;
  const int64_t red = k_grouped ? c.k * c.groups : c.k;  // the whole reduction
  const int64_t kb = red / 128, nb = (c.n + 127) / 128;
  const size_t a_bytes = rows * red, b_bytes = (m_grouped ? c.groups : 1) * c.n * red;
  const int sets = static_cast<int>(
      std::max<size_t>(2, std::min<size_t>(16, (4 * prop.l2CacheSize) / (a_bytes + b_bytes) + 1)));
  std::vector<std::unique_ptr<DeviceBuffer>> a, b;
  for (int s = 0; s < sets; ++s) {
    a.push_back(std::make_unique<DeviceBuffer>(a_bytes));
    b.push_back(std::make_unique<DeviceBuffer>(b_bytes));
    FillCodes(*a.back(), rng);
    FillCodes(*b.back(), rng);
  }
  DeviceBuffer a_scales(rows * kb * 4 + 256);
  DeviceBuffer b_scales((m_grouped ? c.groups : 1) * c.n * kb * 4 + 256);  // the largest layout
  FillOnes(a_scales);
  FillOnes(b_scales);
  const int64_t d_elems = (k_grouped ? c.groups : 1) * rows * c.n;
  DeviceBuffer d_tile(d_elems * 4), d_wgmma(d_elems * 4), d_lt(d_elems * 2);
  DeviceBuffer ends(c.groups * 4);
  {
    std::vector<int32_t> host(c.groups);
    for (int64_t g = 0; g < c.groups; ++g) host[g] = static_cast<int32_t>((g + 1) * c.k);
    if (m_grouped) {
      for (int64_t g = 0; g < c.groups; ++g) host[g] = static_cast<int32_t>((g + 1) * c.m);
    }
    BENCH_CHECK_CUDA(cudaMemcpy(ends.ptr, host.data(), c.groups * 4, cudaMemcpyHostToDevice));
  }

  GemmArgs args;
  args.variant = c.variant;
  const DType out = k_grouped ? DType::kF32 : DType::kBF16;
  args.a_scales = View(a_scales.ptr, DType::kF32, {rows, kb});
  if (m_grouped) {
    args.b_scales = View(b_scales.ptr, DType::kF32, {c.groups, nb, kb});
    args.group_ends = View(ends.ptr, DType::kI32, {c.groups});
  } else if (c.variant == GemmVariant::kTN || k_grouped) {
    args.b_scales = View(b_scales.ptr, DType::kF32, {c.n, kb});
    if (k_grouped) args.group_ends = View(ends.ptr, DType::kI32, {c.groups});
  } else if (c.variant == GemmVariant::kNN) {
    args.b_scales = View(b_scales.ptr, DType::kF32, {kb, nb});
  } else {
    args.b_scales = View(b_scales.ptr, DType::kF32, {nb, kb});
  }
  auto bind = [&](int s, void* d) {
    GemmArgs g = args;
    g.a = View(a[s]->ptr, DType::kE4M3FN, {rows, red});
    if (m_grouped)
      g.b = View(b[s]->ptr, DType::kE4M3FN, {c.groups, c.n, red});
    else if (c.variant == GemmVariant::kNN)
      g.b = View(b[s]->ptr, DType::kE4M3FN, {red, c.n});
    else
      g.b = View(b[s]->ptr, DType::kE4M3FN, {c.n, red});
    g.d = k_grouped ? View(d, out, {c.groups, rows, c.n}) : View(d, out, {rows, c.n});
    return g;
  };

  bool ok = true;
  const tile_gemm::TileShape heuristic =
      tile_gemm::HeuristicTileShape(device.arch, rows, c.n, k_grouped ? c.groups : 1, device.units);
  std::vector<tile_gemm::TileShape> configs = {heuristic};
  for (const tile_gemm::TileShape& s : tile_gemm::TileGemmSpace(device.arch)) {
    if (s != heuristic) configs.push_back(s);
  }
  auto tile = [&](int s, const tile_gemm::TileShape& shape) {
    const absl::Status st = tile_gemm::LaunchTileGemm(bind(s, d_tile.ptr), shape, nullptr);
    if (!st.ok()) {
      std::fprintf(stderr, "%s tile: %s\n", c.name, std::string(st.message()).c_str());
      ok = false;
    }
  };
  const bool peers = !opt.tile_only;
  const GemmConfig wgmma_config = DefaultGemmConfig(bind(0, d_wgmma.ptr), prop);
  const uint64_t scratch_bytes = peers ? GemmFp8ScratchBytes(bind(0, d_wgmma.ptr)) : 0;
  DeviceBuffer scratch(std::max<uint64_t>(scratch_bytes, 256));
  auto wgmma = [&](int s) {
    const absl::Status st = LaunchGemmFp8(bind(s, d_wgmma.ptr), wgmma_config, nullptr,
                                          scratch_bytes > 0 ? scratch.ptr : nullptr);
    if (!st.ok()) {
      std::fprintf(stderr, "%s wgmma: %s\n", c.name, std::string(st.message()).c_str());
      ok = false;
    }
  };
  LtGemm peer;
  const bool lt_ok = peers && !k_grouped && c.variant != GemmVariant::kNN &&
                     peer.Init(lt, c.m, c.n, c.k, c.variant != GemmVariant::kTN,
                               static_cast<const float*>(a_scales.ptr),
                               static_cast<const float*>(b_scales.ptr), workspace, workspace_bytes);
  auto cublas = [&](int s) {
    for (int64_t g = 0; g < (m_grouped ? c.groups : 1); ++g) {
      const uint8_t* ga = static_cast<const uint8_t*>(a[s]->ptr) + g * c.m * c.k;
      const uint8_t* gb = static_cast<const uint8_t*>(b[s]->ptr) + g * c.n * c.k;
      if (!peer.Run(ga, gb, static_cast<uint16_t*>(d_lt.ptr) + g * c.m * c.n)) ok = false;
    }
  };

  const double flops = 2.0 * rows * c.n * red;
  cudaEvent_t start, stop;
  BENCH_CHECK_CUDA(cudaEventCreate(&start));
  BENCH_CHECK_CUDA(cudaEventCreate(&stop));
  int rotation = 0;
  for (int i = 0; i < 3; ++i) {
    for (const tile_gemm::TileShape& s : configs) tile(i % sets, s);
    if (peers) wgmma(i % sets);
    if (lt_ok) cublas(i % sets);
  }
  BENCH_CHECK_CUDA(cudaDeviceSynchronize());
  auto tile0 = [&](int s) { tile(s, configs[0]); };
  const double probe = TimeBatch(tile0, sets, 3, start, stop, rotation);
  const int per_sample = static_cast<int>(std::max(1.0, std::min(200.0, 2.0 / probe)));
  std::vector<std::vector<double>> t_tile(configs.size());
  std::vector<double> t_wgmma, t_lt;
  const int samples = opt.quick ? 3 : opt.samples;
  for (int i = 0; i < samples && ok; ++i) {
    for (size_t j = 0; j < configs.size(); ++j) {
      auto run = [&](int s) { tile(s, configs[j]); };
      t_tile[j].push_back(TimeBatch(run, sets, per_sample, start, stop, rotation));
    }
    if (peers) t_wgmma.push_back(TimeBatch(wgmma, sets, per_sample, start, stop, rotation));
    if (lt_ok) t_lt.push_back(TimeBatch(cublas, sets, per_sample, start, stop, rotation));
  }
  cudaError_t err = cudaDeviceSynchronize();

  double max_rel = -1;
  if (ok && peers && err == cudaSuccess) {
    tile(0, configs[0]);
    wgmma(0);
    err = cudaDeviceSynchronize();
    const size_t elem = out == DType::kF32 ? 4 : 2;
    std::vector<uint8_t> x(d_elems * elem), y(d_elems * elem);
    BENCH_CHECK_CUDA(cudaMemcpy(x.data(), d_tile.ptr, x.size(), cudaMemcpyDeviceToHost));
    BENCH_CHECK_CUDA(cudaMemcpy(y.data(), d_wgmma.ptr, y.size(), cudaMemcpyDeviceToHost));
    max_rel = 0;
    for (int64_t i = 0; i < d_elems; ++i) {
      float u, v;
      if (elem == 4) {
        std::memcpy(&u, &x[i * 4], 4);
        std::memcpy(&v, &y[i * 4], 4);
      } else {
        uint16_t p, q;
        std::memcpy(&p, &x[i * 2], 2);
        std::memcpy(&q, &y[i * 2], 2);
        u = fp8::BF16ToFloat(p);
        v = fp8::BF16ToFloat(q);
      }
      const double rel = std::fabs(u - v) / (std::fabs(v) + 1.0);
      if (!(rel <= max_rel)) max_rel = std::isnan(rel) ? INFINITY : rel;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);

  const double ms_tile = Median(t_tile[0]), ms_wgmma = Median(t_wgmma), ms_lt = Median(t_lt);
  std::string json =
      absl::StrCat("{\"name\":\"", c.name, "\",\"variant\":\"", GemmVariantName(c.variant),
                   "\",\"m\":", rows, ",\"n\":", c.n, ",\"k\":", red, ",\"groups\":", c.groups,
                   ",\"ok\":", ok && err == cudaSuccess ? "true" : "false");
  absl::StrAppend(&json, ",\"tile\":{\"config\":\"", tile_gemm::TileShapeToString(configs[0]),
                  "\",\"ms\":", ms_tile, ",\"tflops\":", ms_tile > 0 ? flops / ms_tile / 1e9 : 0,
                  "},\"tile_configs\":[");
  for (size_t j = 0; j < configs.size(); ++j) {
    const double ms = Median(t_tile[j]);
    absl::StrAppend(&json, j ? "," : "", "{\"config\":\"", tile_gemm::TileShapeToString(configs[j]),
                    "\",\"ms\":", ms, ",\"tflops\":", ms > 0 ? flops / ms / 1e9 : 0, "}");
  }
  absl::StrAppend(&json, "]");
  if (peers) {
    absl::StrAppend(&json, ",\"wgmma\":", Timing(ms_wgmma, flops),
                    ",\"tile_vs_wgmma\":", ms_tile > 0 ? ms_wgmma / ms_tile : 0,
                    ",\"max_rel_diff_vs_wgmma\":", max_rel);
  }
  if (lt_ok) {
    absl::StrAppend(&json, ",\"cublaslt\":", Timing(ms_lt, flops),
                    ",\"tile_vs_cublaslt\":", ms_tile > 0 ? ms_lt / ms_tile : 0);
  }
  absl::StrAppend(&json, "}");
  return json;
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
    } else if (arg == "--tile_only") {
      opt.tile_only = true;
    } else if (arg.rfind("--samples=", 0) == 0) {
      opt.samples = std::max(1, std::atoi(arg.c_str() + 10));
    } else if (arg.rfind("--only=", 0) == 0) {
      size_t start = 7;
      while (start <= arg.size()) {
        const size_t comma = std::min(arg.find(',', start), arg.size());
        if (comma > start) opt.only.push_back(arg.substr(start, comma - start));
        start = comma + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--samples=N] [--only=A,B] [--tile_only]\n",
                   argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  BENCH_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const absl::StatusOr<tile_gemm::TileDevice> device = tile_gemm::CurrentTileDevice();
  if (!device.ok() || tile_gemm::TileGemmSpace(device->arch).empty()) {
    std::fprintf(stderr, "no GPU the tile GEMM runs on (sm_89 or later)\n");
    return 1;
  }
  int ptx = 0, binary = 0;
  BENCH_CHECK_CUDA(
      tile_gemm::TileGemmKernelVersions(tile_gemm::TileGemmSpace(device->arch)[0], &ptx, &binary));
  cublasLtHandle_t lt = nullptr;
  if (!opt.tile_only && cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
  const size_t workspace_bytes = 64 << 20;
  DeviceBuffer workspace(workspace_bytes);
  const Case cases[] = {
      {"nt_4096^3", GemmVariant::kNT, 4096, 4096, 4096, 1},
      {"nt_8192^3", GemmVariant::kNT, 8192, 8192, 8192, 1},
      {"nt_4096x2112x7168", GemmVariant::kNT, 4096, 2112, 7168, 1},
      {"nt_4096x7168x2048", GemmVariant::kNT, 4096, 7168, 2048, 1},
      {"nt_128x7168x2048", GemmVariant::kNT, 128, 7168, 2048, 1},
      {"nt_64x4096x7168", GemmVariant::kNT, 64, 4096, 7168, 1},
      {"nn_4096x7168x2048", GemmVariant::kNN, 4096, 7168, 2048, 1},
      {"tn_wgrad_7168x2048x4096", GemmVariant::kTN, 7168, 2048, 4096, 1},
      {"m_grouped_8x1024_4096x7168", GemmVariant::kMGroupedNT, 1024, 4096, 7168, 8},
      {"k_grouped_8x1024_2048x7168", GemmVariant::kKGroupedTN, 2048, 7168, 1024, 8},
  };
  std::mt19937_64 rng(20261127);
  std::printf(
      "{\"device\":\"%s\",\"arch\":\"%s\",\"sms\":%d,\"tile_code\":{\"ptx\":%d,\"binary\":%d,"
      "\"forced_ptx_jit\":%s},\"results\":[\n",
      prop.name, device->arch.c_str(), prop.multiProcessorCount, ptx, binary,
      std::getenv("CUDA_FORCE_PTX_JIT") != nullptr ? "true" : "false");
  bool first = true;
  for (const Case& c : cases) {
    bool selected = opt.only.empty();
    for (const std::string& s : opt.only) selected |= std::strstr(c.name, s.c_str()) != nullptr;
    if (!selected) continue;
    const std::string line =
        RunCase(c, opt, lt, workspace.ptr, workspace_bytes, prop, *device, rng);
    std::printf("%s%s\n", first ? "" : ",", line.c_str());
    std::fflush(stdout);
    first = false;
  }
  std::printf("]}\n");
  if (lt != nullptr) cublasLtDestroy(lt);
  return 0;
}
