// CPU reference blockwise FP8 GEMM. Per output element, per 128-wide K block: an fp32 dot
// product of the decoded FP8 values, multiplied by (a_scale * b_scale) and added to an fp32
// accumulator, as the GPU kernels "promote" each K block out of the tensor core.
#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/fp8.h"
#include "kernels/cpu/cpu_kernels.h"

namespace kd {
namespace {

using DecodeTable = std::array<float, 256>;

template <typename F>
DecodeTable MakeTable() {
  DecodeTable t;
  for (int c = 0; c < 256; ++c) t[c] = fp8::Decode<F>(static_cast<uint8_t>(c));
  return t;
}

const DecodeTable& TableFor(DType dtype) {
  static const DecodeTable kE4M3FN = MakeTable<fp8::E4M3FN>();
  static const DecodeTable kE4M3FNUZ = MakeTable<fp8::E4M3FNUZ>();
  static const DecodeTable kE5M2 = MakeTable<fp8::E5M2>();
  switch (dtype) {
    case DType::kE4M3FNUZ: return kE4M3FNUZ;
    case DType::kE5M2: return kE5M2;
    default: return kE4M3FN;
  }
}

// Decodes a (rows, k) FP8 matrix into a dense float matrix.
std::vector<float> Decode(const Tensor& t, ThreadPool& pool) {
  const int64_t rows = t.shape[0], k = t.shape[1];
  const DecodeTable& table = TableFor(t.dtype);
  std::vector<float> out(rows * k);
  const uint8_t* src = t.as<const uint8_t>();
  pool.ParallelFor(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* s = src + r * t.strides[0];
      float* d = &out[r * k];
      for (int64_t c = 0; c < k; ++c) d[c] = table[s[c]];
    }
  });
  return out;
}

// 128-element dot product with 8 independent partial sums (a fixed order, so the CPU result is
// reproducible, and one the compiler can vectorise).
inline float Dot128(const float* a, const float* b) {
  float acc[8] = {};
  for (int i = 0; i < 128; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

absl::Status CpuSupportsGemm(const GemmArgs& a) {
  if (a.variant == GemmVariant::kNT) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat("gemm variant ", GemmVariantName(a.variant),
                                               " is not implemented on the cpu backend"));
}

absl::Status GemmCpu(const GemmArgs& g, ThreadPool& pool, const CpuGemmConfig& config) {
  const int64_t m = g.a.shape[0], k = g.a.shape[1], n = g.b.shape[0];
  const int64_t kb = k / kQuantBlock;
  const std::vector<float> a = Decode(g.a, pool);
  const std::vector<float> b = Decode(g.b, pool);
  const float* sa = g.a_scales.as<const float>();
  const float* sb = g.b_scales.as<const float>();
  const int64_t sa_stride = g.a_scales.strides[0], sb_stride = g.b_scales.strides[0];
  const int64_t d_stride = g.d.strides[0];
  // Rows of A in parallel; within a row, N in tiles so a tile of B stays in cache.
  const int64_t tile_n = std::max<int64_t>(1, config.tile_n);
  pool.ParallelFor(m, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> acc(tile_n);
    for (int64_t n0 = 0; n0 < n; n0 += tile_n) {
      const int64_t n1 = std::min(n, n0 + tile_n);
      for (int64_t r = r0; r < r1; ++r) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        const float* arow = &a[r * k];
        for (int64_t blk = 0; blk < kb; ++blk) {
          const float a_scale = sa[r * sa_stride + blk];
          for (int64_t c = n0; c < n1; ++c) {
            const float partial = Dot128(arow + blk * kQuantBlock, &b[c * k + blk * kQuantBlock]);
            acc[c - n0] += partial * (a_scale * sb[(c / kQuantBlock) * sb_stride + blk]);
          }
        }
        if (g.d.dtype == DType::kF32) {
          float* d = g.d.as<float>() + r * d_stride;
          for (int64_t c = n0; c < n1; ++c) d[c] = g.accumulate ? d[c] + acc[c - n0] : acc[c - n0];
        } else {
          uint16_t* d = g.d.as<uint16_t>() + r * d_stride;
          for (int64_t c = n0; c < n1; ++c) d[c] = fp8::FloatToBF16(acc[c - n0]);
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace kd
