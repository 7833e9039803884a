// Throughput of the CPU backend's quantizer on 8192x4096 inputs, next to a memcpy peer run in the
// same process. Bytes are counted read + written (input, codes, scales), so GB/s compares with the
// memcpy figure, which moves 2x its size. Run with --benchmark_format=json.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/registry.h"

namespace kd {
namespace {

constexpr int64_t kM = 8192, kK = 4096;

struct Buffer {
  std::vector<uint64_t> storage;
  Tensor t;
  Buffer(DType dtype, std::vector<int64_t> shape) {
    t.dtype = dtype;
    t.rank = static_cast<int>(shape.size());
    int64_t n = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
      t.shape[i] = shape[i];
      t.strides[i] = n;
      n *= shape[i];
    }
    storage.assign((n * DTypeSize(dtype) + 7) / 8, 0);
    t.data = storage.data();
  }
  int64_t bytes() const { return t.numel() * static_cast<int64_t>(DTypeSize(t.dtype)); }
};

// Random values with exponents in 2^-8 .. 2^8 and random mantissas, from a cheap generator so
// that setup does not dominate the run.
void FillRandom(Buffer& b) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int64_t i = 0; i < b.t.numel(); ++i) {
    const uint64_t r = next();
    const uint32_t bits = (static_cast<uint32_t>(r >> 63) << 31) |
                          (static_cast<uint32_t>(119 + (r >> 32) % 17) << 23) |
                          (static_cast<uint32_t>(r) & 0x7FFFFFu);
    if (b.t.dtype == DType::kF32)
      static_cast<uint32_t*>(b.t.data)[i] = bits;
    else
      static_cast<uint16_t*>(b.t.data)[i] = static_cast<uint16_t>(bits >> 16);
  }
}

// CPU seconds used by this process so far, all threads.
double ProcessCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// GB/s over the process CPU time (all threads), i.e. per busy core: unlike wall time it does not
// drop when other processes share the cores.
void SetCpuCounters(benchmark::State& state, double cpu_seconds, int64_t bytes) {
  state.counters["cpu_ms_per_op"] = 1e3 * cpu_seconds / state.iterations();
  state.counters["gb_per_cpu_s"] =
      state.iterations() * static_cast<double>(bytes) / cpu_seconds / 1e9;
}

struct Variant {
  QuantGranularity g;
  bool transpose = false;
  bool dual = false;
  DType in = DType::kBF16;
  MxRounding rounding = MxRounding::kFloor;
};

void BM_Quantize(benchmark::State& state, Variant v) {
  const int64_t rows = v.transpose ? kK : kM, cols = v.transpose ? kM : kK;
  Buffer input(v.in, {kM, kK});
  FillRandom(input);
  Buffer output(DType::kE4M3FN, {rows, cols});
  std::unique_ptr<Buffer> scales, output_t, scales_t, ends;
  switch (v.g) {
    case QuantGranularity::k128x128:
      scales = std::make_unique<Buffer>(DType::kF32, std::vector<int64_t>{rows / 128, cols / 128});
      break;
    case QuantGranularity::kMx1x32:
      scales = std::make_unique<Buffer>(DType::kE8M0, std::vector<int64_t>{rows, cols / 32});
      break;
    case QuantGranularity::kPerTensor:
      scales = std::make_unique<Buffer>(DType::kF32, std::vector<int64_t>{1});
      break;
    case QuantGranularity::kJaggedColwise:
      ends = std::make_unique<Buffer>(DType::kI64, std::vector<int64_t>{8});
      for (int g = 0; g < 8; ++g)
        static_cast<int64_t*>(ends->t.data)[g] = (g + 1) * kM / 8 - (g < 7 ? 37 : 0);
      scales = std::make_unique<Buffer>(DType::kF32, std::vector<int64_t>{8, kK});
      break;
    default:
      scales = std::make_unique<Buffer>(DType::kF32, std::vector<int64_t>{rows, cols / 128});
      break;
  }
  QuantizeArgs a;
  a.input = input.t;
  a.output = output.t;
  a.scales = scales->t;
  a.granularity = v.g;
  a.transpose_output = v.transpose;
  a.mx_rounding = v.rounding;
  if (ends) a.group_ends = ends->t;
  int64_t bytes = input.bytes() + output.bytes() + scales->bytes();
  if (v.dual) {
    output_t = std::make_unique<Buffer>(DType::kE4M3FN, std::vector<int64_t>{kK, kM});
    scales_t = std::make_unique<Buffer>(DType::kF32, std::vector<int64_t>{kK, kM / 128});
    a.output_t = output_t->t;
    a.scales_t = scales_t->t;
    bytes += output_t->bytes() + scales_t->bytes();
  }
  const absl::StatusOr<ValidatedOp> op = Validate(a);
  if (!op.ok()) {
    state.SkipWithError("invalid op");
    return;
  }
  std::unique_ptr<Backend> cpu = CreateCpuBackend(0);
  std::unique_ptr<Stream> stream = cpu->CreateStream(0).value();
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) {
    if (!cpu->Run(*op, *stream, {}).ok()) state.SkipWithError("run failed");
    benchmark::ClobberMemory();
  }
  SetCpuCounters(state, ProcessCpuSeconds() - cpu0, bytes);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["threads"] = std::thread::hardware_concurrency();
}

// The peer: memcpy of the 8192x4096 bf16 input (64 MiB) on all cores, bytes read + written.
void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(kM * kK * 2);
  const int threads = state.range(0);
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) {
    std::vector<std::thread> pool;
    const size_t chunk = bytes / threads;
    for (int t = 1; t < threads; ++t) {
      pool.emplace_back(
          [&, t] { std::memcpy(dst.data() + t * chunk, src.data() + t * chunk, chunk); });
    }
    std::memcpy(dst.data(), src.data(), chunk);
    for (auto& th : pool) th.join();
    benchmark::ClobberMemory();
  }
  SetCpuCounters(state, ProcessCpuSeconds() - cpu0, 2 * static_cast<int64_t>(bytes));
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(bytes));
}

using G = QuantGranularity;
BENCHMARK_CAPTURE(BM_Quantize, bf16_1x128, Variant{G::k1x128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Memcpy)
    ->Arg(1)
    ->Arg(static_cast<int>(std::thread::hardware_concurrency()))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Quantize, f32_1x128, Variant{G::k1x128, false, false, DType::kF32})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Quantize, bf16_1x128_t, Variant{G::k1x128, true})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Quantize, bf16_1x128_dual, Variant{G::k1x128, false, true})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Quantize, bf16_128x128, Variant{G::k128x128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Quantize, bf16_mx1x32_floor, Variant{G::kMx1x32})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Quantize, bf16_per_tensor, Variant{G::kPerTensor})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Quantize, bf16_jagged_colwise, Variant{G::kJaggedColwise, true})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace kd

BENCHMARK_MAIN();
