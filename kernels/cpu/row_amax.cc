// The CPU row_amax kernel: the largest magnitude of each row, as the largest IEEE bit pattern of
// |x| (a NaN's exceeds every number's), so the answer is exact and the same whatever the order.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kerneld/kernels/fp8.h"
#include "kernels/cpu/cpu_kernels.h"

namespace kd {
namespace {

template <typename Load>
void RowMax(const RowAmaxArgs& a, ThreadPool& pool, Load load) {
  const int64_t rows = a.input.shape[0], cols = a.input.shape[1];
  float* out = a.output.as<float>();
  pool.ParallelFor(rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      uint32_t best = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const float v = load(r * a.input.strides[0] + c);
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof(bits));
        best = std::max(best, bits & 0x7fffffffu);
      }
      float amax;
      std::memcpy(&amax, &best, sizeof(amax));
      out[r * a.output.strides[0]] = amax;
    }
  });
}

}  // namespace

absl::Status RunCpu(const RowAmaxArgs& a, ThreadPool& pool) {
  switch (a.input.dtype) {
    case DType::kF32: {
      const float* in = a.input.as<const float>();
      RowMax(a, pool, [in](int64_t i) { return in[i]; });
      break;
    }
    case DType::kBF16: {
      const uint16_t* in = a.input.as<const uint16_t>();
      RowMax(a, pool, [in](int64_t i) { return fp8::BF16ToFloat(in[i]); });
      break;
    }
    default: {
      const uint16_t* in = a.input.as<const uint16_t>();
      RowMax(a, pool, [in](int64_t i) { return fp8::F16ToFloat(in[i]); });
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace kd
