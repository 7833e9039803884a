// Recording one kernel time with five labels. FamilyAdd looks the series up with
// prometheus-cpp's Family::Add, which builds a whole histogram (every bucket) on each call
// before finding the existing series; CachedSeries is Metrics::ObserveKernel, which finds the
// series in its own map: the reason Metrics caches a series per label set, since the daemon
// records one or more series per op and per RPC.
#include "benchmark/benchmark.h"
#include "prometheus/histogram.h"
#include "server/metrics.h"

namespace {

prometheus::Histogram::BucketBoundaries Buckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 1e-6; v < 40.0; v *= 2) b.push_back(v);
  return b;
}

void BM_FamilyAdd(benchmark::State& state) {
  kd::Metrics metrics("bench", "cpu");
  auto& family =
      prometheus::BuildHistogram().Name("bench_family_add").Help("h").Register(*metrics.registry());
  const auto buckets = Buckets();
  for (auto _ : state) {
    family
        .Add({{"op", "quantize"},
              {"variant", "1x128"},
              {"dtype", "bf16>e4m3fn"},
              {"device", "cuda:0"},
              {"shape_class", "l"}},
             buckets)
        .Observe(4e-5);
  }
}
BENCHMARK(BM_FamilyAdd);

void BM_CachedSeries(benchmark::State& state) {
  kd::Metrics metrics("bench", "cpu");
  for (auto _ : state)
    metrics.ObserveKernel("quantize", "1x128", "bf16>e4m3fn", "cuda:0", "l", 4e-5);
}
BENCHMARK(BM_CachedSeries);

}  // namespace

BENCHMARK_MAIN();
