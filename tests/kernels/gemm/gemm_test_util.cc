#include "tests/kernels/gemm/gemm_test_util.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/registry.h"

namespace kd {
namespace gemm_test {

HostTensor MakeHost(DType dtype, std::initializer_list<int64_t> shape) {
  HostTensor h;
  h.t.dtype = dtype;
  h.t.rank = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) h.t.shape[i++] = s;
  int64_t stride = 1;
  for (int d = h.t.rank - 1; d >= 0; --d) {
    h.t.strides[d] = stride;
    stride *= h.t.shape[d];
  }
  const size_t bytes = static_cast<size_t>(stride) * DTypeSize(dtype);
  h.storage.assign((bytes + 7) / 8, 0);
  h.t.data = h.storage.data();
  return h;
}

void FillFp8(HostTensor& t, Pattern pattern, std::mt19937_64& rng) {
  const int64_t count = t.t.numel();
  const int64_t row = t.t.shape[t.t.rank - 1];
  uint8_t* codes = t.bytes();
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_int_distribution<int> any_code(0, 255);
  for (int64_t i = 0; i < count; ++i) {
    switch (pattern) {
      case Pattern::kGaussian:
        codes[i] = fp8::Encode<fp8::E4M3FN>(gauss(rng) * 64.0f);
        break;
      case Pattern::kAllCodes: {
        uint8_t c;
        do {
          c = static_cast<uint8_t>(any_code(rng));
        } while ((c & 0x7F) == 0x7F);  // skip the two NaN codes
        codes[i] = c;
        break;
      }
      case Pattern::kOutlierPerBlock:
        codes[i] = fp8::Encode<fp8::E4M3FN>(gauss(rng) * 0.05f);
        break;
      case Pattern::kZeros:
        codes[i] = 0;
        break;
    }
  }
  if (pattern == Pattern::kOutlierPerBlock) {
    std::uniform_int_distribution<int64_t> pos(0, 127);
    for (int64_t base = 0; base < count; base += 128) {
      const int64_t len = std::min<int64_t>(128, row - base % row);
      const int64_t at = base + pos(rng) % len;
      codes[at] = (rng() & 1) ? 0x7E : 0xFE;  // ±448
    }
  }
}

void FillScales(HostTensor& t, int magnitude, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  float* s = t.data<float>();
  for (int64_t i = 0; i < t.t.numel(); ++i) s[i] = std::ldexp(u(rng), magnitude);
}

void FillGaussian(HostTensor& t, std::mt19937_64& rng) {
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (int64_t i = 0; i < t.t.numel(); ++i) {
    if (t.t.dtype == DType::kF32)
      t.data<float>()[i] = gauss(rng);
    else
      t.data<uint16_t>()[i] = fp8::FloatToBF16(gauss(rng));
  }
}

void Poison(HostTensor& t) {
  std::fill(t.bytes(), t.bytes() + t.t.numel() * DTypeSize(t.t.dtype), 0xFF);
}

std::vector<double> ReadAll(const HostTensor& t) {
  std::vector<double> out(t.t.numel());
  for (int64_t i = 0; i < t.t.numel(); ++i) out[i] = ReadOutput(t.t, i);
  return out;
}

uint64_t FreshSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::vector<Mix> StandardMixes() {
  return {
      {"gaussian_bf16", Pattern::kGaussian, Pattern::kGaussian, 0, DType::kBF16, false},
      {"gaussian_small_scales_bf16", Pattern::kGaussian, Pattern::kGaussian, -14, DType::kBF16,
       false},
      {"gaussian_large_scales_f32", Pattern::kGaussian, Pattern::kGaussian, 14, DType::kF32, false},
      {"all_codes_f32", Pattern::kAllCodes, Pattern::kAllCodes, -4, DType::kF32, false},
      {"outlier_per_block_bf16", Pattern::kOutlierPerBlock, Pattern::kOutlierPerBlock, 0,
       DType::kBF16, false},
      {"outlier_per_block_f32", Pattern::kOutlierPerBlock, Pattern::kGaussian, -6, DType::kF32,
       false},
      {"zero_a_bf16", Pattern::kZeros, Pattern::kGaussian, 0, DType::kBF16, false},
      {"zero_b_f32_accumulate", Pattern::kGaussian, Pattern::kZeros, 0, DType::kF32, true},
      {"gaussian_f32_accumulate", Pattern::kGaussian, Pattern::kGaussian, -8, DType::kF32, true},
  };
}

// Decoded independently of the kernels' tables: sign, 4 exponent bits (bias 7), 3 mantissa bits.
double DecodeE4M3(uint8_t code) {
  const int sign = (code & 0x80) ? -1 : 1;
  const int exp = (code >> 3) & 0xF;
  const int man = code & 0x7;
  if (exp == 0) return sign * std::ldexp(man, -9);
  return sign * std::ldexp(8 + man, exp - 10);
}

double ReadOutput(const Tensor& d, int64_t flat_index) {
  if (d.dtype == DType::kF32) return static_cast<const float*>(d.data)[flat_index];
  return fp8::BF16ToFloat(static_cast<const uint16_t*>(d.data)[flat_index]);
}

RefResult Reference(const RefProblem& p) {
  RefResult out;
  out.m = p.m;
  out.n = p.n;
  out.value.assign(p.m * p.n, 0.0);
  out.mass.assign(p.m * p.n, 0.0);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double value = 0, mass = 0;
      for (int64_t kb = p.kb_begin; kb < p.kb_end; ++kb) {
        const double scale = p.a_scale(i, kb) * p.b_scale(j, kb);
        double block = 0, block_mass = 0;
        for (int64_t r = kb * 128; r < (kb + 1) * 128; ++r) {
          const double prod = p.a(i, r) * p.b(j, r);
          block += prod;
          block_mass += std::fabs(prod);
        }
        value += block * scale;
        mass += block_mass * std::fabs(scale);
      }
      out.value[i * p.n + j] = value;
      out.mass[i * p.n + j] = mass;
    }
  }
  return out;
}

std::string CompareWithBudget(const Tensor& d, int64_t d_offset, int64_t d_row,
                              const RefResult& ref, int64_t reduction_blocks,
                              const std::vector<double>& prior) {
  const double accum_rel = (reduction_blocks + 24) * std::ldexp(1.0, -24);
  const bool bf16 = d.dtype == DType::kBF16;
  double err2 = 0, ref2 = 0, worst_ratio = 0;
  std::string worst;
  for (int64_t i = 0; i < ref.m; ++i) {
    for (int64_t j = 0; j < ref.n; ++j) {
      const int64_t e = i * ref.n + j;
      const double before = prior.empty() ? 0.0 : prior[e];
      const double expect = before + ref.value[e];
      const double got = ReadOutput(d, d_offset + i * d_row + j);
      double bound = accum_rel * ref.mass[e];
      if (bf16) bound += std::ldexp(std::fabs(expect), -8);
      if (!prior.empty()) bound += std::ldexp(std::fabs(before) + std::fabs(expect), -23);
      const double err = std::fabs(got - expect);
      err2 += err * err;
      ref2 += expect * expect;
      const double ratio = bound > 0 ? err / bound : (err > 0 || std::isnan(got) ? INFINITY : 0);
      if (!(ratio <= 1.0) && !(worst_ratio > ratio)) {
        worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
        worst = absl::StrCat("element (", i, ", ", j, ") = ", got, ", reference ", expect,
                             ", error ", err, " over the bound ", bound);
      }
    }
  }
  const double budget = bf16 ? kNormBudgetBF16 : kNormBudgetF32;
  if (ref2 == 0) {
    if (err2 != 0 && worst.empty()) worst = "reference is all zero but the output is not";
  } else if (!(std::sqrt(err2 / ref2) <= budget)) {
    absl::StrAppend(&worst, worst.empty() ? "" : "; ", "norm-wise relative error ",
                    std::sqrt(err2 / ref2), " over the budget ", budget);
  }
  return worst;
}

absl::Status RunOnCpu(const GemmArgs& args) {
  absl::StatusOr<ValidatedOp> op = Validate(args);
  if (!op.ok()) return op.status();
  std::unique_ptr<Backend> cpu =
      CreateCpuBackend(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
  absl::Status supported = cpu->Supports(*op);
  if (!supported.ok()) return supported;
  auto stream = cpu->CreateStream(0);
  if (!stream.ok()) return stream.status();
  return cpu->Run(*op, **stream, nullptr);
}

}  // namespace gemm_test
}  // namespace kd
