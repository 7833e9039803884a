// Shared pieces of the GEMM tests: host tensors, input generators and a plain double-precision
// reference written independently of the kernels under test.
//
// Error budget (stated once, used by every variant's test). Each output element is checked
// against the double reference `ref` with
//     |out - ref| <= kAccumRel(R) * S + (bf16 output ? 2^-8 * |ref| : 0)
// where S = sum over the reduction of |a * b * a_scale * b_scale| (the size of the terms, which
// bounds what fp32 summation can lose) and kAccumRel(R) = (R/128 + 24) * 2^-24: a 128-element
// fp32 dot of 8 strided partial sums (16 + 3 additions deep), the scale products and one fp32
// addition per block. A bf16 output adds at most half an ulp, 2^-9 relative. On top of the
// per-element rule the norm-wise error ||out - ref|| / ||ref|| must stay under kNormBudgetF32 =
// 1e-5 (f32 output) or kNormBudgetBF16 = 4e-3 (bf16 output); an all-zero reference must be
// matched exactly.
#ifndef KERNELD_TESTS_KERNELS_GEMM_GEMM_TEST_UTIL_H_
#define KERNELD_TESTS_KERNELS_GEMM_GEMM_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kerneld/kernels/backend.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/kernels/tensor.h"

namespace kd {
namespace gemm_test {

constexpr double kNormBudgetF32 = 1e-5;
constexpr double kNormBudgetBF16 = 4e-3;

// A contiguous host tensor that owns its (8-byte aligned) storage.
struct HostTensor {
  HostTensor() = default;
  HostTensor(const HostTensor& o) : storage(o.storage), t(o.t) { t.data = storage.data(); }
  HostTensor& operator=(const HostTensor& o) {
    storage = o.storage;
    t = o.t;
    t.data = storage.data();
    return *this;
  }
  HostTensor(HostTensor&&) = default;
  HostTensor& operator=(HostTensor&&) = default;

  std::vector<uint64_t> storage;
  Tensor t;
  template <typename T>
  T* data() {
    return static_cast<T*>(t.data);
  }
  uint8_t* bytes() { return static_cast<uint8_t*>(t.data); }
};
HostTensor MakeHost(DType dtype, std::initializer_list<int64_t> shape);

// How FP8 operand codes are drawn.
enum class Pattern {
  kGaussian,         // N(0,1) * 64 encoded (saturating), a realistic quantized activation
  kAllCodes,         // uniform over every finite code: values from 2^-9 to 448, both signs
  kOutlierPerBlock,  // N(0,1) * 0.05 encoded, with one ±448 element in every 128-wide block
  kZeros,            // all zero codes
};
// Fills an e4m3fn FP8 tensor (any rank; blocks run along the last dimension).
void FillFp8(HostTensor& t, Pattern pattern, std::mt19937_64& rng);
// Fills an f32 scale tensor with values 2^magnitude * U[0.5, 2).
void FillScales(HostTensor& t, int magnitude, std::mt19937_64& rng);
// Fills f32/bf16 with N(0,1) values (the prior contents of d for accumulate tests).
void FillGaussian(HostTensor& t, std::mt19937_64& rng);

// Fills every byte with 0xFF (NaN in f32 and bf16), so an unwritten output element fails.
void Poison(HostTensor& t);
// Every element of an f32/bf16 tensor as double, in memory order.
std::vector<double> ReadAll(const HostTensor& t);
// A fresh seed per check (printed by the tests through SCOPED_TRACE to reproduce a failure).
uint64_t FreshSeed();

// Operand and option mix of one check.
struct Mix {
  const char* name;
  Pattern a, b;
  int scale_magnitude;  // scales are 2^magnitude * U[0.5, 2)
  DType out;
  bool accumulate;
};
// The mixes every variant runs: random inputs at three magnitudes, every finite code, one
// outlier per block, zeros, f32 output and accumulation.
std::vector<Mix> StandardMixes();
inline void PrintTo(const Mix& mix, std::ostream* os) { *os << mix.name; }

double DecodeE4M3(uint8_t code);
double ReadOutput(const Tensor& d, int64_t flat_index);

// Reference for one output element set: out(i, j) = sum over blocks kb of
// sum_{r in block} a(i, r) * b(j, r) * a_scale(i, kb) * b_scale(j, kb).
struct RefProblem {
  int64_t m = 0, n = 0;
  int64_t kb_begin = 0, kb_end = 0;  // in blocks of 128 along the reduction
  std::function<double(int64_t i, int64_t r)> a;
  std::function<double(int64_t j, int64_t r)> b;
  std::function<double(int64_t i, int64_t kb)> a_scale;
  std::function<double(int64_t j, int64_t kb)> b_scale;
};
struct RefResult {
  int64_t m = 0, n = 0;
  std::vector<double> value;  // (m, n) row-major
  std::vector<double> mass;   // S per element, see the header comment
};
RefResult Reference(const RefProblem& p);

// Compares `d` (flat offset `d_offset` elements, row stride `d_row`) with `ref`, plus `prior`
// (the contents of d before an accumulating run, or empty). Returns an empty string when within
// budget, else a description of the worst element and the norm-wise error.
std::string CompareWithBudget(const Tensor& d, int64_t d_offset, int64_t d_row,
                              const RefResult& ref, int64_t reduction_blocks,
                              const std::vector<double>& prior);

// Validates `args` and runs them on a fresh CPU backend.
absl::Status RunOnCpu(const GemmArgs& args);

}  // namespace gemm_test
}  // namespace kd

#endif  // KERNELD_TESTS_KERNELS_GEMM_GEMM_TEST_UTIL_H_
