// Quantize (every variant the CUDA backend runs) and pad/unpad on the CUDA backend, bf16 inputs
// from 8192x4096 to 32768x7168, against a cudaMemcpy device-to-device copy measured in the same
// process. Bandwidth counts bytes read + bytes written, for the kernels and the copy alike. Prints
// one JSON document (and writes it to argv[1] when given).
//
// Each op is timed by the backend's own CUDA events (the KernelTimingFn the daemon exports), with
// `reps` ops enqueued back to back and one synchronisation at the end, as a busy daemon runs them:
// timing an op enqueued on an idle stream would count the host's launch time between the start
// event and the kernel.
//
//   quant_pad_bench [OUT.json] [--quick] [--only=SUBSTRING[,SUBSTRING...]]  (of "op/variant")
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kerneld/kernels/backend.h"
#include "kerneld/kernels/cuda_backend.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/kernels/registry.h"
#include "kerneld/kernels/status_macros.h"

namespace kd {
namespace {

#define BENCH_CHECK(expr)                                              \
  do {                                                                 \
    const cudaError_t e_ = (expr);                                     \
    if (e_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

const DeviceLoc kGpu{BackendKind::kCuda, 0};
constexpr int kWarmup = 3;

Tensor Make(void* data, DType dtype, int64_t rows, int64_t cols) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.rank = cols > 0 ? 2 : 1;
  t.shape[0] = rows;
  if (cols > 0) {
    t.shape[1] = cols;
    t.strides[0] = cols;
    t.strides[1] = 1;
  } else {
    t.strides[0] = 1;
  }
  t.loc = kGpu;
  return t;
}

// Median milliseconds of `fn` enqueued on `stream`, each repetition timed by its own events.
double MedianMs(cudaStream_t stream, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < kWarmup; ++i) fn();
  std::vector<cudaEvent_t> events(2 * reps);
  for (auto& e : events) BENCH_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    BENCH_CHECK(cudaEventRecord(events[2 * i], stream));
    fn();
    BENCH_CHECK(cudaEventRecord(events[2 * i + 1], stream));
  }
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms(reps);
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    BENCH_CHECK(cudaEventElapsedTime(&t, events[2 * i], events[2 * i + 1]));
    ms[i] = t;
  }
  for (auto& e : events) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

// Median milliseconds of `op` by the backend's kernel timing: kWarmup runs, then `reps` runs
// enqueued back to back and one synchronisation.
absl::Status TimeOp(Backend& gpu, Stream& stream, const Op& unchecked, int reps,
                    double& median_ms) {
  KD_ASSIGN_OR_RETURN(const ValidatedOp op, Validate(unchecked));
  for (int i = 0; i < kWarmup; ++i) KD_RETURN_IF_ERROR(gpu.Run(op, stream, nullptr));
  KD_RETURN_IF_ERROR(gpu.Synchronize(stream));
  std::vector<std::atomic<double>> seconds(reps);
  for (auto& s : seconds) s.store(-1);
  for (int i = 0; i < reps; ++i) {
    KD_RETURN_IF_ERROR(gpu.Run(op, stream, [&seconds, i](double s) { seconds[i].store(s); }));
  }
  KD_RETURN_IF_ERROR(gpu.Synchronize(stream));
  std::vector<double> ms(reps);
  for (int i = 0; i < reps; ++i) {
    while (seconds[i].load() < 0) {
    }
    ms[i] = seconds[i].load() * 1e3;
  }
  std::sort(ms.begin(), ms.end());
  median_ms = ms[reps / 2];
  return absl::OkStatus();
}

struct Result {
  std::string op, variant;
  int64_t m, k;
  double ms, bytes, copy_same_gbps;
};

}  // namespace
}  // namespace kd

int main(int argc, char** argv) {
  using namespace kd;
  std::string out_path;
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strncmp(argv[i], "--only=", 7) == 0)
      only = argv[i] + 7;
    else
      out_path = argv[i];
  }
  // --only=A,B: the ops whose name holds A or B.
  const auto wanted = [&](const std::string& name) {
    if (only.empty()) return true;
    for (size_t at = 0; at <= only.size();) {
      const size_t comma = std::min(only.find(',', at), only.size());
      if (comma > at && name.find(only.substr(at, comma - at)) != std::string::npos) return true;
      at = comma + 1;
    }
    return false;
  };
  auto gpu = CreateCudaBackend(0);
  if (gpu == nullptr) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  auto stream_or = gpu->CreateStream(0);
  Stream& stream = **stream_or;
  cudaStream_t raw_stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&raw_stream, cudaStreamNonBlocking));
  const int reps = quick ? 5 : 20;

  // The peer: a large device-to-device copy (1 GiB each way), and per shape a copy of the input.
  const size_t big = size_t{1} << 30;
  void *copy_src = nullptr, *copy_dst = nullptr;
  BENCH_CHECK(cudaMalloc(&copy_src, big));
  BENCH_CHECK(cudaMalloc(&copy_dst, big));
  BENCH_CHECK(cudaMemset(copy_src, 0x3c, big));
  auto copy_gbps = [&](size_t bytes) {
    const double ms = MedianMs(raw_stream, reps, [&] {
      BENCH_CHECK(cudaMemcpyAsync(copy_dst, copy_src, bytes, cudaMemcpyDeviceToDevice, raw_stream));
    });
    return 2.0 * bytes / (ms * 1e-3) / 1e9;
  };
  const double copy_big_gbps = copy_gbps(big);

  std::vector<std::pair<int64_t, int64_t>> shapes = {
      {8192, 4096}, {8192, 7168}, {16384, 7168}, {32768, 7168}};
  if (quick) shapes = {{8192, 4096}};
  std::vector<Result> results;
  std::mt19937_64 rng(5);
  for (auto [m, k] : shapes) {
    const size_t in_bytes = m * k * 2;
    const double copy_same = copy_gbps(in_bytes);
    auto input = gpu->Allocate(0, in_bytes).value();
    {
      // Random finite bf16 values (never time on zeros).
      std::vector<uint16_t> host(m * k);
      for (auto& v : host) v = static_cast<uint16_t>((rng() & 0x807F) | ((100 + rng() % 40) << 7));
      BENCH_CHECK(cudaMemcpy(input->data(), host.data(), in_bytes, cudaMemcpyHostToDevice));
    }
    auto output = gpu->Allocate(0, m * k).value();
    auto scales = gpu->Allocate(0, m * (k / 128) * 4).value();
    auto output_t = gpu->Allocate(0, m * k).value();
    auto scales_t = gpu->Allocate(0, m * (k / 128) * 4).value();
    struct Variant {
      const char* name;
      QuantGranularity g;
      bool transpose, kbm, pow2;
      DType out;
      bool dual = false;
      int64_t groups = 0;   // jagged: random group ends over M
      bool skewed = false;  // jagged: one group of 85% of the rows, empty and one-row groups
    };
    const Variant variants[] = {
        {"1x128", QuantGranularity::k1x128, false, false, false, DType::kE4M3FN},
        {"1x128_kblock_major", QuantGranularity::k1x128, false, true, false, DType::kE4M3FN},
        {"1x128_pow2", QuantGranularity::k1x128, false, false, true, DType::kE4M3FN},
        {"1x128_e5m2", QuantGranularity::k1x128, false, false, false, DType::kE5M2},
        {"1x128_e4m3fnuz", QuantGranularity::k1x128, false, false, false, DType::kE4M3FNUZ},
        {"128x128", QuantGranularity::k128x128, false, false, false, DType::kE4M3FN},
        // The tiled quantizer (quantize_tiled.cu), the row-wise kernels (quantize_rows.cu).
        {"1x128_transposed", QuantGranularity::k1x128, true, false, false, DType::kE4M3FN},
        {"128x1", QuantGranularity::k128x1, false, false, false, DType::kE4M3FN},
        {"128x1_transposed", QuantGranularity::k128x1, true, false, false, DType::kE4M3FN},
        {"128x128_transposed", QuantGranularity::k128x128, true, false, false, DType::kE4M3FN},
        {"per_row", QuantGranularity::kPerRow, false, false, false, DType::kE4M3FN},
        {"per_tensor", QuantGranularity::kPerTensor, false, false, false, DType::kE4M3FN},
        {"mx1x32", QuantGranularity::kMx1x32, false, false, false, DType::kE4M3FN},
        {"dual_1x128", QuantGranularity::k1x128, false, false, false, DType::kE4M3FN, true},
        {"dual_1x128_kblock_major", QuantGranularity::k1x128, false, true, false, DType::kE4M3FN,
         true},
        {"jagged_rowwise_g8", QuantGranularity::kJaggedRowwise, false, false, false, DType::kE4M3FN,
         false, 8},
        {"jagged_colwise_g8", QuantGranularity::kJaggedColwise, true, false, false, DType::kE4M3FN,
         false, 8},
        {"jagged_colwise_g8_skewed", QuantGranularity::kJaggedColwise, true, false, false,
         DType::kE4M3FN, false, 8, true},
        // Y = Xᵀ of the row-wise granularities (quantize_rows.cu's column kernels).
        {"per_row_transposed", QuantGranularity::kPerRow, true, false, false, DType::kE4M3FN},
        {"per_tensor_transposed", QuantGranularity::kPerTensor, true, false, false, DType::kE4M3FN},
        {"mx1x32_transposed", QuantGranularity::kMx1x32, true, false, false, DType::kE4M3FN},
    };
    // Group ends for the jagged variants: 8 groups of random sizes.
    std::vector<int32_t> jagged_ends(8);
    for (auto& e : jagged_ends) e = static_cast<int32_t>(rng() % (m + 1));
    std::sort(jagged_ends.begin(), jagged_ends.end());
    jagged_ends.back() = static_cast<int32_t>(m);
    auto d_jagged_ends = gpu->Allocate(0, jagged_ends.size() * 4).value();
    BENCH_CHECK(cudaMemcpy(d_jagged_ends->data(), jagged_ends.data(), jagged_ends.size() * 4,
                           cudaMemcpyHostToDevice));
    // Skewed: empty groups first, one of m/64 rows, one of about 85% of the rows, empty, a
    // one-row group, the rest.
    const int32_t m32 = static_cast<int32_t>(m);
    const std::vector<int32_t> skewed_ends = {
        0, 0, m32 / 64, m32 - m32 / 8, m32 - m32 / 8, m32 - m32 / 8 + 1, m32, m32};
    auto d_skewed_ends = gpu->Allocate(0, skewed_ends.size() * 4).value();
    BENCH_CHECK(cudaMemcpy(d_skewed_ends->data(), skewed_ends.data(), skewed_ends.size() * 4,
                           cudaMemcpyHostToDevice));
    for (const Variant& v : variants) {
      if (!wanted(std::string("quantize/") + v.name)) continue;
      QuantizeArgs q;
      q.input = Make(input->data(), DType::kBF16, m, k);
      q.output =
          v.transpose ? Make(output->data(), v.out, k, m) : Make(output->data(), v.out, m, k);
      const int64_t rows = v.transpose ? k : m, cols = v.transpose ? m : k;
      int64_t s_rows = rows, s_cols = cols / 128;
      DType s_type = DType::kF32;
      switch (v.g) {
        case QuantGranularity::k128x1:
          s_rows = (rows + 127) / 128, s_cols = cols;
          break;
        case QuantGranularity::k128x128:
          s_rows = (rows + 127) / 128;
          break;
        case QuantGranularity::kPerRow:
          s_cols = 1;
          break;
        case QuantGranularity::kPerTensor:
          s_rows = 1, s_cols = 0;
          break;
        case QuantGranularity::kMx1x32:
          s_cols = cols / 32, s_type = DType::kU8;
          break;
        case QuantGranularity::kJaggedColwise:
          s_rows = v.groups, s_cols = k;
          break;
        default:
          break;
      }
      if (v.groups > 0) {
        q.group_ends =
            Make((v.skewed ? d_skewed_ends : d_jagged_ends)->data(), DType::kI32, v.groups, 0);
      }
      if (v.kbm) std::swap(s_rows, s_cols);
      q.scales = Make(scales->data(), s_type, s_rows, s_cols);
      if (v.dual) {
        q.output_t = Make(output_t->data(), v.out, k, m);
        q.scales_t = v.kbm ? Make(scales_t->data(), DType::kF32, m / 128, k)
                           : Make(scales_t->data(), DType::kF32, k, m / 128);
      }
      q.granularity = v.g;
      q.transpose_output = v.transpose;
      q.scale_layout = v.kbm ? ScaleLayout::kKBlockMajor : ScaleLayout::kRowMajor;
      q.scale_format = v.pow2 ? ScaleFormat::kPow2 : ScaleFormat::kFp32;
      const Op op(q);
      absl::Status st = Validate(op).status();
      if (!st.ok()) {
        std::fprintf(stderr, "%s: %s\n", v.name, st.ToString().c_str());
        return 1;
      }
      double ms = 0;
      st = TimeOp(*gpu, stream, op, reps, ms);
      if (!st.ok()) {
        std::fprintf(stderr, "%s: %s\n", v.name, st.ToString().c_str());
        return 1;
      }
      const double scale_bytes =
          static_cast<double>(DTypeSize(s_type)) * s_rows * std::max<int64_t>(s_cols, 1);
      const double bytes = static_cast<double>(m * k * 2 + m * k) + scale_bytes +
                           (v.dual ? static_cast<double>(m * k) + 4.0 * k * (m / 128) : 0.0);
      results.push_back({"quantize", v.name, m, k, ms, bytes, copy_same});
    }
    // Pad / unpad with 8 and 64 groups of random sizes, alignment 128.
    for (int64_t groups : {int64_t{8}, int64_t{64}}) {
      std::vector<int32_t> ends(groups);
      for (int64_t g = 0; g + 1 < groups; ++g) ends[g] = static_cast<int32_t>(rng() % (m + 1));
      std::sort(ends.begin(), ends.end() - 1);
      ends[groups - 1] = static_cast<int32_t>(m);
      const int64_t padded_rows = m + groups * 127;
      auto d_ends = gpu->Allocate(0, groups * 4).value();
      auto d_pends = gpu->Allocate(0, groups * 4).value();
      auto padded = gpu->Allocate(0, padded_rows * k * 2).value();
      auto back = gpu->Allocate(0, m * k * 2).value();
      BENCH_CHECK(cudaMemcpy(d_ends->data(), ends.data(), groups * 4, cudaMemcpyHostToDevice));
      PadArgs p;
      p.input = Make(input->data(), DType::kBF16, m, k);
      p.group_ends = Make(d_ends->data(), DType::kI32, groups, 0);
      p.output = Make(padded->data(), DType::kBF16, padded_rows, k);
      p.padded_group_ends = Make(d_pends->data(), DType::kI32, groups, 0);
      p.alignment = 128;
      UnpadArgs u;
      u.input = Make(padded->data(), DType::kBF16, padded_rows, k);
      u.group_ends = p.group_ends;
      u.output = Make(back->data(), DType::kBF16, m, k);
      u.alignment = 128;
      const std::string suffix = "_g" + std::to_string(groups) + "_a128";
      for (int which = 0; which < 2; ++which) {
        const Op op = which == 0 ? Op(p) : Op(u);
        if (!wanted(std::string(which == 0 ? "pad/" : "unpad/") + "bf16" + suffix)) continue;
        double ms = 0;
        const absl::Status st = TimeOp(*gpu, stream, op, reps, ms);
        if (!st.ok()) {
          std::fprintf(stderr, "pad: %s\n", st.ToString().c_str());
          return 1;
        }
        // Pad reads the input rows and writes every output row; unpad reads and writes m rows.
        const double bytes = which == 0 ? 2.0 * k * (m + padded_rows) : 4.0 * k * m;
        results.push_back(
            {which == 0 ? "pad" : "unpad", "bf16" + suffix, m, k, ms, bytes, copy_same});
      }
    }
  }

  std::ostringstream json;
  const DeviceProperties props = gpu->Properties(0);
  json << "{\n  \"device\": \"" << props.name << "\",\n  \"copy_1gib_gbps\": " << copy_big_gbps
       << ",\n  \"timing\": \"median of " << reps
       << " runs, CUDA events around each op (the backend's KernelTimingFn)\",\n"
       << "  \"results\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const double gbps = r.bytes / (r.ms * 1e-3) / 1e9;
    char line[512];
    std::snprintf(line, sizeof(line),
                  "    {\"op\": \"%s\", \"variant\": \"%s\", \"m\": %lld, \"k\": %lld, "
                  "\"us\": %.1f, \"gbps\": %.0f, \"copy_same_size_gbps\": %.0f, "
                  "\"ratio_to_copy_1gib\": %.3f, \"ratio_to_copy_same_size\": %.3f}%s\n",
                  r.op.c_str(), r.variant.c_str(), static_cast<long long>(r.m),
                  static_cast<long long>(r.k), r.ms * 1e3, gbps, r.copy_same_gbps,
                  gbps / copy_big_gbps, gbps / r.copy_same_gbps, i + 1 < results.size() ? "," : "");
    json << line;
  }
  json << "  ]\n}\n";
  std::fputs(json.str().c_str(), stdout);
  if (!out_path.empty()) std::ofstream(out_path) << json.str();
  cudaFree(copy_src);
  cudaFree(copy_dst);
  cudaStreamDestroy(raw_stream);
  return 0;
}
