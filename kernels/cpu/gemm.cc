// CPU reference blockwise FP8 GEMM, every variant. Per output element, per 128-wide block of the
// reduction: an fp32 dot product of the decoded FP8 values, multiplied by (a_scale * b_scale) and
// added to an fp32 accumulator, as the GPU kernels "promote" each block out of the tensor core.
//
// Every variant is reduced to one "NT" core: rows of A and rows of B, both contiguous along the
// reduction, with the scales of block kb looked up per variant through the scale tensors' strides
// (so 1x128 scales may be row-major or K-block-major). NN decodes W transposed; TN and
// K-grouped TN are already stored that way; M-grouped runs the core once per group.
#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/status_macros.h"
#include "kerneld/kernels/tune_harness.h"
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
    case DType::kE4M3FNUZ:
      return kE4M3FNUZ;
    case DType::kE5M2:
      return kE5M2;
    default:
      return kE4M3FN;
  }
}

// Decodes `rows` x `cols` FP8 codes (row stride `stride`) into a dense float matrix. With
// `transpose`, the result is (cols, rows): what NN needs to make W contiguous along N.
std::vector<float> Decode(const uint8_t* src, int64_t rows, int64_t cols, int64_t stride,
                          DType dtype, bool transpose, ThreadPool& pool) {
  const DecodeTable& table = TableFor(dtype);
  std::vector<float> out(rows * cols);
  pool.ParallelFor(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* s = src + r * stride;
      if (transpose) {
        for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = table[s[c]];
      } else {
        float* d = &out[r * cols];
        for (int64_t c = 0; c < cols; ++c) d[c] = table[s[c]];
      }
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

// One NT problem: D[i][j] (+)= sum over blocks kb in [kb_begin, kb_end) of
// Dot128(A row i, B row j at block kb) * a_scale(i, kb) * b_scale(j, kb).
// `a`/`b` are decoded rows of length `ld` floats (the whole reduction); blocks index into them.
struct NtProblem {
  const float* a = nullptr;
  const float* b = nullptr;
  int64_t ld = 0;
  int64_t m = 0, n = 0;
  int64_t kb_begin = 0, kb_end = 0;
  // scale(i, kb) = a_scales[i * a_row + kb * a_col]; b likewise with j / b_group rows (the
  // 128x128 weight scales share one row per 128 rows of B; 1x128 scales have b_group = 1).
  const float* a_scales = nullptr;
  int64_t a_row = 0, a_col = 0;
  const float* b_scales = nullptr;
  int64_t b_row = 0, b_col = 0, b_group = 1;
  // Output: element (i, j) at d + i * d_row + j.
  void* d = nullptr;
  int64_t d_row = 0;
  DType d_dtype = DType::kF32;
  bool accumulate = false;
  int64_t tile_n = 64;  // columns of D per tile (CpuGemmConfig::tile_n)
};

void RunNt(const NtProblem& p, ThreadPool& pool) {
  // Rows of A in parallel; within a row, N in tiles so a tile of B stays in cache.
  const int64_t tile_n = std::max<int64_t>(1, p.tile_n);
  pool.ParallelFor(p.m, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> acc(tile_n);
    for (int64_t n0 = 0; n0 < p.n; n0 += tile_n) {
      const int64_t n1 = std::min(p.n, n0 + tile_n);
      for (int64_t r = r0; r < r1; ++r) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        const float* arow = p.a + r * p.ld;
        for (int64_t blk = p.kb_begin; blk < p.kb_end; ++blk) {
          const float a_scale = p.a_scales[r * p.a_row + blk * p.a_col];
          for (int64_t c = n0; c < n1; ++c) {
            const float partial =
                Dot128(arow + blk * kQuantBlock, p.b + c * p.ld + blk * kQuantBlock);
            const float b_scale = p.b_scales[(c / p.b_group) * p.b_row + blk * p.b_col];
            acc[c - n0] += partial * (a_scale * b_scale);
          }
        }
        if (p.d_dtype == DType::kF32) {
          float* d = static_cast<float*>(p.d) + r * p.d_row;
          for (int64_t c = n0; c < n1; ++c) d[c] = p.accumulate ? d[c] + acc[c - n0] : acc[c - n0];
        } else {
          uint16_t* d = static_cast<uint16_t*>(p.d) + r * p.d_row;
          for (int64_t c = n0; c < n1; ++c) d[c] = fp8::FloatToBF16(acc[c - n0]);
        }
      }
    }
  });
}

const uint8_t* Bytes(const Tensor& t) { return t.as<const uint8_t>(); }

// (i, kb) -> a_scales(i, kb) for a 1x128 scale tensor, row-major or K-block-major (strides
// (1, ld)): both are read through the view's strides.
void SetRowScalesA(NtProblem& p, const Tensor& s) {
  p.a_scales = s.as<const float>();
  p.a_row = s.strides[0];
  p.a_col = s.strides[1];
}

absl::Status GemmNt(const GemmArgs& g, ThreadPool& pool, int64_t b_group,
                    const CpuGemmConfig& config) {
  const int64_t m = g.a.shape[0], k = g.a.shape[1], n = g.b.shape[0];
  const std::vector<float> a = Decode(Bytes(g.a), m, k, g.a.strides[0], g.a.dtype, false, pool);
  const std::vector<float> b = Decode(Bytes(g.b), n, k, g.b.strides[0], g.b.dtype, false, pool);
  NtProblem p;
  p.a = a.data();
  p.b = b.data();
  p.ld = k;
  p.m = m;
  p.n = n;
  p.kb_end = k / kQuantBlock;
  SetRowScalesA(p, g.a_scales);
  p.b_scales = g.b_scales.as<const float>();
  p.b_row = g.b_scales.strides[0];
  p.b_col = g.b_scales.strides[1];  // TN's 1x128 b_scales may be K-block-major too
  p.b_group = b_group;
  p.d = g.d.data;
  p.d_row = g.d.strides[0];
  p.d_dtype = g.d.dtype;
  p.accumulate = g.accumulate;
  p.tile_n = config.tile_n;
  RunNt(p, pool);
  return absl::OkStatus();
}

// dgrad: D (M,K) = dY (M,N) · W (N,K), reduction over N. W is decoded transposed to (K,N); its
// 128x128 scales (N/128, ceil(K/128)) are read as b_scales[kb][j / 128].
absl::Status GemmNn(const GemmArgs& g, ThreadPool& pool, const CpuGemmConfig& config) {
  const int64_t m = g.a.shape[0], r = g.a.shape[1], n = g.b.shape[1];
  const std::vector<float> a = Decode(Bytes(g.a), m, r, g.a.strides[0], g.a.dtype, false, pool);
  const std::vector<float> bt = Decode(Bytes(g.b), r, n, g.b.strides[0], g.b.dtype, true, pool);
  NtProblem p;
  p.a = a.data();
  p.b = bt.data();
  p.ld = r;
  p.m = m;
  p.n = n;
  p.kb_end = r / kQuantBlock;
  SetRowScalesA(p, g.a_scales);
  p.b_scales = g.b_scales.as<const float>();
  p.b_row = 1;
  p.b_col = g.b_scales.strides[0];
  p.b_group = kQuantBlock;
  p.d = g.d.data;
  p.d_row = g.d.strides[0];
  p.d_dtype = g.d.dtype;
  p.accumulate = g.accumulate;
  p.tile_n = config.tile_n;
  RunNt(p, pool);
  return absl::OkStatus();
}

// MoE forward: rows [ends[e-1], ends[e]) of A times B[e]ᵀ.
absl::Status GemmMGroupedNt(const GemmArgs& g, ThreadPool& pool, const CpuGemmConfig& config) {
  const int64_t total = g.a.shape[0], k = g.a.shape[1];
  const int64_t experts = g.b.shape[0], n = g.b.shape[1];
  const std::vector<int64_t> ends = ReadGroupEnds(g.group_ends);
  KD_RETURN_IF_ERROR(CheckGroupEnds(ends.data(), experts, total, "group_ends"));
  const std::vector<float> a = Decode(Bytes(g.a), total, k, g.a.strides[0], g.a.dtype, false, pool);
  int64_t begin = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t rows = ends[e] - begin;
    if (rows > 0) {
      const std::vector<float> b =
          Decode(Bytes(g.b) + e * g.b.strides[0], n, k, g.b.strides[1], g.b.dtype, false, pool);
      NtProblem p;
      p.a = a.data() + begin * k;
      p.b = b.data();
      p.ld = k;
      p.m = rows;
      p.n = n;
      p.kb_end = k / kQuantBlock;
      SetRowScalesA(p, g.a_scales);
      p.a_scales += begin * g.a_scales.strides[0];
      p.b_scales = g.b_scales.as<const float>() + e * g.b_scales.strides[0];
      p.b_row = g.b_scales.strides[1];
      p.b_col = 1;
      p.b_group = kQuantBlock;
      const int64_t dsize = DTypeSize(g.d.dtype);
      p.d = static_cast<char*>(g.d.data) + begin * g.d.strides[0] * dsize;
      p.d_row = g.d.strides[0];
      p.d_dtype = g.d.dtype;
      p.accumulate = g.accumulate;
      p.tile_n = config.tile_n;
      RunNt(p, pool);
    }
    begin = ends[e];
  }
  return absl::OkStatus();
}

// MoE wgrad: D[e] (N,K) = A[:, group e] · B[:, group e]ᵀ, both 1x128-scaled along the tokens.
// Group ends must fall on 128-token blocks so that no scale block spans two experts. An empty
// group gives D[e] = 0 (or leaves it unchanged when accumulating).
absl::Status GemmKGroupedTn(const GemmArgs& g, ThreadPool& pool, const CpuGemmConfig& config) {
  const int64_t n = g.a.shape[0], total = g.a.shape[1], k = g.b.shape[0];
  const int64_t experts = g.d.shape[0];
  const std::vector<int64_t> ends = ReadGroupEnds(g.group_ends);
  KD_RETURN_IF_ERROR(CheckGroupEnds(ends.data(), experts, total, "group_ends"));
  for (int64_t e = 0; e < experts; ++e) {
    if (ends[e] % kQuantBlock != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group_ends[", e, "]=", ends[e], " is not a multiple of block ", kQuantBlock,
          "; the k-grouped wgrad needs every group to start and end on a scale block"));
    }
  }
  const std::vector<float> a = Decode(Bytes(g.a), n, total, g.a.strides[0], g.a.dtype, false, pool);
  const std::vector<float> b = Decode(Bytes(g.b), k, total, g.b.strides[0], g.b.dtype, false, pool);
  const int64_t dsize = DTypeSize(g.d.dtype);
  int64_t begin = 0;
  for (int64_t e = 0; e < experts; ++e) {
    NtProblem p;
    p.a = a.data();
    p.b = b.data();
    p.ld = total;
    p.m = n;
    p.n = k;
    p.kb_begin = begin / kQuantBlock;
    p.kb_end = ends[e] / kQuantBlock;
    SetRowScalesA(p, g.a_scales);
    p.b_scales = g.b_scales.as<const float>();
    p.b_row = g.b_scales.strides[0];
    p.b_col = g.b_scales.strides[1];
    p.b_group = 1;
    p.d = static_cast<char*>(g.d.data) + e * g.d.strides[0] * dsize;
    p.d_row = g.d.strides[1];
    p.d_dtype = g.d.dtype;
    p.accumulate = g.accumulate;
    p.tile_n = config.tile_n;
    RunNt(p, pool);
    begin = ends[e];
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GemmCpu(const GemmArgs& g, ThreadPool& pool, const CpuGemmConfig& config) {
  switch (g.variant) {
    case GemmVariant::kNT:
      return GemmNt(g, pool, kQuantBlock, config);
    case GemmVariant::kNN:
      return GemmNn(g, pool, config);
    case GemmVariant::kTN:
      return GemmNt(g, pool, 1, config);
    case GemmVariant::kMGroupedNT:
      return GemmMGroupedNt(g, pool, config);
    case GemmVariant::kKGroupedTN:
      return GemmKGroupedTn(g, pool, config);
    default:
      break;
  }
  // Unreachable: Validate admits only the variants above.
  return absl::InternalError(
      absl::StrCat("gemm: variant=", static_cast<int>(g.variant), " was not validated"));
}

absl::Status RunCpu(const GemmArgs& g, ThreadPool& pool) {
  // Another kernel's config, or none, runs the default.
  const CpuGemmConfig* config = std::get_if<CpuGemmConfig>(&g.config);
  return GemmCpu(g, pool, config != nullptr ? *config : CpuGemmConfig());
}

namespace {

absl::Status CpuConfigOutOfRange(absl::string_view config, absl::string_view field, int64_t v,
                                 absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("config \"", config, "\" ", field, "=", v, " must be ", rule));
}

}  // namespace

absl::StatusOr<int64_t> ParseCpuGemmConfig(absl::string_view config) {
  auto v = ParseConfigFieldValues(config, {"tn"});
  if (!v.ok()) return v.status();
  const int64_t tn = (*v)[0];
  if (tn != 16 && tn != 32 && tn != 64 && tn != 128 && tn != 256) {
    return CpuConfigOutOfRange(config, "tn", tn, "16, 32, 64, 128 or 256");
  }
  return tn;
}

std::string FormatCpuGemmConfig(int64_t tile_n) { return absl::StrCat("tn", tile_n); }

}  // namespace kd
