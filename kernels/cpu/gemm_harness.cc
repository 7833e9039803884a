#include "kernels/cpu/gemm_harness.h"

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kernels/cpu/cpu_kernels.h"

namespace kd {
namespace {

constexpr int64_t kMaxHostElements = int64_t{1} << 31;

absl::StatusOr<DType> DTypeByName(absl::string_view name) {
  for (DType d : {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2, DType::kBF16, DType::kF32}) {
    if (DTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype \"", name, "\" is not tunable on the cpu"));
}

float DecodeAny(DType dtype, uint8_t code) {
  switch (dtype) {
    case DType::kE4M3FNUZ:
      return fp8::Decode<fp8::E4M3FNUZ>(code);
    case DType::kE5M2:
      return fp8::Decode<fp8::E5M2>(code);
    default:
      return fp8::Decode<fp8::E4M3FN>(code);
  }
}

Tensor Matrix(void* data, DType dtype, int64_t rows, int64_t cols) {
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

struct InputSet {
  std::vector<uint8_t> a, b;
  std::vector<float> a_scales, b_scales;
  std::vector<uint8_t> reference;  // D of the reference config; empty until first needed
};

class CpuGemmHarness : public TuneHarness {
 public:
  CpuGemmHarness(int64_t m, int64_t n, int64_t k, DType ab, DType d, CpuGemmConfig reference,
                 const CpuGemmHarnessOptions& options)
      : reference_config_(reference),
        m_(m),
        n_(n),
        k_(k),
        ab_(ab),
        d_dtype_(d),
        options_(options),
        pool_(options.threads > 0
                  ? options.threads
                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
    const uint64_t set_bytes = static_cast<uint64_t>((m + n) * k) +
                               4 * static_cast<uint64_t>((m + (n + 127) / 128) * (k / 128));
    const uint64_t want = (options.rotate_bytes + set_bytes - 1) / std::max<uint64_t>(1, set_bytes);
    const int sets = static_cast<int>(std::clamp<uint64_t>(want, 1, kMaxCpuInputSets));
    std::mt19937_64 rng(options.seed);
    for (int i = 0; i < sets; ++i) sets_.push_back(MakeSet(rng));
    output_.resize(static_cast<size_t>(m * n) * DTypeSize(d));
  }

  absl::Status Run(absl::string_view config) override {
    absl::StatusOr<int64_t> tile_n = ParseCpuGemmConfig(config);
    if (!tile_n.ok()) return tile_n.status();
    CpuGemmConfig c;
    c.tile_n = *tile_n;
    const Tensor d = Matrix(output_.data(), d_dtype_, m_, n_);
    const absl::Status s = GemmCpu(Args(sets_[current_], d), pool_, c);
    if (s.ok() && options_.after_run) options_.after_run(config, d);
    return s;
  }

  absl::Status CheckOutput() override {
    InputSet& set = sets_[current_];
    if (set.reference.empty()) {
      set.reference.resize(output_.size());
      const absl::Status s = GemmCpu(Args(set, Matrix(set.reference.data(), d_dtype_, m_, n_)),
                                     pool_, reference_config_);
      if (!s.ok()) return s;
    }
    if (std::memcmp(set.reference.data(), output_.data(), output_.size()) == 0) {
      return absl::OkStatus();
    }
    // The CPU kernel's result does not depend on its config: any difference is a wrong result.
    const size_t elem = DTypeSize(d_dtype_);
    for (size_t i = 0; i < output_.size(); i += elem) {
      if (std::memcmp(&set.reference[i], &output_[i], elem) != 0) {
        const int64_t e = static_cast<int64_t>(i / elem);
        return absl::InternalError(
            absl::StrCat("d[", e / n_, "][", e % n_, "] differs from the reference"));
      }
    }
    return absl::OkStatus();
  }

  void EvictCaches() override { current_ = (current_ + 1) % sets_.size(); }

 private:
  InputSet MakeSet(std::mt19937_64& rng) {
    InputSet s;
    s.a = RandomFp8(rng, m_ * k_);
    s.b = RandomFp8(rng, n_ * k_);
    std::uniform_real_distribution<float> scale(0.25f, 2.0f);
    s.a_scales.resize(m_ * (k_ / kQuantBlock));
    for (float& v : s.a_scales) v = scale(rng);
    s.b_scales.resize(((n_ + kQuantBlock - 1) / kQuantBlock) * (k_ / kQuantBlock));
    for (float& v : s.b_scales) v = scale(rng);
    return s;
  }

  std::vector<uint8_t> RandomFp8(std::mt19937_64& rng, int64_t count) {
    std::vector<uint8_t> out(count);
    for (uint8_t& c : out) {
      do {
        c = static_cast<uint8_t>(rng());
      } while (!std::isfinite(DecodeAny(ab_, c)));
    }
    return out;
  }

  GemmArgs Args(InputSet& s, const Tensor& d) const {
    GemmArgs g;
    g.variant = GemmVariant::kNT;
    g.a = Matrix(s.a.data(), ab_, m_, k_);
    g.b = Matrix(s.b.data(), ab_, n_, k_);
    g.a_scales = Matrix(s.a_scales.data(), DType::kF32, m_, k_ / kQuantBlock);
    g.b_scales = Matrix(s.b_scales.data(), DType::kF32, (n_ + kQuantBlock - 1) / kQuantBlock,
                        k_ / kQuantBlock);
    g.d = d;
    return g;
  }

  const CpuGemmConfig reference_config_;
  const int64_t m_, n_, k_;
  const DType ab_, d_dtype_;
  const CpuGemmHarnessOptions options_;
  ThreadPool pool_;
  std::vector<InputSet> sets_;
  size_t current_ = 0;
  std::vector<uint8_t> output_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TuneHarness>> CreateCpuGemmHarness(
    const TuneKey& key, const CpuGemmHarnessOptions& options) {
  if (key.op != "gemm" || key.variant != "nt" || ArchFamily(key.arch) != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "key ", key.ToString(), " is not a cpu gemm nt key (the only one the cpu tunes)"));
  }
  // dtypes is "<a>.<b>><d>".
  const std::vector<absl::string_view> io = absl::StrSplit(key.dtypes, '>');
  const std::vector<absl::string_view> in =
      absl::StrSplit(io.empty() ? absl::string_view() : io[0], '.');
  if (io.size() != 2 || in.size() != 2 || in[0] != in[1]) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtypes=\"", key.dtypes, "\" must be \"<fp8>.<fp8>><bf16|f32>\""));
  }
  absl::StatusOr<DType> ab = DTypeByName(in[0]);
  if (!ab.ok()) return ab.status();
  absl::StatusOr<DType> d = DTypeByName(io[1]);
  if (!d.ok()) return d.status();
  if (!IsFp8(*ab) || (*d != DType::kBF16 && *d != DType::kF32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtypes=\"", key.dtypes, "\" must be \"<fp8>.<fp8>><bf16|f32>\""));
  }
  if (key.k % kQuantBlock != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("k=", key.k, " is not a multiple of block ", kQuantBlock));
  }
  if (key.m > kMaxHostElements || key.n > kMaxHostElements || key.k > kMaxHostElements ||
      key.m * key.k > kMaxHostElements || key.n * key.k > kMaxHostElements ||
      key.m * key.n > kMaxHostElements) {
    return absl::InvalidArgumentError(absl::StrCat("shape m=", key.m, " n=", key.n, " k=", key.k,
                                                   " is too large to tune on the host"));
  }
  CpuGemmConfig reference;
  if (!options.reference_config.empty()) {
    absl::StatusOr<int64_t> tile_n = ParseCpuGemmConfig(options.reference_config);
    if (!tile_n.ok()) return tile_n.status();
    reference.tile_n = *tile_n;
  }
  return std::unique_ptr<TuneHarness>(
      std::make_unique<CpuGemmHarness>(key.m, key.n, key.k, *ab, *d, reference, options));
}

}  // namespace kd
