// CPU reference quantizer: every QuantizeOp recipe, bit-exact with the definitions below, which
// restate the contract in proto/kerneld/v1/kerneld.proto (QuantizeOp, QuantGranularity) for whoever
// ports them to another backend.
//
// Orientation. A granularity is defined on Y (R,C): Y = X (M,K), or Y = Xᵀ (K,M) when
// transpose_output is set. `output` is Y, row-major. Blocks (elements sharing one scale) of Y:
//   1x128, jagged_rowwise   1x128 along C          scales (R, C/128) or K-block-major (C/128, R)
//   128x1                   128x1 along R (last partial)          scales (ceil(R/128), C)
//   128x128                 128x128 (last row block partial)      scales (ceil(R/128), C/128)
//   per_row                 a whole row of Y                      scales (R, 1)
//   per_tensor              all of Y                              scales (1)
//   jagged_colwise          Y = Xᵀ; row k of Y split at the group ends      scales (G, K)
//   mx1x32                  1x32 along C                          e8m0 scales (R, C/32)
//   dual pass               1x128 (or 128x128) of X into output/scales and of Xᵀ into
//                           output_t/scales_t
//
// Recipe per block, all but mx1x32 (fp32 throughout, IEEE round-to-nearest-even):
//   amax   = max |y|                         NaN when any element is NaN
//   scale  = FP8_MAX / max(amax, eps)        one fp32 division (eps is the fp32 value)
//   scale  = bits(scale) & 0xff800000        SCALE_POW2 only (round down to a power of two)
//   code   = fp8(y * scale)                  saturating to ±FP8_MAX, round to nearest even,
//                                            NaN to the positive NaN code
//   stored = 1 / scale                       fp32 division; NaN stored as 0x7fc00000
// mx1x32 (torchao's to_mx), E(v)/M(v) = exponent/mantissa fields of the fp32 v:
//   amax   = max |y| over 32 elements
//   FLOOR  S = max(E(amax) - emax, 0)        emax = 8 (e4m3fn), 15 (e5m2)
//   RCEIL  d = amax * fp32(1/FP8_MAX);  S = E(d) + (M(d) != 0) if E(d) > 0 else (M(d) > 2^22)
//   S = 0xff when amax is Inf or NaN
//   code   = fp8(y * 2^(127-S))              2^(127-S) exact (S=254: the subnormal 2^-127);
//                                            S=0xff multiplies by NaN
//
// Layout of the work. Row-local recipes on Y = X (1x128, jagged_rowwise, mx1x32, per_row) run one
// row at a time: convert the row to fp32, then per block amax, scale and encode, all in loops the
// compiler vectorises (kernels/cpu/quantize_encode.h), compiled for AVX-512, AVX2 and the baseline
// and chosen once per op. The others work on 128x128 tiles of Y (a tile of X, transposed when Y is
// Xᵀ), one band of 128 rows of Y per task; the dual pass loads each X tile once and writes both
// results from it. per_row on Xᵀ, per_tensor and jagged_colwise need an amax over many tiles and
// run two passes: amax per block, then encode.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/quantize_encode.h"

namespace kd {
namespace {

using cpu_quant::BF16ToFloatLane;
using cpu_quant::EncodeLane;
using cpu_quant::F16ToFloatLane;

constexpr int64_t kTile = kQuantBlock;  // 128: tile edge of the tiled paths
constexpr uint32_t kCanonicalNanBits = 0x7FC00000u;

// ---------------------------------------------------------------------------------------------
// Inner loops. Always inlined so that each ISA entry point below compiles them for its ISA.

// n input elements of `dtype` at `src` to fp32.
KD_ALWAYS_INLINE void LoadSpan(DType dtype, const void* src, int64_t n, float* __restrict dst) {
  switch (dtype) {
    case DType::kBF16: {
      const uint16_t* __restrict p = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToFloatLane(p[i]);
      break;
    }
    case DType::kF16: {
      const uint16_t* __restrict p = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToFloatLane(p[i]);
      break;
    }
    default:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
  }
}

// max over the bit patterns of |x|: a NaN pattern (> 0x7f800000) when any element is NaN, else
// the bits of the largest |x|, since non-negative floats order like their bit patterns.
KD_ALWAYS_INLINE uint32_t AbsMaxBits(const float* __restrict x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = fp8::FloatBits(x[i]) & 0x7FFFFFFFu;
    m = b > m ? b : m;
  }
  return m;
}

KD_ALWAYS_INLINE float AmaxFromBits(uint32_t bits) {
  return fp8::BitsToFloat(bits > 0x7F800000u ? kCanonicalNanBits : bits);
}

template <typename F>
KD_ALWAYS_INLINE void EncodeSpan(const float* __restrict x, float scale, int64_t n,
                                 uint8_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = EncodeLane<F>(x[i] * scale);
}

template <typename F>
KD_ALWAYS_INLINE void EncodeSpanPerColumn(const float* __restrict x, const float* __restrict scale,
                                          int64_t n, uint8_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = EncodeLane<F>(x[i] * scale[i]);
}

// ---------------------------------------------------------------------------------------------
// Scales.

struct ScaleRecipe {
  float fp8_max;
  float eps;
  bool pow2;
};

inline float QuantScale(float amax, const ScaleRecipe& r) {
  const float clamped = amax != amax ? amax : std::max(amax, r.eps);
  const float scale = r.fp8_max / clamped;
  return r.pow2 ? fp8::RoundDownPow2(scale) : scale;
}

inline float StoredScale(float scale) {
  const float stored = 1.0f / scale;
  return stored != stored ? fp8::BitsToFloat(kCanonicalNanBits) : stored;
}

struct MxRecipe {
  uint32_t emax;  // floor(log2(FP8_MAX))
  float inv_max;  // fp32(1 / FP8_MAX)
  bool rceil;
};

inline uint8_t MxScaleCode(float amax, const MxRecipe& r) {
  const uint32_t bits = fp8::FloatBits(amax);
  if ((bits & 0x7F800000u) == 0x7F800000u) return 0xFF;  // Inf or NaN
  if (!r.rceil) {
    const uint32_t e = bits >> 23;
    return static_cast<uint8_t>(e > r.emax ? e - r.emax : 0);
  }
  const uint32_t d = fp8::FloatBits(amax * r.inv_max);
  const uint32_t e = d >> 23, man = d & 0x7FFFFFu;
  return static_cast<uint8_t>(e + (e == 0 ? (man > 0x400000u) : (man != 0)));
}

// 2^(127 - s) exactly; NaN for s = 0xff.
inline float MxMultiplier(uint8_t s) {
  if (s == 0xFF) return fp8::BitsToFloat(kCanonicalNanBits);
  const uint32_t e = 254u - s;  // biased exponent of 2^(127-s)
  return fp8::BitsToFloat(e == 0 ? 0x00400000u : e << 23);
}

// ---------------------------------------------------------------------------------------------
// One op, resolved.

struct Job {
  const QuantizeArgs* a;
  int64_t rows, cols;  // of Y
  bool transposed;
  ScaleRecipe recipe;
  MxRecipe mx;
  // jagged_colwise: where each group starts and ends, in rows of X (columns of Y).
  std::vector<int64_t> group_begin, group_end;
};

const void* InputAt(const Tensor& in, int64_t row, int64_t col) {
  return static_cast<const char*>(in.data) +
         (row * in.strides[0] + col) * static_cast<int64_t>(DTypeSize(in.dtype));
}

uint8_t* OutRow(const Tensor& out, int64_t row) { return out.as<uint8_t>() + row * out.strides[0]; }

// Writes a 1x128 scale of (row, block) in `layout`.
void Store1x128Scale(const Tensor& scales, ScaleLayout layout, int64_t row, int64_t block,
                     float value) {
  const int64_t at = layout == ScaleLayout::kKBlockMajor ? block * scales.strides[0] + row
                                                         : row * scales.strides[0] + block;
  scales.as<float>()[at] = value;
}

// Y rows [yr0, yr0+th) x columns [yc0, yc0+tw) as fp32 into `tile` (row stride kTile).
KD_ALWAYS_INLINE void LoadYTile(const Job& j, int64_t yr0, int64_t th, int64_t yc0, int64_t tw,
                                float* __restrict tile, float* __restrict scratch) {
  const Tensor& in = j.a->input;
  if (!j.transposed) {
    for (int64_t i = 0; i < th; ++i)
      LoadSpan(in.dtype, InputAt(in, yr0 + i, yc0), tw, tile + i * kTile);
    return;
  }
  // Y[yr0+i][yc0+c] = X[yc0+c][yr0+i]: read tw rows of X, then transpose.
  for (int64_t c = 0; c < tw; ++c)
    LoadSpan(in.dtype, InputAt(in, yc0 + c, yr0), th, scratch + c * kTile);
  for (int64_t i = 0; i < th; ++i) {
    for (int64_t c = 0; c < tw; ++c) tile[i * kTile + c] = scratch[c * kTile + i];
  }
}

// 1x128 of one Y row segment of 128 elements at `y`.
template <typename F>
KD_ALWAYS_INLINE void Quantize1x128Segment(const Job& j, const Tensor& scales, const float* y,
                                           int64_t row, int64_t block, uint8_t* out) {
  const float scale = QuantScale(AmaxFromBits(AbsMaxBits(y, kQuantBlock)), j.recipe);
  EncodeSpan<F>(y, scale, kQuantBlock, out);
  Store1x128Scale(scales, j.a->scale_layout, row, block, StoredScale(scale));
}

template <typename F>
KD_ALWAYS_INLINE void QuantizeMxSegment(const Job& j, const float* y, int64_t row, int64_t block,
                                        uint8_t* out) {
  const uint8_t s = MxScaleCode(AmaxFromBits(AbsMaxBits(y, kMxBlock)), j.mx);
  EncodeSpan<F>(y, MxMultiplier(s), kMxBlock, out);
  const Tensor& scales = j.a->scales;
  scales.as<uint8_t>()[row * scales.strides[0] + block] = s;
}

// ---------------------------------------------------------------------------------------------
// Engines. Each processes work items [b0, b1) (rows or bands) of a validated op.

// Row-local recipes on Y = X: 1x128, jagged_rowwise, mx1x32, per_row. Items are rows.
template <typename F>
KD_ALWAYS_INLINE void RowLocalEngine(const Job& j, int64_t r0, int64_t r1) {
  const QuantizeArgs& a = *j.a;
  const int64_t c = j.cols;
  std::vector<float> row(c);
  float* __restrict y = row.data();
  for (int64_t r = r0; r < r1; ++r) {
    LoadSpan(a.input.dtype, InputAt(a.input, r, 0), c, y);
    uint8_t* out = OutRow(a.output, r);
    switch (a.granularity) {
      case QuantGranularity::kMx1x32:
        for (int64_t b = 0; b < c / kMxBlock; ++b) {
          QuantizeMxSegment<F>(j, y + b * kMxBlock, r, b, out + b * kMxBlock);
        }
        break;
      case QuantGranularity::kPerRow: {
        const float scale = QuantScale(AmaxFromBits(AbsMaxBits(y, c)), j.recipe);
        EncodeSpan<F>(y, scale, c, out);
        a.scales.as<float>()[r * a.scales.strides[0]] = StoredScale(scale);
        break;
      }
      default:  // 1x128, jagged_rowwise
        for (int64_t b = 0; b < c / kQuantBlock; ++b) {
          Quantize1x128Segment<F>(j, a.scales, y + b * kQuantBlock, r, b, out + b * kQuantBlock);
        }
        break;
    }
  }
}

// Tiled recipes: 1x128 and mx1x32 on Xᵀ, 128x1 and 128x128 on X or Xᵀ, and the 128x128 dual
// pass (each tile encoded once as read and once transposed). Items are bands of 128 rows of Y.
template <typename F>
KD_ALWAYS_INLINE void TileEngine(const Job& j, int64_t b0, int64_t b1) {
  const QuantizeArgs& a = *j.a;
  std::vector<float> tile_buf(kTile * kTile), scratch_buf(kTile * kTile), col_scale(kTile);
  std::vector<uint32_t> col_amax(kTile);
  float* __restrict tile = tile_buf.data();
  for (int64_t band = b0; band < b1; ++band) {
    const int64_t yr0 = band * kTile, th = std::min(kTile, j.rows - yr0);
    for (int64_t yc0 = 0; yc0 < j.cols; yc0 += kTile) {
      const int64_t tw = std::min(kTile, j.cols - yc0);
      LoadYTile(j, yr0, th, yc0, tw, tile, scratch_buf.data());
      switch (a.granularity) {
        case QuantGranularity::k1x128:  // tw == 128: C is a multiple of 128
          for (int64_t i = 0; i < th; ++i) {
            Quantize1x128Segment<F>(j, a.scales, tile + i * kTile, yr0 + i, yc0 / kQuantBlock,
                                    OutRow(a.output, yr0 + i) + yc0);
          }
          break;
        case QuantGranularity::kMx1x32:
          for (int64_t i = 0; i < th; ++i) {
            for (int64_t s = 0; s < tw / kMxBlock; ++s) {
              QuantizeMxSegment<F>(j, tile + i * kTile + s * kMxBlock, yr0 + i, yc0 / kMxBlock + s,
                                   OutRow(a.output, yr0 + i) + yc0 + s * kMxBlock);
            }
          }
          break;
        case QuantGranularity::k128x1: {
          uint32_t* __restrict cm = col_amax.data();
          std::fill(col_amax.begin(), col_amax.end(), 0u);
          for (int64_t i = 0; i < th; ++i) {
            const float* __restrict t = tile + i * kTile;
            for (int64_t c = 0; c < tw; ++c) {
              const uint32_t bits = fp8::FloatBits(t[c]) & 0x7FFFFFFFu;
              cm[c] = bits > cm[c] ? bits : cm[c];
            }
          }
          float* stored = a.scales.as<float>() + band * a.scales.strides[0] + yc0;
          for (int64_t c = 0; c < tw; ++c) {
            col_scale[c] = QuantScale(AmaxFromBits(cm[c]), j.recipe);
            stored[c] = StoredScale(col_scale[c]);
          }
          for (int64_t i = 0; i < th; ++i) {
            EncodeSpanPerColumn<F>(tile + i * kTile, col_scale.data(), tw,
                                   OutRow(a.output, yr0 + i) + yc0);
          }
          break;
        }
        default: {  // 128x128; tw == 128
          uint32_t m = 0;
          for (int64_t i = 0; i < th; ++i) m = std::max(m, AbsMaxBits(tile + i * kTile, tw));
          const float scale = QuantScale(AmaxFromBits(m), j.recipe);
          for (int64_t i = 0; i < th; ++i) {
            EncodeSpan<F>(tile + i * kTile, scale, tw, OutRow(a.output, yr0 + i) + yc0);
          }
          const float stored = StoredScale(scale);
          a.scales.as<float>()[band * a.scales.strides[0] + yc0 / kQuantBlock] = stored;
          if (a.output_t.present()) {
            // The dual pass (Y = X, th == 128): the transposed tile, with the same scale, is
            // Xᵀ's tile (band of X's columns yc0, columns m0 = yr0).
            float* __restrict tile_t = scratch_buf.data();
            for (int64_t i = 0; i < kTile; ++i) {
              for (int64_t c = 0; c < kTile; ++c) tile_t[c * kTile + i] = tile[i * kTile + c];
            }
            for (int64_t c = 0; c < kTile; ++c) {
              EncodeSpan<F>(tile_t + c * kTile, scale, kTile, OutRow(a.output_t, yc0 + c) + yr0);
            }
            a.scales_t.as<float>()[(yc0 / kQuantBlock) * a.scales_t.strides[0] + band] = stored;
          }
          break;
        }
      }
    }
  }
}

// The fused dual pass: each 128x128 tile of X is read once and gives its 1x128 rows to
// output/scales and, transposed, its 1x128 columns to output_t/scales_t. Items are bands of 128
// rows of X (M and K are multiples of 128).
template <typename F>
KD_ALWAYS_INLINE void DualEngine(const Job& j, int64_t b0, int64_t b1) {
  const QuantizeArgs& a = *j.a;
  std::vector<float> tile_buf(kTile * kTile), tile_t_buf(kTile * kTile);
  float* __restrict tile = tile_buf.data();
  float* __restrict tile_t = tile_t_buf.data();
  for (int64_t band = b0; band < b1; ++band) {
    const int64_t m0 = band * kTile;
    for (int64_t k0 = 0; k0 < j.cols; k0 += kTile) {
      for (int64_t i = 0; i < kTile; ++i) {
        LoadSpan(a.input.dtype, InputAt(a.input, m0 + i, k0), kTile, tile + i * kTile);
      }
      for (int64_t i = 0; i < kTile; ++i) {
        Quantize1x128Segment<F>(j, a.scales, tile + i * kTile, m0 + i, k0 / kQuantBlock,
                                OutRow(a.output, m0 + i) + k0);
      }
      for (int64_t i = 0; i < kTile; ++i) {
        for (int64_t c = 0; c < kTile; ++c) tile_t[c * kTile + i] = tile[i * kTile + c];
      }
      for (int64_t c = 0; c < kTile; ++c) {
        Quantize1x128Segment<F>(j, a.scales_t, tile_t + c * kTile, k0 + c, band,
                                OutRow(a.output_t, k0 + c) + m0);
      }
    }
  }
}

// Segments of one row of Y that share a scale, for the two-pass recipes: calls
// fn(cell, begin, end) for each non-empty intersection of a cell with columns [c0, c1) of Y row
// `row`. per_row: one cell per row; per_tensor: cell 0; jagged_colwise: cell g*R + row.
template <typename Fn>
KD_ALWAYS_INLINE void ForEachSegment(const Job& j, int64_t row, int64_t c0, int64_t c1, Fn&& fn) {
  switch (j.a->granularity) {
    case QuantGranularity::kPerRow:
      fn(row, c0, c1);
      break;
    case QuantGranularity::kPerTensor:
      fn(0, c0, c1);
      break;
    default: {  // jagged_colwise
      const int64_t groups = static_cast<int64_t>(j.group_end.size());
      int64_t g =
          std::upper_bound(j.group_end.begin(), j.group_end.end(), c0) - j.group_end.begin();
      for (; g < groups && j.group_begin[g] < c1; ++g) {
        const int64_t begin = std::max(c0, j.group_begin[g]), end = std::min(c1, j.group_end[g]);
        if (begin < end) fn(g * j.rows + row, begin, end);
      }
      break;
    }
  }
}

// Two-pass pass 1: amax bits per cell. Items are bands of 128 rows of Y; a band writes only cells
// of its own rows, except per_tensor, whose cell 0 is written per band into band_amax.
template <typename F>
KD_ALWAYS_INLINE void AmaxEngine(const Job& j, int64_t b0, int64_t b1, uint32_t* cell_amax,
                                 uint32_t* band_amax) {
  std::vector<float> tile_buf(kTile * kTile), scratch_buf(kTile * kTile);
  float* tile = tile_buf.data();
  const bool per_tensor = j.a->granularity == QuantGranularity::kPerTensor;
  for (int64_t band = b0; band < b1; ++band) {
    const int64_t yr0 = band * kTile, th = std::min(kTile, j.rows - yr0);
    uint32_t band_max = 0;
    for (int64_t yc0 = 0; yc0 < j.cols; yc0 += kTile) {
      const int64_t tw = std::min(kTile, j.cols - yc0);
      LoadYTile(j, yr0, th, yc0, tw, tile, scratch_buf.data());
      for (int64_t i = 0; i < th; ++i) {
        const float* y = tile + i * kTile;
        if (per_tensor) {
          band_max = std::max(band_max, AbsMaxBits(y, tw));
          continue;
        }
        ForEachSegment(j, yr0 + i, yc0, yc0 + tw, [&](int64_t cell, int64_t begin, int64_t end) {
          cell_amax[cell] = std::max(cell_amax[cell], AbsMaxBits(y + (begin - yc0), end - begin));
        });
      }
    }
    if (per_tensor) band_amax[band] = band_max;
  }
}

// Two-pass pass 2: encode with the scale of each element's cell.
template <typename F>
KD_ALWAYS_INLINE void EncodeEngine(const Job& j, int64_t b0, int64_t b1, const float* cell_scale) {
  const QuantizeArgs& a = *j.a;
  std::vector<float> tile_buf(kTile * kTile), scratch_buf(kTile * kTile);
  float* tile = tile_buf.data();
  for (int64_t band = b0; band < b1; ++band) {
    const int64_t yr0 = band * kTile, th = std::min(kTile, j.rows - yr0);
    for (int64_t yc0 = 0; yc0 < j.cols; yc0 += kTile) {
      const int64_t tw = std::min(kTile, j.cols - yc0);
      LoadYTile(j, yr0, th, yc0, tw, tile, scratch_buf.data());
      for (int64_t i = 0; i < th; ++i) {
        const float* y = tile + i * kTile;
        uint8_t* out = OutRow(a.output, yr0 + i);
        ForEachSegment(j, yr0 + i, yc0, yc0 + tw, [&](int64_t cell, int64_t begin, int64_t end) {
          EncodeSpan<F>(y + (begin - yc0), cell_scale[cell], end - begin, out + begin);
        });
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ISA entry points. The engines are compiled three times (AVX-512, AVX2, baseline x86-64); the
// op picks one per run from what the CPU supports. The arithmetic is IEEE fp32 in all three
// (no FMA contraction: -ffp-contract=off is the ISO C++ default), so the results are identical.

enum class Isa { kBase, kAvx2, kAvx512 };

// The best ISA the CPU has, or a lower one named by KD_CPU_QUANT_ISA ("avx2", "base"), which
// lets the tests run every build of the engines on one machine.
Isa DetectIsa() {
  __builtin_cpu_init();
  Isa isa = Isa::kBase;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    isa = Isa::kAvx512;
  } else if (__builtin_cpu_supports("avx2")) {
    isa = Isa::kAvx2;
  }
  const char* forced = std::getenv("KD_CPU_QUANT_ISA");
  if (forced != nullptr && std::strcmp(forced, "avx2") == 0) return std::min(isa, Isa::kAvx2);
  if (forced != nullptr && std::strcmp(forced, "base") == 0) return Isa::kBase;
  return isa;
}

#define KD_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define KD_AVX2 __attribute__((target("avx2")))

#define KD_ISA_ENTRIES(Engine, Params, Args)                                                \
  template <typename F>                                                                     \
  KD_AVX512 void Engine##Avx512 Params {                                                    \
    Engine<F> Args;                                                                         \
  }                                                                                         \
  template <typename F>                                                                     \
  KD_AVX2 void Engine##Avx2 Params {                                                        \
    Engine<F> Args;                                                                         \
  }                                                                                         \
  template <typename F>                                                                     \
  void Engine##Base Params {                                                                \
    Engine<F> Args;                                                                         \
  }                                                                                         \
  template <typename F>                                                                     \
  auto Pick##Engine(Isa isa) {                                                              \
    return isa == Isa::kAvx512 ? &Engine##Avx512<F>                                         \
                               : (isa == Isa::kAvx2 ? &Engine##Avx2<F> : &Engine##Base<F>); \
  }

KD_ISA_ENTRIES(RowLocalEngine, (const Job& j, int64_t b0, int64_t b1), (j, b0, b1))
KD_ISA_ENTRIES(TileEngine, (const Job& j, int64_t b0, int64_t b1), (j, b0, b1))
KD_ISA_ENTRIES(DualEngine, (const Job& j, int64_t b0, int64_t b1), (j, b0, b1))
KD_ISA_ENTRIES(AmaxEngine,
               (const Job& j, int64_t b0, int64_t b1, uint32_t* cell_amax, uint32_t* band_amax),
               (j, b0, b1, cell_amax, band_amax))
KD_ISA_ENTRIES(EncodeEngine, (const Job& j, int64_t b0, int64_t b1, const float* cell_scale),
               (j, b0, b1, cell_scale))

// ---------------------------------------------------------------------------------------------

template <typename F>
absl::Status RunTwoPass(const Job& j, ThreadPool& pool, Isa isa) {
  const QuantizeArgs& a = *j.a;
  const int64_t bands = (j.rows + kTile - 1) / kTile;
  int64_t cells = 1;
  if (a.granularity == QuantGranularity::kPerRow) cells = j.rows;
  if (a.granularity == QuantGranularity::kJaggedColwise) {
    cells = static_cast<int64_t>(j.group_end.size()) * j.rows;
  }
  std::vector<uint32_t> cell_amax(cells, 0u), band_amax(bands, 0u);
  auto amax_fn = PickAmaxEngine<F>(isa);
  pool.ParallelFor(bands, 1, [&](int64_t b0, int64_t b1) {
    amax_fn(j, b0, b1, cell_amax.data(), band_amax.data());
  });
  if (a.granularity == QuantGranularity::kPerTensor) {
    for (uint32_t m : band_amax) cell_amax[0] = std::max(cell_amax[0], m);
  }
  std::vector<float> cell_scale(cells);
  float* stored = a.scales.as<float>();
  for (int64_t cell = 0; cell < cells; ++cell) {
    cell_scale[cell] = QuantScale(AmaxFromBits(cell_amax[cell]), j.recipe);
    const float s = StoredScale(cell_scale[cell]);
    switch (a.granularity) {
      case QuantGranularity::kPerRow:
        stored[cell * a.scales.strides[0]] = s;
        break;
      case QuantGranularity::kPerTensor:
        stored[0] = s;
        break;
      default:  // jagged_colwise: cell g*K + k -> scales[g][k]
        stored[(cell / j.rows) * a.scales.strides[0] + cell % j.rows] = s;
        break;
    }
  }
  auto encode_fn = PickEncodeEngine<F>(isa);
  pool.ParallelFor(bands, 1,
                   [&](int64_t b0, int64_t b1) { encode_fn(j, b0, b1, cell_scale.data()); });
  return absl::OkStatus();
}

template <typename F>
absl::Status QuantizeAs(const QuantizeArgs& a, ThreadPool& pool) {
  static const Isa isa = DetectIsa();
  Job j;
  j.a = &a;
  j.transposed = a.transpose_output;
  j.rows = a.transpose_output ? a.input.shape[1] : a.input.shape[0];
  j.cols = a.transpose_output ? a.input.shape[0] : a.input.shape[1];
  j.recipe = {F::kMax, a.eps, a.scale_format == ScaleFormat::kPow2};
  j.mx = {static_cast<uint32_t>((F::kMaxCode >> F::kManBits) - F::kBias), 1.0f / F::kMax,
          a.mx_rounding == MxRounding::kRceil};
  const int64_t bands = (j.rows + kTile - 1) / kTile;
  auto tiles = [&] {
    auto fn = PickTileEngine<F>(isa);
    pool.ParallelFor(bands, 1, [&](int64_t b0, int64_t b1) { fn(j, b0, b1); });
  };
  auto row_local = [&] {
    auto fn = PickRowLocalEngine<F>(isa);
    pool.ParallelFor(j.rows, 8, [&](int64_t r0, int64_t r1) { fn(j, r0, r1); });
  };

  if (a.granularity == QuantGranularity::kJaggedRowwise ||
      a.granularity == QuantGranularity::kJaggedColwise) {
    // Copied out of client memory before the check, so that a client rewriting them mid-op
    // cannot defeat it.
    j.group_end = ReadGroupEnds(a.group_ends);
    KD_RETURN_IF_ERROR(CheckGroupEnds(j.group_end.data(), static_cast<int64_t>(j.group_end.size()),
                                      a.input.shape[0], "group_ends"));
    j.group_begin.resize(j.group_end.size());
    for (size_t g = 0; g < j.group_end.size(); ++g) j.group_begin[g] = g ? j.group_end[g - 1] : 0;
  }
  switch (a.granularity) {
    case QuantGranularity::k1x128:
      if (a.output_t.present()) {
        auto fn = PickDualEngine<F>(isa);
        pool.ParallelFor(bands, 1, [&](int64_t b0, int64_t b1) { fn(j, b0, b1); });
      } else if (j.transposed) {
        tiles();
      } else {
        row_local();
      }
      return absl::OkStatus();
    case QuantGranularity::kJaggedRowwise:
      row_local();
      return absl::OkStatus();
    case QuantGranularity::kMx1x32:
      if (j.transposed)
        tiles();
      else
        row_local();
      return absl::OkStatus();
    case QuantGranularity::kPerRow:
      if (j.transposed) return RunTwoPass<F>(j, pool, isa);
      row_local();
      return absl::OkStatus();
    case QuantGranularity::k128x1:
    case QuantGranularity::k128x128:
      tiles();
      return absl::OkStatus();
    case QuantGranularity::kPerTensor:
    case QuantGranularity::kJaggedColwise:
      return RunTwoPass<F>(j, pool, isa);
    case QuantGranularity::kInvalid:
      break;
  }
  // Unreachable: Validate admits only the granularities above.
  return absl::InternalError(absl::StrCat("quantize: granularity=", static_cast<int>(a.granularity),
                                          " was not validated"));
}

}  // namespace

absl::Status RunCpu(const QuantizeArgs& a, ThreadPool& pool) {
  switch (a.output.dtype) {
    case DType::kE4M3FN:
      return QuantizeAs<fp8::E4M3FN>(a, pool);
    case DType::kE4M3FNUZ:
      return QuantizeAs<fp8::E4M3FNUZ>(a, pool);
    case DType::kE5M2:
      return QuantizeAs<fp8::E5M2>(a, pool);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("output.dtype=", DTypeName(a.output.dtype), " is not an FP8 format"));
  }
}

}  // namespace kd
