// The row- and column-wise FP8 quantizers: per_row, per_tensor and mx1x32 of Y = X and of
// Y = Xᵀ, and the jagged (MoE token group) granularities, the recipes of kernels/cpu/quantize.cc,
// bit for bit. Every kernel moves 16-byte chunks of X (8 bf16/f16 or 4 f32 elements; element
// accesses where a row is not 16-byte aligned or a chunk is partial) and keeps them in registers
// between the amax and the encode:
//   mx1x32, jagged_rowwise  one pass. A CTA of kRowThreads threads takes kRowThreads consecutive
//                           chunks of kBlockRows rows (a 1x32 or 1x128 block is 4 or 16 adjacent
//                           lanes, which reduce its amax by shuffles), so a warp reads 512
//                           contiguous bytes of a row, as a row copy does.
//   per_row                 one pass: a CTA holds a whole row (up to 512 threads x kPerRowChunks
//                           chunks, 32 KB) and reduces its amax across the CTA; longer rows read
//                           the row again for the encode (from L2).
//   per_tensor              two kernels: amax partials (one word per CTA, no atomics), then an
//                           encode whose CTAs fold the partials into the one scale (no host
//                           round trip). It reads X twice; the encode walks the rows backwards so
//                           that the end of X, read last by the first kernel, is still in L2.
//   jagged_colwise,         Y = Xᵀ with one scale per (group, column of X); per_row of Xᵀ is the
//   per_row of Xᵀ           same with one group of every row. Two-byte X of up to 8192 rows with
//                           16-byte aligned rows: ColStripKernel, one read; a CTA per (32-column
//                           strip, group) holds the group's rows of the strip in shared memory
//                           (loaded by cp.async; taller groups in pieces, read again). Otherwise
//                           the ends checked and the cells zeroed in one kernel, amax per cell by
//                           atomicMax (one per column and group a thread walked), scales per
//                           cell, then a transposing encode through shared memory (128x64 tiles
//                           of X): X read twice, backwards the second time as per_tensor.
//   per_tensor of Xᵀ        per_tensor's amax partials, then ColTileKernel: persistent CTAs
//                           encode 128-row tiles of X and write them transposed (two reads of X).
//   mx1x32 of Xᵀ            one pass. Two-byte X with 16-byte aligned rows: MxTileAsyncKernel,
//                           one 128x128 tile per CTA by cp.async into shared memory, a thread's
//                           two columns x 32 rows being one 32x1 block of each; otherwise
//                           ColTileKernel: a 32x1 block of X is 8 rows of 4 warps.
// Group ends (jagged) are checked on the device as kd::CheckGroupEnds does (non-decreasing,
// non-negative, last == M): a violation goes to the op's DeviceErrorRecord and the op writes
// nothing, as the CPU backend writes nothing when its check fails. jagged_colwise (whose ends
// index its scale cells) and jagged_rowwise with many groups copy the ends once from client
// memory in one kernel (CTA 0), check the copy there, and read only the copy; every later kernel
// exits on a bad verdict. jagged_rowwise with up to kFusedCheckGroups groups, whose ends index
// nothing, saves that launch: every CTA of its one kernel checks the client's ends itself (CTA 0
// reports), so a client rewriting them during the op may get a mix of written and unwritten
// rows, never an access outside the tensors.
//
// Encoding: the product of each element and its scale is converted by the hardware (fp8::
// EncodeFinite4, fp8::Encode's byte for every non-NaN float) unless a product of the chunk is
// NaN; such a chunk takes fp8::EncodeBranchFree (fp8::Encode's byte for every float).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kerneld/kernels/fp8.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/fp8_encode.h"
#include "kernels/cuda/quantize_kernels.cuh"

namespace kd {
namespace cuda {
namespace quant {
namespace {

constexpr int kRowThreads = 128;  // row-block and per_tensor kernels
constexpr int kBlockRows = 4;     // rows a row-block CTA loads before it computes
constexpr int kRowsInFlight = 8;  // the same for the per_tensor and column amax kernels
constexpr int kPerRowChunks = 4;  // per_row: chunks of a row per thread per pass
constexpr int kMaxPerRowThreads = 512;
constexpr int64_t kMaxPartials = 8192;  // per_tensor amax partials (more only for huge rows)
constexpr int kCheckThreads = 1024;
// jagged_rowwise with at most this many groups: every row-block CTA checks the ends itself.
constexpr int64_t kFusedCheckGroups = 1024;
constexpr int kColThreads = 256;  // jagged_colwise scale and encode kernels
constexpr int kColAmaxThreads = 128;
constexpr int kColAmaxRows = 64;   // rows of X one amax thread walks
constexpr int kColTileRows = 128;  // encode tile: rows of X (columns of Y)
constexpr int kColTileCols = 64;   // encode tile: columns of X (rows of Y)
constexpr int64_t kScratchAlign = 256;
constexpr uint32_t kAbsMask = 0x7FFFFFFFu;

// Elements per 16-byte chunk.
template <InputType kType>
constexpr int kVecOf = 16 / static_cast<int>(sizeof(typename Input<kType>::Storage));

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// Chunk c of a row of `len` elements (elements [c*kVec, c*kVec + kVec)), zeros past `len`: one
// 16-byte load when `vec` (the row starts 16-byte aligned) and the chunk is whole.
template <InputType kType>
__device__ __forceinline__ uint4 LoadChunk(const typename Input<kType>::Storage* row, int64_t c,
                                           int64_t len, bool vec) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  const int64_t e0 = c * kVec;
  if (vec && e0 + kVec <= len) return *reinterpret_cast<const uint4*>(row + e0);
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (e0 + i < len) {
      w[i * sizeof(S) / 4] |= static_cast<uint32_t>(row[e0 + i]) << (8 * ((i * sizeof(S)) % 4));
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The codes of kVec products, packed little-endian into kVec/4 words.
template <typename F, int kVec>
__device__ __forceinline__ void PackCodes(const float (&y)[kVec], uint32_t (&words)[kVec / 4]) {
#if defined(KD_HAVE_HW_FP8_CVT)
  bool nan = false;
#pragma unroll
  for (int i = 0; i < kVec; ++i) nan |= y[i] != y[i];
  if (!nan) {
#pragma unroll
    for (int w = 0; w < kVec / 4; ++w) {
      words[w] = fp8::EncodeFinite4<F>(y[4 * w], y[4 * w + 1], y[4 * w + 2], y[4 * w + 3]);
    }
    return;
  }
#endif
#pragma unroll
  for (int w = 0; w < kVec / 4; ++w) {
    words[w] = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      words[w] |= static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y[4 * w + i])) << (8 * i);
    }
  }
}

// Codes of chunk c of a row of `len` elements: one store when `vec` and the chunk is whole.
template <int kVec>
__device__ __forceinline__ void StoreCodes(uint8_t* row, int64_t c, int64_t len,
                                           const uint32_t (&words)[kVec / 4], bool vec) {
  const int64_t e0 = c * kVec;
  if (vec && e0 + kVec <= len) {
    if constexpr (kVec == 8) {
      *reinterpret_cast<uint2*>(row + e0) = make_uint2(words[0], words[1]);
    } else {
      *reinterpret_cast<uint32_t*>(row + e0) = words[0];
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (e0 + i < len) row[e0 + i] = static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4)));
  }
}

// Chunk `raw` times `scale`, encoded and stored as chunk c of `row`.
template <InputType kType, typename F>
__device__ __forceinline__ void EncodeStore(const uint4& raw, float scale, uint8_t* row, int64_t c,
                                            int64_t len, bool vec) {
  constexpr int kVec = kVecOf<kType>;
  float y[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(raw, i), scale);
  uint32_t words[kVec / 4];
  PackCodes<F, kVec>(y, words);
  StoreCodes<kVec>(row, c, len, words, vec);
}

// torchao's to_mx e8m0 exponent S from the bits of amax (see kernels/cpu/quantize.cc).
template <typename F>
__device__ __forceinline__ uint8_t MxScaleCode(uint32_t bits, bool rceil) {
  if ((bits & kInfBits) == kInfBits) return 0xFF;
  if (!rceil) {
    constexpr uint32_t kEmax = (F::kMaxCode >> F::kManBits) - F::kBias;
    const uint32_t e = bits >> 23;
    return static_cast<uint8_t>(e > kEmax ? e - kEmax : 0);
  }
  constexpr float kInvMax = 1.0f / F::kMax;
  const uint32_t d = fp8::FloatBits(__fmul_rn(fp8::BitsToFloat(bits), kInvMax));
  const uint32_t e = d >> 23, man = d & 0x7FFFFFu;
  return static_cast<uint8_t>(e + (e == 0 ? (man > 0x400000u) : (man != 0)));
}

// 2^(127 - s) exactly (s = 254: the subnormal 2^-127); NaN for s = 0xff.
__device__ __forceinline__ float MxMultiplier(uint8_t s) {
  if (s == 0xFF) return fp8::BitsToFloat(kQuietNanBits);
  const uint32_t e = 254u - s;
  return fp8::BitsToFloat(e == 0 ? 0x00400000u : e << 23);
}

// The maximum of `v` over the CTA (blockDim.x a multiple of 32), through `buf` (one word per
// warp). Callers that reduce again alternate between two buffers: the barrier of the next
// reduction keeps a fast warp from overwriting a buffer a slow warp still reads.
__device__ __forceinline__ uint32_t CtaMax(uint32_t v, uint32_t* buf) {
  v = GroupMax<32>(v);
  if (threadIdx.x % 32 == 0) buf[threadIdx.x / 32] = v;
  __syncthreads();
  uint32_t m = 0;
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int w = 0; w < warps; ++w) m = max(m, buf[w]);
  return m;
}

// ---------------------------------------------------------------------------------------------
// Group-end checks.

struct Violation {
  int32_t code = DeviceErrorRecord::kNone;
  int64_t group = 0, value = 0, bound = 0;
};

__device__ __forceinline__ int64_t ClientEnd(const RowQuantizeParams& p, int64_t g) {
  return p.group_ends_i64 ? static_cast<const int64_t*>(p.group_ends)[g * p.group_ends_stride]
                          : static_cast<const int32_t*>(p.group_ends)[g * p.group_ends_stride];
}

// The violation kd::CheckGroupEnds reports for the ends `end_at(g)`, g < groups, of `total` rows
// (code kNone if none), found by the whole CTA; every thread gets the same answer.
template <typename EndAt>
__device__ Violation FindViolation(EndAt end_at, int64_t groups, int64_t total) {
  __shared__ unsigned long long first_bad;
  if (threadIdx.x == 0) first_bad = ~0ull;
  __syncthreads();
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    const int64_t prev = g == 0 ? 0 : end_at(g - 1);
    if (end_at(g) < prev) atomicMin(&first_bad, static_cast<unsigned long long>(g));
  }
  __syncthreads();
  Violation v;
  if (first_bad != ~0ull) {
    v.code = DeviceErrorRecord::kGroupEndDecreasing;
    v.group = static_cast<int64_t>(first_bad);
    v.value = end_at(v.group);
    v.bound = v.group == 0 ? 0 : end_at(v.group - 1);
  } else if (groups > 0 && end_at(groups - 1) != total) {
    v.code = DeviceErrorRecord::kGroupEndTotal;
    v.group = groups - 1;
    v.value = end_at(v.group);
    v.bound = total;
  }
  return v;
}

// Writes `v` to the op's record unless the record holds a violation already.
__device__ void ReportViolation(const RowQuantizeParams& p, const Violation& v) {
  volatile DeviceErrorRecord* rec = p.error;
  if (v.code == DeviceErrorRecord::kNone || rec == nullptr ||
      rec->code != DeviceErrorRecord::kNone) {
    return;
  }
  rec->op = 2;
  rec->group = v.group;
  rec->value = v.value;
  rec->bound = v.bound;
  __threadfence_system();
  rec->code = v.code;
}

// ---------------------------------------------------------------------------------------------
// mx1x32 (kMx) and jagged_rowwise (1x128 of X). Grid: x covers the chunks of a row, y walks
// groups of kBlockRows rows. jagged_rowwise: `valid` is the check kernel's verdict, or null when
// every CTA checks the client's ends itself (`fused_check`).
template <InputType kType, typename F, bool kMx>
__global__ void __launch_bounds__(kRowThreads)
    RowBlocksKernel(RowQuantizeParams p, bool vec_in, bool vec_out, const int32_t* valid,
                    bool fused_check) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  constexpr int kLanes = (kMx ? 32 : 128) / kVec;  // lanes sharing one block
  static_assert(kMx || kLanes >= kBlockRows, "lane i computes the scale of row i");
  if (valid != nullptr && *valid == 0) return;
  if (fused_check) {
    const Violation v = FindViolation([&](int64_t g) { return ClientEnd(p, g); }, p.groups, p.m);
    if (v.code != DeviceErrorRecord::kNone) {
      if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) ReportViolation(p, v);
      return;
    }
  }
  const int tid = threadIdx.x;
  const int64_t cpr = p.k / kVec;  // k is a multiple of the block
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kRowThreads + tid;
  const bool active = c < cpr;
  const int lane = tid % kLanes;
  const int lane_base = (tid % 32) / kLanes * kLanes;
  const int64_t block = c / kLanes;
  const S* input = static_cast<const S*>(p.input);
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kBlockRows; r0 < p.m;
       r0 += static_cast<int64_t>(gridDim.y) * kBlockRows) {
    uint4 raw[kBlockRows];
#pragma unroll
    for (int i = 0; i < kBlockRows; ++i) {
      raw[i] = make_uint4(0, 0, 0, 0);
      if (active && r0 + i < p.m) {
        raw[i] = LoadChunk<kType>(input + (r0 + i) * p.input_stride, c, p.k, vec_in);
      }
    }
    uint32_t amax[kBlockRows];
#pragma unroll
    for (int i = 0; i < kBlockRows; ++i) {
      amax[i] = GroupMax<kLanes>(ChunkAbsMaxBits<kType>(raw[i]));
    }
    float quant[kBlockRows];
    if constexpr (kMx) {
#pragma unroll
      for (int i = 0; i < kBlockRows; ++i) {
        const uint8_t s = MxScaleCode<F>(amax[i], p.mx_rceil);
        quant[i] = MxMultiplier(s);
        if (active && i % kLanes == lane && r0 + i < p.m) {
          static_cast<uint8_t*>(p.scales)[(r0 + i) * p.scales_stride + block] = s;
        }
      }
    } else {
      // Two IEEE divisions per block: lane i of a block's lanes computes row i's and shares it.
      uint32_t mine = 0;
#pragma unroll
      for (int i = 0; i < kBlockRows; ++i) {
        if (lane == i) mine = amax[i];
      }
      const BlockScale own = ComputeScale(mine, F::kMax, p.eps, p.pow2_scales);
      const int64_t r = r0 + lane;
      if (active && lane < kBlockRows && r < p.m) {
        const int64_t at =
            p.k_block_major_scales ? block * p.scales_stride + r : r * p.scales_stride + block;
        static_cast<float*>(p.scales)[at] = own.stored;
      }
#pragma unroll
      for (int i = 0; i < kBlockRows; ++i) {
        quant[i] = __shfl_sync(0xFFFFFFFFu, own.quant, lane_base + i);
      }
    }
#pragma unroll
    for (int i = 0; i < kBlockRows; ++i) {
      if (active && r0 + i < p.m) {
        EncodeStore<kType, F>(raw[i], quant[i], p.output + (r0 + i) * p.output_stride, c, p.k,
                              vec_out);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// per_row of Y = X: CTA per row (grid-stride), chunk j*blockDim + tid of each pass of
// blockDim * kPerRowChunks chunks. The first pass stays in registers; a row longer than one pass
// is read again for the encode.
template <InputType kType, typename F>
__global__ void __launch_bounds__(kMaxPerRowThreads)
    PerRowKernel(RowQuantizeParams p, bool vec_in, bool vec_out) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  __shared__ uint32_t warp_max[2][32];
  const int tid = threadIdx.x;
  const int64_t threads = blockDim.x;
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t pass = threads * kPerRowChunks;
  int parity = 0;
  for (int64_t r = blockIdx.x; r < p.m; r += gridDim.x) {
    const S* in = static_cast<const S*>(p.input) + r * p.input_stride;
    uint8_t* out = p.output + r * p.output_stride;
    uint4 raw[kPerRowChunks];
#pragma unroll
    for (int j = 0; j < kPerRowChunks; ++j) {
      const int64_t c = j * threads + tid;
      raw[j] = c < cpr ? LoadChunk<kType>(in, c, p.k, vec_in) : make_uint4(0, 0, 0, 0);
    }
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < kPerRowChunks; ++j) m = max(m, ChunkAbsMaxBits<kType>(raw[j]));
    for (int64_t c0 = pass; c0 < cpr; c0 += pass) {
#pragma unroll
      for (int j = 0; j < kPerRowChunks; ++j) {
        const int64_t c = c0 + j * threads + tid;
        if (c < cpr) m = max(m, ChunkAbsMaxBits<kType>(LoadChunk<kType>(in, c, p.k, vec_in)));
      }
    }
    m = CtaMax(m, warp_max[parity]);
    parity ^= 1;
    const BlockScale sc = ComputeScale(m, F::kMax, p.eps, p.pow2_scales);
    if (tid == 0) static_cast<float*>(p.scales)[r * p.scales_stride] = sc.stored;
#pragma unroll
    for (int j = 0; j < kPerRowChunks; ++j) {
      const int64_t c = j * threads + tid;
      if (c < cpr) EncodeStore<kType, F>(raw[j], sc.quant, out, c, p.k, vec_out);
    }
    for (int64_t c0 = pass; c0 < cpr; c0 += pass) {
#pragma unroll
      for (int j = 0; j < kPerRowChunks; ++j) {
        const int64_t c = c0 + j * threads + tid;
        if (c < cpr) {
          EncodeStore<kType, F>(LoadChunk<kType>(in, c, p.k, vec_in), sc.quant, out, c, p.k,
                                vec_out);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// per_tensor of Y = X. Grid: x covers the chunks of a row, y walks groups of kRowsInFlight rows.
template <InputType kType>
__global__ void __launch_bounds__(kRowThreads)
    TensorAmaxKernel(RowQuantizeParams p, bool vec_in, uint32_t* partials) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  __shared__ uint32_t warp_max[kRowThreads / 32];
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kRowThreads + threadIdx.x;
  const S* input = static_cast<const S*>(p.input);
  uint32_t m = 0;
  if (c < cpr) {
    for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRowsInFlight; r0 < p.m;
         r0 += static_cast<int64_t>(gridDim.y) * kRowsInFlight) {
      uint4 raw[kRowsInFlight];
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        raw[i] = r0 + i < p.m ? LoadChunk<kType>(input + (r0 + i) * p.input_stride, c, p.k, vec_in)
                              : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) m = max(m, ChunkAbsMaxBits<kType>(raw[i]));
    }
  }
  m = CtaMax(m, warp_max);
  if (threadIdx.x == 0) partials[static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x] = m;
}

// Folds the `count` partials into the scale (every CTA), writes the stored scale (CTA 0), and
// encodes, walking row groups from the last.
template <InputType kType, typename F>
__global__ void __launch_bounds__(kRowThreads)
    TensorEncodeKernel(RowQuantizeParams p, bool vec_in, bool vec_out, const uint32_t* partials,
                       int64_t count) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  __shared__ uint32_t warp_max[kRowThreads / 32];
  uint32_t m = 0;
  for (int64_t i = threadIdx.x; i < count; i += kRowThreads) m = max(m, partials[i]);
  m = CtaMax(m, warp_max);
  const BlockScale sc = ComputeScale(m, F::kMax, p.eps, p.pow2_scales);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    static_cast<float*>(p.scales)[0] = sc.stored;
  }
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kRowThreads + threadIdx.x;
  if (c >= cpr) return;
  const S* input = static_cast<const S*>(p.input);
  const int64_t groups = (p.m + kRowsInFlight - 1) / kRowsInFlight;
  for (int64_t g = blockIdx.y; g < groups; g += gridDim.y) {
    const int64_t r0 = (groups - 1 - g) * kRowsInFlight;
    uint4 raw[kRowsInFlight];
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      raw[i] = r0 + i < p.m ? LoadChunk<kType>(input + (r0 + i) * p.input_stride, c, p.k, vec_in)
                            : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      if (r0 + i < p.m) {
        EncodeStore<kType, F>(raw[i], sc.quant, p.output + (r0 + i) * p.output_stride, c, p.k,
                              vec_out);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Jagged: the group-end check and the column-wise kernels.

// The groups of the column-wise kinds: per_row of Xᵀ is jagged_colwise with one group of every
// row.
__host__ __device__ __forceinline__ int64_t ColGroups(const RowQuantizeParams& p) {
  return p.kind == RowQuantizeKind::kPerRowTransposed ? 1 : p.groups;
}

// Where the stored scale of (group g, column col of X) goes: (groups, k) for jagged_colwise,
// (k, 1) for per_row of Xᵀ.
__device__ __forceinline__ int64_t ColScaleAt(const RowQuantizeParams& p, int64_t g, int64_t col) {
  return p.kind == RowQuantizeKind::kPerRowTransposed ? col * p.scales_stride
                                                      : g * p.scales_stride + col;
}

struct JaggedScratch {
  int32_t* valid;
  int64_t* ends;        // (groups) the checked copy
  uint32_t* cell_amax;  // (groups, k), column kinds; zeroed by CheckGroupEndsKernel
  float* cell_scale;    // (groups, k), column kinds
  int64_t zero_words;   // of cell_amax
};

int64_t EndsOffset() { return kScratchAlign; }
int64_t CellsOffset(int64_t groups) { return kScratchAlign + AlignUp(groups * 8, kScratchAlign); }

JaggedScratch ScratchOf(const RowQuantizeParams& p) {
  char* base = static_cast<char*>(p.scratch);
  const int64_t groups = ColGroups(p);
  const int64_t cell_bytes = AlignUp(groups * p.k * 4, kScratchAlign);
  JaggedScratch s;
  s.valid = reinterpret_cast<int32_t*>(base);
  s.ends = reinterpret_cast<int64_t*>(base + EndsOffset());
  s.cell_amax = reinterpret_cast<uint32_t*>(base + CellsOffset(groups));
  s.cell_scale = reinterpret_cast<float*>(base + CellsOffset(groups) + cell_bytes);
  s.zero_words = groups * p.k;
  return s;
}

// CTA 0 copies the client's ends once into `ends` (for per_row of Xᵀ, the one end m), checks
// the copy as kd::CheckGroupEnds does and writes the verdict to `valid` and a violation to
// p.error; every CTA zeroes its share of `zero` (`zero_words` words; none for null).
__global__ void __launch_bounds__(kCheckThreads)
    CheckGroupEndsKernel(RowQuantizeParams p, int64_t* ends, int32_t* valid, uint32_t* zero,
                         int64_t zero_words) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kCheckThreads + threadIdx.x; i < zero_words;
       i += static_cast<int64_t>(gridDim.x) * kCheckThreads) {
    zero[i] = 0;
  }
  if (blockIdx.x != 0) return;
  const int64_t groups = ColGroups(p);
  const bool single = p.kind == RowQuantizeKind::kPerRowTransposed;
  for (int64_t g = threadIdx.x; g < groups; g += kCheckThreads) {
    ends[g] = single ? p.m : ClientEnd(p, g);
  }
  __syncthreads();
  const Violation v = FindViolation([&](int64_t g) { return ends[g]; }, groups, p.m);
  if (threadIdx.x != 0) return;
  *valid = v.code == DeviceErrorRecord::kNone;
  ReportViolation(p, v);
}

// First g in [0, n) with ends[g] > r, or n.
__device__ __forceinline__ int64_t GroupOfRow(const int64_t* ends, int64_t n, int64_t r) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (ends[mid] > r)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Amax per (group, column of X): thread = one chunk of columns over kColAmaxRows rows; it folds
// its column maxima into the cells of a group with atomicMax when it leaves the group.
template <InputType kType>
__global__ void __launch_bounds__(kColAmaxThreads)
    ColAmaxKernel(RowQuantizeParams p, bool vec_in, JaggedScratch s) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  if (*s.valid == 0) return;
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColAmaxThreads + threadIdx.x;
  if (c >= cpr) return;
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * kColAmaxRows;
  const int64_t r_end = min(p.m, r_begin + kColAmaxRows);
  const S* input = static_cast<const S*>(p.input);
  int64_t g = GroupOfRow(s.ends, ColGroups(p), r_begin);  // < groups: the last end is m
  int64_t g_end = s.ends[g];
  uint32_t acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0;
  const int64_t col0 = c * kVec;
  auto flush = [&]() {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if (acc[i] != 0 && col0 + i < p.k) atomicMax(&s.cell_amax[g * p.k + col0 + i], acc[i]);
      acc[i] = 0;
    }
  };
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRowsInFlight) {
    uint4 raw[kRowsInFlight];
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      raw[i] = r0 + i < r_end ? LoadChunk<kType>(input + (r0 + i) * p.input_stride, c, p.k, vec_in)
                              : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      const int64_t r = r0 + i;
      if (r < r_end) {
        while (r >= g_end) {
          flush();
          ++g;
          g_end = s.ends[g];
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          acc[e] = max(acc[e], fp8::FloatBits(ChunkElement<kType>(raw[i], e)) & kAbsMask);
        }
      }
    }
  }
  flush();
}

template <typename F>
__global__ void __launch_bounds__(kColThreads)
    ColScaleKernel(RowQuantizeParams p, JaggedScratch s) {
  if (*s.valid == 0) return;
  const int64_t cells = ColGroups(p) * p.k;
  for (int64_t cell = static_cast<int64_t>(blockIdx.x) * kColThreads + threadIdx.x; cell < cells;
       cell += static_cast<int64_t>(gridDim.x) * kColThreads) {
    const BlockScale sc = ComputeScale(s.cell_amax[cell], F::kMax, p.eps, p.pow2_scales);
    s.cell_scale[cell] = sc.quant;
    static_cast<float*>(p.scales)[ColScaleAt(p, cell / p.k, cell % p.k)] = sc.stored;
  }
}

// Y = Xᵀ encode: a CTA converts a tile of kColTileRows rows x kColTileCols columns of X, each
// element with the scale of its (group, column), into shared memory transposed, then writes
// kColTileCols rows of Y. Thread unit = 4 consecutive rows x one chunk, so that the codes of one
// column of the 4 rows form one word. Row tiles are walked from the last.
template <InputType kType, typename F>
__global__ void __launch_bounds__(kColThreads)
    ColEncodeKernel(RowQuantizeParams p, bool vec_in, bool vec_out16, JaggedScratch s) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  constexpr int kRowChunks = kColTileCols / kVec;        // chunks per tile row
  constexpr int kUnits = kColTileRows / 4 * kRowChunks;  // 4-row units per tile
  constexpr int kUnitsPerThread = kUnits / kColThreads;
  constexpr int kPitch = kColTileRows / 4 + 1;  // words per tile row of Y
  static_assert(kUnits % kColThreads == 0, "whole units per thread");
  __shared__ int64_t group_of[kColTileRows];
  __shared__ uint32_t tile[kColTileCols * kPitch];
  if (*s.valid == 0) return;
  const int tid = threadIdx.x;
  const S* input = static_cast<const S*>(p.input);
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kColTileCols;
  const int64_t row_tiles = (p.m + kColTileRows - 1) / kColTileRows;
  for (int64_t t = blockIdx.y; t < row_tiles; t += gridDim.y) {
    const int64_t m0 = (row_tiles - 1 - t) * kColTileRows;
    if (tid < kColTileRows) {
      group_of[tid] = m0 + tid < p.m ? GroupOfRow(s.ends, ColGroups(p), m0 + tid) : 0;
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kUnitsPerThread; ++u) {
      const int unit = u * kColThreads + tid;
      const int cc = unit % kRowChunks, quad = unit / kRowChunks;
      const int64_t col0 = k0 + static_cast<int64_t>(cc) * kVec;  // first column of the chunk
      const int64_t chunk = col0 / kVec;
      uint4 raw[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t m = m0 + quad * 4 + r;
        raw[r] = m < p.m ? LoadChunk<kType>(input + m * p.input_stride, chunk, p.k, vec_in)
                         : make_uint4(0, 0, 0, 0);
      }
      uint32_t rows[4][kVec / 4];
      float scale[kVec];
      int64_t scale_group = -1;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t g = group_of[quad * 4 + r];
        if (g != scale_group) {
          scale_group = g;
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            scale[i] = col0 + i < p.k ? s.cell_scale[g * p.k + col0 + i] : 0.0f;
          }
        }
        float y[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(raw[r], i), scale[i]);
        PackCodes<F, kVec>(y, rows[r]);
      }
      // 4x4 byte transposes: word w of rows 0..3 -> the words of columns 4w..4w+3.
#pragma unroll
      for (int w = 0; w < kVec / 4; ++w) {
        const uint32_t lo01 = __byte_perm(rows[0][w], rows[1][w], 0x5140);
        const uint32_t lo23 = __byte_perm(rows[2][w], rows[3][w], 0x5140);
        const uint32_t hi01 = __byte_perm(rows[0][w], rows[1][w], 0x7362);
        const uint32_t hi23 = __byte_perm(rows[2][w], rows[3][w], 0x7362);
        const int col = cc * kVec + 4 * w;
        tile[(col + 0) * kPitch + quad] = __byte_perm(lo01, lo23, 0x5410);
        tile[(col + 1) * kPitch + quad] = __byte_perm(lo01, lo23, 0x7632);
        tile[(col + 2) * kPitch + quad] = __byte_perm(hi01, hi23, 0x5410);
        tile[(col + 3) * kPitch + quad] = __byte_perm(hi01, hi23, 0x7632);
      }
    }
    __syncthreads();
    // Rows of Y: 8 threads per row, 4 words (16 codes) each.
    constexpr int kThreadsPerRow = kColTileRows / 16;
    constexpr int kRowsPerPass = kColThreads / kThreadsPerRow;
#pragma unroll
    for (int pass = 0; pass < kColTileCols / kRowsPerPass; ++pass) {
      const int yr = pass * kRowsPerPass + tid / kThreadsPerRow;
      const int q = tid % kThreadsPerRow;
      const int64_t k = k0 + yr;
      if (k >= p.k) continue;
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = tile[yr * kPitch + 4 * q + i];
      const int64_t mcol = m0 + 16 * q;
      uint8_t* dst = p.output + k * p.output_stride + mcol;
      if (vec_out16 && mcol + 16 <= p.m) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          if (mcol + i < p.m) dst[i] = static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)));
        }
      }
    }
    __syncthreads();  // group_of and tile are reused by the next row tile
  }
}

// ---------------------------------------------------------------------------------------------
// Y = Xᵀ by tiles of X, one kernel: per_tensor of Xᵀ (kTensor: the scale from TensorAmaxKernel's
// partials) and mx1x32 of Xᵀ (kMx: 32x1 blocks of X along M) for f32 X and two-byte X whose
// rows do not allow cp.async chunks (MxTileAsyncKernel below takes the others, 0.10-0.17 of the
// copy faster: branch qcol2). A tile is kCtRows rows x 16 chunks
// of X (128 two-byte or 64 f32 columns). Thread t holds chunk column t % 16 of the 8 rows of
// quads t / 16 and t / 16 + 16 (a quad: 4 consecutive rows) in registers, encodes them with its
// columns' scales and transposes the codes through shared memory (4x4 byte transposes; the
// words of Y row `col` swizzled by 2 * (col / kVec), conflict-free), so that the tile's Y rows
// leave with 16-byte stores, a warp writing four 128-byte runs.
// The grid is persistent: CTA b takes items b, b + grid, ..., with the next two items' chunks
// in flight to shared memory (cp.async) while it works on the current one from registers.
// NOTE: measured on H100 (bench/RESULTS.md, branch qcol): this form (2 CTAs per SM, no spills)
// beat direct register loads at 3 CTAs per SM (80 registers, 36-40 bytes spilled; one tile per
// CTA for mx1x32, a grid of resident CTAs for per_tensor) by 0.06-0.13 of the copy for mx1x32
// and 0.04-0.08 for per_tensor.
enum class ColMode { kTensor, kMx };

constexpr int kCtThreads = 256;
constexpr int kCtRows = 128;
constexpr int kCtChunks = 16;                         // 16-byte chunks per tile row
constexpr int kCtQuads = kCtRows / 4;                 // code words per Y row of a tile
constexpr int kCtHalfQuads = kCtThreads / kCtChunks;  // quads per half of a tile
constexpr int kCtWarps = kCtThreads / 32;
constexpr int kCtSlots = 8;  // rows a thread holds
static_assert(2 * kCtHalfQuads == kCtQuads, "two quads per thread");

constexpr int kCtStages = 2;  // items whose chunks are in flight ahead of the current one
constexpr int kCtStagedBytes = kCtStages * kCtSlots * kCtThreads * 16;  // dynamic, 64 KB

template <InputType kType>
constexpr int kCtColsOf = kCtChunks* kVecOf<kType>;

struct ColTileArgs {
  bool vec_in = false, vec_out16 = false;
  int64_t row_tiles = 0, strips = 0, items = 0;
  // kTensor
  const uint32_t* partials = nullptr;
  int64_t partial_count = 0;
};

// The local row of slot j of this thread.
__device__ __forceinline__ int CtSlotRow(int j) {
  return 4 * (static_cast<int>(threadIdx.x) / kCtChunks + kCtHalfQuads * (j / 4)) + j % 4;
}

// |x| maxima of the elements of a chunk word, element-wise (two halves of two-byte inputs).
template <InputType kType>
__device__ __forceinline__ uint32_t AbsMaxWord(uint32_t acc, uint32_t w) {
  if constexpr (kType == InputType::kF32) {
    return max(acc, w & kAbsMask);
  } else {
    return MaxU16x2(acc, w & 0x7FFF7FFFu);
  }
}

template <InputType kType>
__device__ __forceinline__ uint32_t WordOf(const uint4& c, int w) {
  return w == 0 ? c.x : w == 1 ? c.y : w == 2 ? c.z : c.w;
}

// Element i of packed maxima `acc` as the bits of an fp32 |x|.
template <InputType kType>
__device__ __forceinline__ uint32_t ColumnBits(const uint32_t (&acc)[4], int i) {
  if constexpr (kType == InputType::kF32) {
    return acc[i];
  } else {
    const uint32_t h = (acc[i / 2] >> (16 * (i % 2))) & 0xFFFFu;
    if constexpr (kType == InputType::kBF16) {
      return h << 16;
    } else {
      return fp8::FloatBits(__half2float(__ushort_as_half(static_cast<uint16_t>(h))));
    }
  }
}

// Folds the packed column maxima of the warp's two quads (lanes l and l + 16 hold the same
// chunk column) and writes the warp's maximum of each tile column to red_warp (lanes 0..15).
template <InputType kType>
__device__ __forceinline__ void WarpColumnMax(uint32_t (&acc)[4], uint32_t* red_warp) {
  constexpr int kVec = kVecOf<kType>;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t other = __shfl_xor_sync(0xFFFFFFFFu, acc[w], 16);
    if constexpr (kType == InputType::kF32) {
      acc[w] = max(acc[w], other);
    } else {
      acc[w] = MaxU16x2(acc[w], other);
    }
  }
  const int lane = threadIdx.x % 32;
  if (lane < 16) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) red_warp[lane * kVec + i] = ColumnBits<kType>(acc, i);
  }
}

// The codes of chunk `raw` at the column scales `q`.
template <InputType kType, typename F>
__device__ __forceinline__ void EncodeWords(const uint4& raw, const float (&q)[kVecOf<kType>],
                                            uint32_t (&words)[kVecOf<kType> / 4]) {
  constexpr int kVec = kVecOf<kType>;
  float y[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(raw, i), q[i]);
  PackCodes<F, kVec>(y, words);
}

template <InputType kType, typename F, ColMode kMode>
__global__ void __launch_bounds__(kCtThreads, 2) ColTileKernel(RowQuantizeParams p, ColTileArgs a) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  constexpr int kCols = kCtColsOf<kType>;
  constexpr int kHalves = kMode == ColMode::kMx ? 2 : 1;
  constexpr int kPieces = kCols * (kCtRows / 16) / kCtThreads;  // 16-byte stores per thread
  __shared__ uint32_t red[kHalves][kCtWarps][kCols];
  __shared__ float col_quant[kMode == ColMode::kMx ? 4 : 1][kCols];
  __shared__ __align__(16) uint32_t codes[kCols * kCtQuads];
  __shared__ uint32_t warp_max[kCtWarps];
  extern __shared__ uint4 staged[];  // kCtStagedBytes: kCtStages items' chunks
  const int tid = threadIdx.x;
  const int cc = tid % kCtChunks;
  const int warp = tid / 32;
  float tensor_quant = 0.0f;
  if constexpr (kMode == ColMode::kTensor) {
    uint32_t m = 0;
    for (int64_t i = tid; i < a.partial_count; i += kCtThreads) m = max(m, a.partials[i]);
    m = CtaMax(m, warp_max);
    const BlockScale sc = ComputeScale(m, F::kMax, p.eps, p.pow2_scales);
    if (blockIdx.x == 0 && tid == 0) static_cast<float*>(p.scales)[0] = sc.stored;
    tensor_quant = sc.quant;
  }
  const S* input = static_cast<const S*>(p.input);
  const auto coords = [&](int64_t n, int64_t& m0, int64_t& k0, int64_t& strip) {
    int64_t tile;
    if constexpr (kMode == ColMode::kTensor) {
      // Backwards, row band by row band: the end of X, read last by the amax kernel, first.
      const int64_t r = a.items - 1 - n;
      tile = r / a.strips;
      strip = r % a.strips;
    } else {
      strip = n / a.row_tiles;
      tile = n % a.row_tiles;
    }
    m0 = tile * kCtRows;
    k0 = strip * kCols;
  };
  // Item n's chunks into this thread's slots of stage `stage` (slot j at j * kCtThreads + tid,
  // read back only by this thread): cp.async where a chunk is whole and aligned, else loaded
  // here. Every call commits one cp.async group, an empty one past the last item.
  const auto prefetch = [&](int64_t n, int stage) {
    if (n >= a.items) {
      asm volatile("cp.async.commit_group;" ::: "memory");
      return;
    }
    int64_t m0, k0, strip;
    coords(n, m0, k0, strip);
    const int64_t c = k0 / kVec + cc;
    const bool whole = a.vec_in && (c + 1) * kVec <= p.k;
#pragma unroll
    for (int j = 0; j < kCtSlots; ++j) {
      const int64_t m = m0 + CtSlotRow(j);
      uint4* dst = &staged[(stage * kCtSlots + j) * kCtThreads + tid];
      if (whole && m < p.m) {
        const S* src = input + m * p.input_stride + c * kVec;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                         static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
                     "l"(src)
                     : "memory");
      } else {
        *dst = m < p.m ? LoadChunk<kType>(input + m * p.input_stride, c, p.k, a.vec_in)
                       : make_uint4(0, 0, 0, 0);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  const auto step = [&](int64_t n, int stage) {
    int64_t m0, k0, strip;
    coords(n, m0, k0, strip);
    static_assert(kCtStages == 2, "one group (the next item's) may stay in flight");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    uint4 tile[kCtSlots];
#pragma unroll
    for (int j = 0; j < kCtSlots; ++j) tile[j] = staged[(stage * kCtSlots + j) * kCtThreads + tid];
    prefetch(n + kCtStages * static_cast<int64_t>(gridDim.x), stage);
    const int64_t m_end = min(m0 + kCtRows, p.m);
    uint32_t row_codes[kCtSlots][kVec / 4];
#pragma unroll
    for (int j = 0; j < kCtSlots; ++j) {
#pragma unroll
      for (int w = 0; w < kVec / 4; ++w) row_codes[j][w] = 0;
    }
    if constexpr (kMode == ColMode::kTensor) {
      float q[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) q[i] = tensor_quant;
#pragma unroll
      for (int j = 0; j < kCtSlots; ++j) {
        if (m0 + CtSlotRow(j) < m_end) EncodeWords<kType, F>(tile[j], q, row_codes[j]);
      }
    } else {
      // 32x1 blocks: block b holds the rows of half b / 2 of warps 4 * (b % 2) .. + 3.
      uint32_t acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
      for (int j = 0; j < kCtSlots; ++j) {
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          acc[j / 4][w] = AbsMaxWord<kType>(acc[j / 4][w], WordOf<kType>(tile[j], w));
        }
      }
      WarpColumnMax<kType>(acc[0], red[0][warp]);
      WarpColumnMax<kType>(acc[1], red[1][warp]);
      __syncthreads();
      if (tid < kCols) {
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          uint32_t m = 0;
#pragma unroll
          for (int w = 0; w < 4; ++w) m = max(m, red[b / 2][4 * (b % 2) + w][tid]);
          const uint8_t sc = MxScaleCode<F>(m, p.mx_rceil);
          col_quant[b][tid] = MxMultiplier(sc);
          if (k0 + tid < p.k && m0 + 32 * b < p.m) {
            static_cast<uint8_t*>(p.scales)[(k0 + tid) * p.scales_stride + m0 / 32 + b] = sc;
          }
        }
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kCtSlots; ++j) {
        const int row = CtSlotRow(j);
        float q[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          q[i] = col_quant[row / 32][cc * kVec + i];
        }
        if (m0 + row < m_end) EncodeWords<kType, F>(tile[j], q, row_codes[j]);
      }
    }
    // Transpose the codes into the tile's Y rows: word `quad` of Y row col holds rows
    // 4 * quad .. + 3 of X column col.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int quad = tid / kCtChunks + kCtHalfQuads * h;
      const int at = quad ^ (2 * cc);
#pragma unroll
      for (int w = 0; w < kVec / 4; ++w) {
        const uint32_t r0 = row_codes[4 * h][w], r1 = row_codes[4 * h + 1][w];
        const uint32_t r2 = row_codes[4 * h + 2][w], r3 = row_codes[4 * h + 3][w];
        const uint32_t lo01 = __byte_perm(r0, r1, 0x5140);
        const uint32_t lo23 = __byte_perm(r2, r3, 0x5140);
        const uint32_t hi01 = __byte_perm(r0, r1, 0x7362);
        const uint32_t hi23 = __byte_perm(r2, r3, 0x7362);
        const int col = cc * kVec + 4 * w;
        codes[(col + 0) * kCtQuads + at] = __byte_perm(lo01, lo23, 0x5410);
        codes[(col + 1) * kCtQuads + at] = __byte_perm(lo01, lo23, 0x7632);
        codes[(col + 2) * kCtQuads + at] = __byte_perm(hi01, hi23, 0x5410);
        codes[(col + 3) * kCtQuads + at] = __byte_perm(hi01, hi23, 0x7632);
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int u = i * kCtThreads + tid;
      const int yr = u / 8, part = u % 8;
      const int ccr = yr / kVec;
      uint4 v = *reinterpret_cast<const uint4*>(&codes[yr * kCtQuads + 4 * (part ^ (ccr >> 1))]);
      if (ccr & 1) v = make_uint4(v.z, v.w, v.x, v.y);
      const int64_t k = k0 + yr;
      const int64_t mcol = m0 + 16 * part;
      if (k < p.k && mcol < p.m) {
        uint8_t* dst = p.output + k * p.output_stride + mcol;
        if (a.vec_out16 && mcol + 16 <= p.m) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else {
          const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int b = 0; b < 16; ++b) {
            if (mcol + b < p.m) dst[b] = static_cast<uint8_t>(words[b / 4] >> (8 * (b % 4)));
          }
        }
      }
    }
    __syncthreads();  // codes (and red, col_quant) are reused by the next item
  };
  if (blockIdx.x >= a.items) return;
  prefetch(blockIdx.x, 0);
  prefetch(blockIdx.x + static_cast<int64_t>(gridDim.x), 1);
  int stage = 0;
  for (int64_t n = blockIdx.x; n < a.items; n += gridDim.x) {
    step(n, stage);
    stage ^= 1;
  }
}

// ---------------------------------------------------------------------------------------------
// Shared pieces of the two cp.async kernels below (two-byte inputs, 16-byte aligned rows, K a
// multiple of 8, so that a 16-byte chunk of a row is whole or wholly past K).

// 16 bytes from global to shared memory by cp.async, zero-filled past `src_bytes` (0: nothing
// read; `src` must still be a valid, 16-byte aligned address).
__device__ __forceinline__ void CpAsync16(void* smem, const void* src, int src_bytes) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// The two elements of a word of a two-byte row (columns 2i, 2i+1).
template <InputType kType>
__device__ __forceinline__ void PairElements(uint32_t w, float& a, float& b) {
  if constexpr (kType == InputType::kBF16) {
    a = fp8::BitsToFloat(w << 16);
    b = fp8::BitsToFloat(w & 0xFFFF0000u);
  } else {
    a = __half2float(__ushort_as_half(static_cast<uint16_t>(w & 0xFFFFu)));
    b = __half2float(__ushort_as_half(static_cast<uint16_t>(w >> 16)));
  }
}

// The fp32 |x| bits of half `i` of a word of two-byte |x| patterns.
template <InputType kType>
__device__ __forceinline__ uint32_t HalfAbsBits(uint32_t packed, int i) {
  const uint32_t h = (packed >> (16 * i)) & 0xFFFFu;
  if constexpr (kType == InputType::kBF16) {
    return h << 16;
  } else {
    return fp8::FloatBits(__half2float(__ushort_as_half(static_cast<uint16_t>(h))));
  }
}

// Four codes, packed little-endian: the hardware conversion when `hw` (no product is NaN),
// else the exact software encode.
template <typename F>
__device__ __forceinline__ uint32_t Encode4(bool hw, float y0, float y1, float y2, float y3) {
#if defined(KD_HAVE_HW_FP8_CVT)
  if (hw) return fp8::EncodeFinite4<F>(y0, y1, y2, y3);
#endif
  return static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y0)) |
         (static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y1)) << 8) |
         (static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y2)) << 16) |
         (static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y3)) << 24);
}

// The codes of 16 consecutive rows of two adjacent columns of a two-byte tile in shared memory
// (`at`: the first row's word; rows `pitch` bytes apart) at the columns' scales qa and qb.
template <InputType kType, typename F>
__device__ __forceinline__ void EncodePair16(const unsigned char* at, int pitch, float qa, float qb,
                                             bool hwa, bool hwb, uint4& ya_codes, uint4& yb_codes) {
  uint32_t ca[4], cb[4];
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    float ya[4], yb[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float a, b;
      PairElements<kType>(*reinterpret_cast<const uint32_t*>(at + (4 * g + i) * pitch), a, b);
      ya[i] = __fmul_rn(a, qa);
      yb[i] = __fmul_rn(b, qb);
    }
    ca[g] = Encode4<F>(hwa, ya[0], ya[1], ya[2], ya[3]);
    cb[g] = Encode4<F>(hwb, yb[0], yb[1], yb[2], yb[3]);
  }
  ya_codes = make_uint4(ca[0], ca[1], ca[2], ca[3]);
  yb_codes = make_uint4(cb[0], cb[1], cb[2], cb[3]);
}

// 16 codes to Y row `dst` (columns m .. m + 15 of Y, those in [lo, hi)): one 16-byte store
// when `vec` and all 16 are in range.
__device__ __forceinline__ void StoreCodes16(uint8_t* dst, int64_t m, int64_t lo, int64_t hi,
                                             const uint4& v, bool vec) {
  if (vec && m >= lo && m + 16 <= hi) {
    *reinterpret_cast<uint4*>(dst) = v;
    return;
  }
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int b = 0; b < 16; ++b) {
    if (m + b >= lo && m + b < hi) dst[b] = static_cast<uint8_t>(words[b / 4] >> (8 * (b % 4)));
  }
}

// ---------------------------------------------------------------------------------------------
// mx1x32 of Y = Xᵀ, two-byte inputs: one 128x128 tile of X per CTA (the recipe of
// quantize_tiled.cu's async kernel). The tile arrives by cp.async straight into 32 KB of shared
// memory (rows past M zero-filled); thread t then owns columns 2 * (t % 64) and + 1 over rows
// 32 * (t / 64) .. + 31, which are exactly one 32x1 block of each column: its amax, e8m0 scale
// and codes need no other thread. The codes go over the first 16 KB of the tile (16-byte chunks
// XOR-swizzled, conflict-free) after a barrier, and leave with 16-byte stores, a warp writing 4
// whole 128-byte rows of Y. 48 registers, 32.5 KB of shared memory: 5 CTAs per SM.
// NOTE: measured on H100 (bench/RESULTS.md, branch qcol2): 0.85-0.93 of the copy against
// ColTileKernel's 0.68-0.83 (persistent, 2 CTAs per SM); the grouped tile order from 16384 rows
// up adds 0.003-0.015.
constexpr int kMxtThreads = 256;
constexpr int kMxtEdge = 128;                           // rows and columns of X per tile
constexpr int kMxtRowBytes = kMxtEdge * 2;              // a tile row of X in shared memory
constexpr int kMxtSmemBytes = kMxtEdge * kMxtRowBytes;  // 32 KB
constexpr int kMxtMinBlocks = 5;

// Byte offset of 16-byte chunk `c` of Y row `row` in the code tile.
__device__ __forceinline__ int MxtCodeOffset(int row, int c) {
  return row * kMxtEdge + ((c ^ ((row >> 1) & 7)) * 16);
}

template <InputType kType, typename F>
__global__ void __launch_bounds__(kMxtThreads, kMxtMinBlocks)
    MxTileAsyncKernel(RowQuantizeParams p, int group_k, bool vec_out16, bool vec_scales) {
  using S = typename Input<kType>::Storage;
  static_assert(sizeof(S) == 2, "two-byte inputs");
  extern __shared__ __align__(16) unsigned char mxt_smem[];
  __shared__ uint32_t scale_words[kMxtEdge];  // the 4 e8m0 codes of each tile column
  const int tid = threadIdx.x;
  // Tile order: row-major, or groups of group_k column tiles taken row band by row band.
  const int k_tiles = static_cast<int>((p.k + kMxtEdge - 1) / kMxtEdge);
  const int tile = static_cast<int>(blockIdx.x);
  int tile_m, tile_k;
  if (group_k >= k_tiles) {
    tile_m = tile / k_tiles;
    tile_k = tile - tile_m * k_tiles;
  } else {
    const int m_tiles = static_cast<int>((p.m + kMxtEdge - 1) / kMxtEdge);
    const int group = tile / (group_k * m_tiles);
    const int local = tile - group * group_k * m_tiles;
    const int width = min(group_k, k_tiles - group * group_k);
    tile_m = local / width;
    tile_k = group * group_k + local - tile_m * width;
  }
  const int64_t m0 = static_cast<int64_t>(tile_m) * kMxtEdge;
  const int64_t k0 = static_cast<int64_t>(tile_k) * kMxtEdge;
  unsigned char* xs = mxt_smem;
  {
    const S* input = static_cast<const S*>(p.input);
    const int lane_col = tid % 16;
    const int64_t kc = k0 + lane_col * 8;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int row = j * (kMxtThreads / 16) + tid / 16;
      const int64_t r = m0 + row;
      const int bytes = r < p.m && kc < p.k ? 16 : 0;
      const S* src = bytes > 0 ? input + r * p.input_stride + kc : input;
      CpAsync16(xs + row * kMxtRowBytes + lane_col * 16, src, bytes);
    }
    CpAsyncWaitAll();
  }
  __syncthreads();
  const int pair = tid % 64, block = tid / 64;
  const unsigned char* at = xs + block * 32 * kMxtRowBytes + pair * 4;
  uint32_t acc = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    acc = MaxU16x2(acc, *reinterpret_cast<const uint32_t*>(at + i * kMxtRowBytes) & 0x7FFF7FFFu);
  }
  const uint8_t sa = MxScaleCode<F>(HalfAbsBits<kType>(acc, 0), p.mx_rceil);
  const uint8_t sb = MxScaleCode<F>(HalfAbsBits<kType>(acc, 1), p.mx_rceil);
  const float qa = MxMultiplier(sa), qb = MxMultiplier(sb);
  unsigned char* scale_bytes = reinterpret_cast<unsigned char*>(scale_words);
  scale_bytes[(2 * pair) * 4 + block] = sa;
  scale_bytes[(2 * pair + 1) * 4 + block] = sb;
  // A finite multiplier makes every product of the block finite (|x| <= amax); a NaN one (amax
  // Inf or NaN) makes them all NaN.
  const bool hwa = qa == qa, hwb = qb == qb;
  uint4 held[2][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    EncodePair16<kType, F>(at + 16 * h * kMxtRowBytes, kMxtRowBytes, qa, qb, hwa, hwb, held[h][0],
                           held[h][1]);
  }
  __syncthreads();  // every read of the tile done: its first 16 KB take the codes
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    *reinterpret_cast<uint4*>(xs + MxtCodeOffset(2 * pair, 2 * block + h)) = held[h][0];
    *reinterpret_cast<uint4*>(xs + MxtCodeOffset(2 * pair + 1, 2 * block + h)) = held[h][1];
  }
  if (tid < kMxtEdge && k0 + tid < p.k) {
    // Scales (K, M/32): the tile column's 4 codes, one word where aligned (m0 / 32 is a
    // multiple of 4).
    uint8_t* dst = static_cast<uint8_t*>(p.scales) + (k0 + tid) * p.scales_stride + m0 / 32;
    const int64_t left = p.m / 32 - m0 / 32;
    const int n = left < 4 ? static_cast<int>(left) : 4;
    const uint32_t w = scale_words[tid];
    if (vec_scales && n == 4) {
      *reinterpret_cast<uint32_t*>(dst) = w;
    } else {
      for (int b = 0; b < n; ++b) dst[b] = static_cast<uint8_t>(w >> (8 * b));
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kMxtEdge * (kMxtEdge / 16) / kMxtThreads; ++i) {
    const int idx = i * kMxtThreads + tid;
    const int row = idx / 8, c = idx % 8;
    const int64_t k = k0 + row, m = m0 + c * 16;
    if (k < p.k && m < p.m) {
      const uint4 v = *reinterpret_cast<const uint4*>(xs + MxtCodeOffset(row, c));
      StoreCodes16(p.output + k * p.output_stride + m, m, 0, p.m, v, vec_out16);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// jagged_colwise and per_row of Xᵀ in one read, two-byte inputs: one CTA per (column strip of
// kCsCols columns, group). The group's rows of the strip go by cp.async into shared memory
// (`cap` rows of kCsRowBytes at a time, from the group's first row rounded down to a multiple of
// 16, rows outside the group zero-filled); the column maxima come from shared memory, then the
// scales, then the codes of the rows still in shared memory. A group taller than `cap` rows is
// taken in pieces of `cap` rows: the amax walks them all, the encode walks them back from the
// last, which is still in shared memory, reading the others again. Encode unit: a word (two
// columns) of 16 rows of a 16-row-aligned block, whose 2 x 16 codes go to the two Y rows with
// 16-byte stores.
constexpr int kCsThreads = 256;
constexpr int kCsCols = 32;
constexpr int kCsRowBytes = kCsCols * 2;   // 64: one strip row of X in shared memory
constexpr int kCsWords = kCsRowBytes / 4;  // 16
constexpr int kCsChunks = kCsRowBytes / 16;

template <InputType kType, typename F>
__global__ void __launch_bounds__(kCsThreads, 3)
    ColStripKernel(RowQuantizeParams p, JaggedScratch s, int cap, bool vec_out16) {
  using S = typename Input<kType>::Storage;
  static_assert(sizeof(S) == 2, "two-byte inputs");
  extern __shared__ __align__(16) unsigned char cs_smem[];
  __shared__ uint32_t red[kCsThreads / 32][kCsWords];
  __shared__ float col_quant[kCsCols];
  if (*s.valid == 0) return;
  const int tid = threadIdx.x;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kCsCols;
  const int64_t g = blockIdx.y;
  const int64_t start = g == 0 ? 0 : s.ends[g - 1], end = s.ends[g];
  const int64_t a0 = start / 16 * 16;
  const int64_t pieces = end > start ? (end - a0 + cap - 1) / cap : 0;
  const S* input = static_cast<const S*>(p.input);
  unsigned char* xs = cs_smem;
  auto rows_of = [&](int64_t piece) {
    const int64_t left = end - a0 - piece * cap;
    return static_cast<int>(left < cap ? left : cap);
  };
  auto load = [&](int64_t piece) {
    const int64_t base = a0 + piece * cap;
    const int n = rows_of(piece) * kCsChunks;
    for (int u = tid; u < n; u += kCsThreads) {
      const int row = u / kCsChunks, c = u % kCsChunks;
      const int64_t r = base + row, col = k0 + c * 8;
      const int bytes = r >= start && col < p.k ? 16 : 0;
      const S* src = bytes > 0 ? input + r * p.input_stride + col : input;
      CpAsync16(xs + row * kCsRowBytes + c * 16, src, bytes);
    }
    CpAsyncWaitAll();
    __syncthreads();
  };
  // Column maxima: thread t folds word t % 16 of rows t / 16, + 16, ... (a warp reads two whole
  // rows, 128 bytes: conflict-free).
  uint32_t acc = 0;
  for (int64_t piece = 0; piece < pieces; ++piece) {
    if (piece > 0) __syncthreads();  // every read of the previous piece done
    load(piece);
    const int n = rows_of(piece);
    for (int row = tid / kCsWords; row < n; row += kCsThreads / kCsWords) {
      acc = MaxU16x2(
          acc, *reinterpret_cast<const uint32_t*>(xs + row * kCsRowBytes + (tid % kCsWords) * 4) &
                   0x7FFF7FFFu);
    }
  }
  acc = MaxU16x2(acc, __shfl_xor_sync(0xFFFFFFFFu, acc, 16));
  if (tid % 32 < kCsWords) red[tid / 32][tid % 32] = acc;
  __syncthreads();
  bool finite = true;
  if (tid < kCsCols) {
    uint32_t m = 0;
#pragma unroll
    for (int w = 0; w < kCsThreads / 32; ++w) m = MaxU16x2(m, red[w][tid / 2]);
    const BlockScale sc =
        ComputeScale(HalfAbsBits<kType>(m, tid % 2), F::kMax, p.eps, p.pow2_scales);
    col_quant[tid] = sc.quant;
    finite = sc.finite;
    if (k0 + tid < p.k) static_cast<float*>(p.scales)[ColScaleAt(p, g, k0 + tid)] = sc.stored;
  }
  const bool hw = __syncthreads_and(finite) != 0;
  for (int64_t piece = pieces - 1; piece >= 0; --piece) {
    if (piece != pieces - 1) {
      __syncthreads();  // every read of the later piece done
      load(piece);
    }
    const int64_t base = a0 + piece * cap;
    const int units = (rows_of(piece) + 15) / 16 * kCsWords;
    for (int u = tid; u < units; u += kCsThreads) {
      const int w = u % kCsWords, blk = u / kCsWords;
      const int64_t col = k0 + 2 * w;
      if (col >= p.k) continue;  // K is even: col + 1 < K too
      uint4 ya, yb;
      EncodePair16<kType, F>(xs + blk * 16 * kCsRowBytes + w * 4, kCsRowBytes, col_quant[2 * w],
                             col_quant[2 * w + 1], hw, hw, ya, yb);
      const int64_t m = base + 16 * blk;
      StoreCodes16(p.output + col * p.output_stride + m, m, start, end, ya, vec_out16);
      StoreCodes16(p.output + (col + 1) * p.output_stride + m, m, start, end, yb, vec_out16);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Launchers.

// CTAs of `kKernel` with `threads` threads resident on the whole device at once.
template <auto kKernel>
cudaError_t ResidentCtas(int threads, int64_t& resident) {
  static int per_sm = 0;  // per kernel; the same on every device of a node
  int device = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess && per_sm == 0) {
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, 0);
  }
  resident = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  return err;
}

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); }

// The per_tensor grid: x covers a row's chunks, y as many row groups as fill the device once,
// at most kMaxPartials CTAs in all unless x alone is more.
dim3 TensorGrid(const RowQuantizeParams& p, int vec, int64_t resident) {
  const int64_t cpr = (p.k + vec - 1) / vec;
  const int64_t x = (cpr + kRowThreads - 1) / kRowThreads;
  const int64_t groups = (p.m + kRowsInFlight - 1) / kRowsInFlight;
  const int64_t y =
      Clamp(std::min(resident / x, kMaxPartials / x), 1, std::min<int64_t>(groups, 65535));
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

// ColTileKernel's launch: a persistent grid of at most the resident CTAs. `a` holds the mode's
// own fields; the rest is set here.
template <InputType kType, typename F, ColMode kMode>
cudaError_t LaunchColTiles(const RowQuantizeParams& p, ColTileArgs a, cudaStream_t stream) {
  using S = typename Input<kType>::Storage;
  constexpr auto kKernel = ColTileKernel<kType, F, kMode>;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  a.vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  a.vec_out16 = addr(p.output) % 16 == 0 && p.output_stride % 16 == 0;
  a.row_tiles = (p.m + kCtRows - 1) / kCtRows;
  a.strips = (p.k + kCtColsOf<kType> - 1) / kCtColsOf<kType>;
  a.items = a.row_tiles * a.strips;
  static int per_sm = 0;  // per kernel; the same on every device of a node
  int device = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess && per_sm == 0) {
    err =
        cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kCtStagedBytes);
    if (err == cudaSuccess) {
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, kCtThreads,
                                                          kCtStagedBytes);
    }
  }
  if (err != cudaSuccess) return err;
  const int64_t resident = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  const int64_t grid = std::min(a.items, resident);
  kKernel<<<static_cast<unsigned>(grid), kCtThreads, kCtStagedBytes, stream>>>(p, a);
  return cudaGetLastError();
}

// Two-byte X whose base and row pitch allow 16-byte cp.async chunks, none of them cut by K.
bool AsyncRows(const RowQuantizeParams& p) {
  return reinterpret_cast<uintptr_t>(p.input) % 16 == 0 && (p.input_stride * 2) % 16 == 0 &&
         p.k % 8 == 0;
}

// Whether jagged_colwise / per_row of Xᵀ take ColStripKernel (two-byte inputs).
// NOTE: measured on H100 (bench/RESULTS.md, branch qcol2), against the two-read kernels in the
// same process: at 8192 rows (8 random or skewed groups, or one group; K 4096 and 7168, 128 to
// 1792 CTAs) the strip kernel gains 0.025-0.09 of the copy; from 16384 rows up the groups are
// taller than a CTA's shared memory holds (kCsCapRows), the pieces read again come mostly from
// DRAM, and it loses 0.015-0.11 (pieces of 3072 rows at 1 CTA per SM: +0.01-0.05 on 8 random
// groups, -0.005 to -0.07 on skewed groups and one group). So: up to kCsMaxRows rows, and
// enough CTAs to fill about half the CTA slots (the fewest measured: 128, one group at K=4096).
constexpr int kCsCapRows = 1536;  // 96 KB of shared memory: 2 CTAs per SM
constexpr int64_t kCsMaxRows = 8192;
constexpr int64_t kCsMinCtas = 128;
bool UseColStrips(const RowQuantizeParams& p, int64_t groups) {
  const int64_t strips = (p.k + kCsCols - 1) / kCsCols;
  return AsyncRows(p) && groups <= 65535 && p.m <= kCsMaxRows && strips * groups >= kCsMinCtas;
}

// mx1x32 of Xᵀ on MxTileAsyncKernel: one CTA per 128x128 tile of X, grouped tile order from
// 16384 rows up (as quantize_tiled.cu's transposed forms).
template <InputType kType, typename F>
cudaError_t LaunchMxTiles(const RowQuantizeParams& p, cudaStream_t stream) {
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_out16 = addr(p.output) % 16 == 0 && p.output_stride % 16 == 0;
  const bool vec_scales = addr(p.scales) % 4 == 0 && p.scales_stride % 4 == 0;
  const int64_t k_tiles = (p.k + kMxtEdge - 1) / kMxtEdge;
  const int64_t tiles = (p.m + kMxtEdge - 1) / kMxtEdge * k_tiles;
  if (tiles > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const int group_k = p.m >= 16384 && k_tiles > 4 ? 4 : static_cast<int>(k_tiles);
  MxTileAsyncKernel<kType, F><<<static_cast<unsigned>(tiles), kMxtThreads, kMxtSmemBytes, stream>>>(
      p, group_k, vec_out16, vec_scales);
  return cudaGetLastError();
}

// jagged_colwise and per_row of Xᵀ on ColStripKernel: a CTA per (strip, group); the ends are
// checked (s.valid) by the kernel launched before.
template <InputType kType, typename F>
cudaError_t LaunchColStrips(const RowQuantizeParams& p, const JaggedScratch& s,
                            cudaStream_t stream) {
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_out16 = addr(p.output) % 16 == 0 && p.output_stride % 16 == 0;
  const int smem = kCsCapRows * kCsRowBytes;
  constexpr auto kKernel = ColStripKernel<kType, F>;
  // Set on every launch: the attribute belongs to the device the launch goes to.
  const cudaError_t err =
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const int64_t strips = (p.k + kCsCols - 1) / kCsCols;
  if (strips > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  kKernel<<<dim3(static_cast<unsigned>(strips), static_cast<unsigned>(ColGroups(p))), kCsThreads,
            smem, stream>>>(p, s, kCsCapRows, vec_out16);
  return cudaGetLastError();
}

// jagged_colwise and per_row of Xᵀ: the ends copied and checked (and, for the two-read kernels,
// the cell maxima zeroed) in one kernel, then ColStripKernel (UseColStrips), or amax per cell,
// scales per cell and a transposing encode.
// NOTE: the two-read kernels read X twice. Two one-read designs (a persistent cooperative grid
// whose tiles of a column strip wait for one another's column maxima, holding their chunks on
// chip; also with the next tile's maxima folded before the wait) were bit-exact but measured no
// faster on H100 (bench/RESULTS.md, branch qcol); ColStripKernel (branch qcol2) is faster only
// where groups mostly fit its shared memory (UseColStrips). Two more designs were bit-exact
// and slower (branches qcol3-wip, qcol3-band-wip; bench/RESULTS.md): one read on clusters of
// up to 16 CTAs holding a 32-column strip of all M <= 32768 rows in shared memory (TMA ring,
// maxima reduced through distributed shared memory), 0.22-0.34 of the copy, loading X at about
// 1 TB/s even with its encode and cluster wait switched off; and one persistent kernel taking
// column bands of at most 8 MB by ticket (amax items, then encode items re-reading the band
// from L2), 0.23-0.30.
template <InputType kType, typename F>
cudaError_t LaunchColumnCells(const RowQuantizeParams& p, cudaStream_t stream) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  const int64_t groups = ColGroups(p);
  const JaggedScratch s = ScratchOf(p);
  const bool strips = sizeof(S) == 2 && UseColStrips(p, groups);
  // The strip kernel needs no cell maxima: the ends are checked by one CTA that zeroes nothing.
  const int64_t zero_words = strips ? 0 : s.zero_words;
  const int64_t zero_ctas = std::min<int64_t>(64, zero_words / (4 * kCheckThreads) + 1);
  CheckGroupEndsKernel<<<static_cast<unsigned>(zero_ctas), kCheckThreads, 0, stream>>>(
      p, s.ends, s.valid, s.cell_amax, zero_words);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  // No group: nothing to write (the CPU backend writes nothing either).
  if (groups == 0) return cudaSuccess;
  if constexpr (sizeof(S) == 2) {
    if (strips) return LaunchColStrips<kType, F>(p, s, stream);
  }
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t cells = groups * p.k;
  const int64_t amax_x = (cpr + kColAmaxThreads - 1) / kColAmaxThreads;
  const int64_t amax_y = (p.m + kColAmaxRows - 1) / kColAmaxRows;
  const int64_t enc_x = (p.k + kColTileCols - 1) / kColTileCols;
  const int64_t enc_y = (p.m + kColTileRows - 1) / kColTileRows;
  if (amax_x > 0x7FFFFFFF || amax_y > 65535 || enc_x > 0x7FFFFFFF) {
    return cudaErrorInvalidConfiguration;
  }
  ColAmaxKernel<kType><<<dim3(static_cast<unsigned>(amax_x), static_cast<unsigned>(amax_y)),
                         kColAmaxThreads, 0, stream>>>(p, vec_in, s);
  const int64_t scale_blocks = std::min<int64_t>((cells + kColThreads - 1) / kColThreads, 132 * 32);
  ColScaleKernel<F><<<static_cast<unsigned>(scale_blocks), kColThreads, 0, stream>>>(p, s);
  const bool vec_out16 = addr(p.output) % 16 == 0 && p.output_stride % 16 == 0;
  ColEncodeKernel<kType, F>
      <<<dim3(static_cast<unsigned>(enc_x), static_cast<unsigned>(std::min<int64_t>(enc_y, 65535))),
         kColThreads, 0, stream>>>(p, vec_in, vec_out16, s);
  return cudaGetLastError();
}

template <InputType kType, typename F>
cudaError_t LaunchRowsAs(const RowQuantizeParams& p, cudaStream_t stream) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  const bool vec_out = addr(p.output) % kVec == 0 && p.output_stride % kVec == 0;
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t row_groups = (p.m + kBlockRows - 1) / kBlockRows;
  const int64_t x_blocks = (cpr + kRowThreads - 1) / kRowThreads;
  if (x_blocks > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const dim3 row_grid(static_cast<unsigned>(x_blocks),
                      static_cast<unsigned>(std::min<int64_t>(row_groups, 65535)));
  switch (p.kind) {
    case RowQuantizeKind::kPerRow: {
      const int64_t threads =
          Clamp((cpr + kPerRowChunks - 1) / kPerRowChunks + 31, 32, kMaxPerRowThreads) / 32 * 32;
      const int64_t grid = std::min<int64_t>(p.m, int64_t{1} << 30);
      PerRowKernel<kType, F>
          <<<static_cast<unsigned>(grid), static_cast<unsigned>(threads), 0, stream>>>(p, vec_in,
                                                                                       vec_out);
      return cudaGetLastError();
    }
    case RowQuantizeKind::kMx1x32:
      if constexpr (F::kFnuz) {
        return cudaErrorInvalidValue;  // not an MX element format
      } else {
        RowBlocksKernel<kType, F, true>
            <<<row_grid, kRowThreads, 0, stream>>>(p, vec_in, vec_out, nullptr, false);
        return cudaGetLastError();
      }
    case RowQuantizeKind::kPerTensor: {
      int64_t resident = 0;
      cudaError_t err = ResidentCtas<TensorAmaxKernel<kType>>(kRowThreads, resident);
      if (err != cudaSuccess) return err;
      const dim3 amax_grid = TensorGrid(p, kVec, resident);
      uint32_t* partials = static_cast<uint32_t*>(p.scratch);
      TensorAmaxKernel<kType><<<amax_grid, kRowThreads, 0, stream>>>(p, vec_in, partials);
      err = ResidentCtas<TensorEncodeKernel<kType, F>>(kRowThreads, resident);
      if (err != cudaSuccess) return err;
      const dim3 encode_grid = TensorGrid(p, kVec, resident);
      TensorEncodeKernel<kType, F><<<encode_grid, kRowThreads, 0, stream>>>(
          p, vec_in, vec_out, partials, static_cast<int64_t>(amax_grid.x) * amax_grid.y);
      return cudaGetLastError();
    }
    case RowQuantizeKind::kJaggedRowwise:
      if (p.groups <= kFusedCheckGroups) {
        RowBlocksKernel<kType, F, false>
            <<<row_grid, kRowThreads, 0, stream>>>(p, vec_in, vec_out, nullptr, true);
        return cudaGetLastError();
      }
      break;
    case RowQuantizeKind::kMx1x32Transposed:
      if constexpr (F::kFnuz) {
        return cudaErrorInvalidValue;
      } else {
        if constexpr (sizeof(S) == 2) {
          if (AsyncRows(p)) return LaunchMxTiles<kType, F>(p, stream);
        }
        return LaunchColTiles<kType, F, ColMode::kMx>(p, ColTileArgs(), stream);
      }
    case RowQuantizeKind::kPerTensorTransposed: {
      int64_t resident = 0;
      const cudaError_t err = ResidentCtas<TensorAmaxKernel<kType>>(kRowThreads, resident);
      if (err != cudaSuccess) return err;
      const dim3 amax_grid = TensorGrid(p, kVec, resident);
      uint32_t* partials = static_cast<uint32_t*>(p.scratch);
      TensorAmaxKernel<kType><<<amax_grid, kRowThreads, 0, stream>>>(p, vec_in, partials);
      ColTileArgs a;
      a.partials = partials;
      a.partial_count = static_cast<int64_t>(amax_grid.x) * amax_grid.y;
      return LaunchColTiles<kType, F, ColMode::kTensor>(p, a, stream);
    }
    case RowQuantizeKind::kJaggedColwise:
    case RowQuantizeKind::kPerRowTransposed:
      return LaunchColumnCells<kType, F>(p, stream);
  }
  const JaggedScratch s = ScratchOf(p);
  CheckGroupEndsKernel<<<1, kCheckThreads, 0, stream>>>(p, s.ends, s.valid, nullptr, 0);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  RowBlocksKernel<kType, F, false>
      <<<row_grid, kRowThreads, 0, stream>>>(p, vec_in, vec_out, s.valid, false);
  return cudaGetLastError();
}

template <typename F>
cudaError_t LaunchRowsFormat(const RowQuantizeParams& p, cudaStream_t stream) {
  switch (p.input_type) {
    case InputType::kBF16:
      return LaunchRowsAs<InputType::kBF16, F>(p, stream);
    case InputType::kF16:
      return LaunchRowsAs<InputType::kF16, F>(p, stream);
    case InputType::kF32:
      return LaunchRowsAs<InputType::kF32, F>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace
}  // namespace quant

uint64_t RowQuantizeScratchBytes(const RowQuantizeParams& p) {
  switch (p.kind) {
    case RowQuantizeKind::kPerTensor:
    case RowQuantizeKind::kPerTensorTransposed: {
      const int vec = p.input_type == InputType::kF32 ? 4 : 8;
      const int64_t x = ((p.k + vec - 1) / vec + quant::kRowThreads - 1) / quant::kRowThreads;
      return static_cast<uint64_t>(std::max(quant::kMaxPartials, x)) * sizeof(uint32_t);
    }
    case RowQuantizeKind::kJaggedRowwise:
      return static_cast<uint64_t>(quant::CellsOffset(p.groups));
    case RowQuantizeKind::kJaggedColwise:
    case RowQuantizeKind::kPerRowTransposed: {
      const int64_t groups = quant::ColGroups(p);
      const int64_t cell_bytes = quant::AlignUp(groups * p.k * 4, quant::kScratchAlign);
      return static_cast<uint64_t>(quant::CellsOffset(groups) + 2 * cell_bytes);
    }
    default:
      return 0;
  }
}

cudaError_t LaunchRowQuantize(const RowQuantizeParams& p, cudaStream_t stream) {
  if (p.m < 1 || p.k < 1 || p.groups < 0) return cudaErrorInvalidConfiguration;
  switch (p.format) {
    case Fp8Format::kE4M3FN:
      return quant::LaunchRowsFormat<fp8::E4M3FN>(p, stream);
    case Fp8Format::kE4M3FNUZ:
      return quant::LaunchRowsFormat<fp8::E4M3FNUZ>(p, stream);
    case Fp8Format::kE5M2:
      return quant::LaunchRowsFormat<fp8::E5M2>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace kd
