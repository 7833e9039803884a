// The blockwise quantizer: 1x128 and 128x128 blocks of Y = X, one kernel template (the fast path;
// every other granularity and Y = Xᵀ go through the tiled and row/column families). Included by
// one .cu file per FP8 format (quantize_blockwise_<format>.cu) so that the formats compile in
// parallel.
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_BLOCKWISE_CUH_
#define KERNELD_KERNELS_GPU_QUANTIZE_BLOCKWISE_CUH_

#include <cstdint>
#include <type_traits>

#include "kernels/gpu/quantize_common.cuh"
#include "kernels/gpu/quantize_params.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {

// What the blockwise kernel takes by value: the fields of QuantizeParams it reads, in the layout
// its machine code was built for.
struct BlockwiseKernelArgs {
  const void* input = nullptr;  // (m, k)
  int64_t input_stride = 0;
  InputType input_type = InputType::kBF16;
  uint8_t* output = nullptr;  // (m, k)
  int64_t output_stride = 0;
  Fp8Format format = Fp8Format::kE4M3FN;
  float* scales = nullptr;  // (m, k/128) or (k/128, m) [1x128]; (ceil(m/128), k/128) [128x128]
  int64_t scales_stride = 0;
  int64_t m = 0;
  int64_t k = 0;              // a multiple of 128
  bool tile_128x128 = false;  // false: 1x128 blocks
  bool k_block_major_scales = false;
  bool pow2_scales = false;
  float eps = 1e-12f;
};

inline BlockwiseKernelArgs BlockwiseArgsOf(const QuantizeParams& q) {
  BlockwiseKernelArgs a;
  a.input = q.input;
  a.input_stride = q.input_stride;
  a.input_type = q.input_type;
  a.output = q.output;
  a.output_stride = q.output_stride;
  a.format = q.format;
  a.scales = static_cast<float*>(q.scales);
  a.scales_stride = q.scales_stride;
  a.m = q.m;
  a.k = q.k;
  a.tile_128x128 = q.tile_128x128;
  a.k_block_major_scales = q.k_block_major_scales;
  a.pow2_scales = q.pow2_scales;
  a.eps = q.eps;
  return a;
}

// Launch shape of the blockwise kernel. A work item is kItemBlocks 1x128 blocks that follow each
// other in row-major order (8 KB of two-byte inputs), or one 128x128 tile; one CTA per item.
// Thread t holds kChunks 16-byte chunks of its item: chunk u is column t % kLanes of item row
// u * kRowsPerPass + t / kLanes (an item row is a block for 1x128, a tile row for 128x128).
// NOTE: one small item per CTA and a grid of every item in row-major order runs 0.04-0.11 of the
// copy bandwidth faster on an H100 than a persistent grid walking items with the next item's
// loads in flight; these sizes keep 1536 (1x128) and 1024 (128x128) threads resident per SM
// without spills (docs/decisions/0010-quantize-kernel-families.md).
template <InputType kType, bool kTile128>
struct Geometry {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(typename Input<kType>::Storage));
  static constexpr int kLanes = kBlock / kVec;  // threads per 128-element row
  static constexpr int kThreads = kTile128 ? 512 : 256;
  static constexpr int kMinBlocksPerSm = kTile128 ? 2 : 6;
  static constexpr int kRowsPerPass = kThreads / kLanes;
  static constexpr int kChunks = kTile128 ? kBlock / kRowsPerPass : 2;
  static constexpr uint32_t kItemBlocks = kTile128 ? 1 : kRowsPerPass * kChunks;
  static_assert(!kTile128 || kRowsPerPass * kChunks == kBlock, "an item is one tile");
  static_assert(kTile128 || kLanes >= kChunks, "one lane per chunk computes its scales");
};

// Quantizes work item gpu::BlockIdxX() (see Geometry). `units`: the 1x128 blocks (m * k / 128) or
// 128x128 tiles (ceil(m / 128) * k / 128) of X; `kb`: k / 128. kDense (1x128 only): rows of X and
// Y are contiguous (stride k), so block b starts at element 128 b of both; else the block's row
// and column come from a division by kb. `vec_in`/`vec_out`: the tensors allow 16-byte (one
// chunk's inputs) and kVec-byte (its codes) accesses; else element accesses.
template <InputType kType, typename F, bool kTile128, bool kDense>
__global__ void KD_LAUNCH_BOUNDS((Geometry<kType, kTile128>::kThreads),
                                 (Geometry<kType, kTile128>::kMinBlocksPerSm))
    QuantizeBlockwiseKernel(BlockwiseKernelArgs p, FastDivU32 kb, uint32_t units, bool vec_in,
                            bool vec_out) {
  using G = Geometry<kType, kTile128>;
  using S = typename Input<kType>::Storage;
  constexpr int kVec = G::kVec;
  constexpr int kLanes = G::kLanes;
  constexpr int kChunks = G::kChunks;
  const uint32_t item = gpu::BlockIdxX();
  const int tid = gpu::ThreadIdxX();
  const int lane_col = tid % kLanes;
  const int item_row = tid / kLanes;
  const S* input = static_cast<const S*>(p.input);

  // Element offsets of chunk u in X and Y; `valid` is false past the end of X.
  struct Loc {
    int64_t in, out;
    bool valid;
  };
  auto locate = [&](int u) -> Loc {
    if constexpr (kTile128) {
      const uint32_t tile_row = Div(item, kb);
      const int64_t row = static_cast<int64_t>(tile_row) * kBlock + u * G::kRowsPerPass + item_row;
      const int64_t col = static_cast<int64_t>(item - tile_row * kb.d) * kBlock + lane_col * kVec;
      return {row * p.input_stride + col, row * p.output_stride + col, row < p.m};
    } else {
      const uint32_t block =
          item * G::kItemBlocks + static_cast<uint32_t>(u * G::kRowsPerPass + item_row);
      if constexpr (kDense) {
        const int64_t offset = static_cast<int64_t>(block) * kBlock + lane_col * kVec;
        return {offset, offset, block < units};
      } else {
        const uint32_t row = Div(block, kb);
        const int64_t col = static_cast<int64_t>(block - row * kb.d) * kBlock + lane_col * kVec;
        return {row * p.input_stride + col, row * p.output_stride + col, block < units};
      }
    }
  };

  // Every load first, all in flight, then the amax, then the codes.
  uint4 raw[kChunks];
#pragma unroll
  for (int u = 0; u < kChunks; ++u) {
    const Loc l = locate(u);
    raw[u] = make_uint4(0, 0, 0, 0);
    if (l.valid) {
      const S* src = input + l.in;
      if (vec_in) {
        raw[u] = *reinterpret_cast<const uint4*>(src);
      } else {
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          w[i * sizeof(S) / 4] |= static_cast<uint32_t>(src[i]) << (8 * ((i * sizeof(S)) % 4));
        }
        raw[u] = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
  }

  // amax bits per chunk (|x| bits compare as unsigned: NaN above Inf above every finite).
  uint32_t amax[kChunks];
#pragma unroll
  for (int u = 0; u < kChunks; ++u) amax[u] = ChunkAbsMaxBits<kType>(raw[u]);

  float quant[kTile128 ? 1 : kChunks];
  bool finite[kTile128 ? 1 : kChunks];
  if constexpr (kTile128) {
    __shared__ uint32_t warp_max[G::kThreads / gpu::kLaneGroup];
    uint32_t a = 0;
#pragma unroll
    for (int u = 0; u < kChunks; ++u) a = max(a, amax[u]);
    a = GroupMax<32>(a);
    if (tid % gpu::kLaneGroup == 0) warp_max[tid / gpu::kLaneGroup] = a;
    gpu::SyncThreads();
    a = 0;
#pragma unroll
    for (int w = 0; w < G::kThreads / gpu::kLaneGroup; ++w) a = max(a, warp_max[w]);
    const BlockScale sc = ComputeScale(a, F::kMax, p.eps, p.pow2_scales);
    quant[0] = sc.quant;
    finite[0] = sc.finite;
    if (tid == 0) {
      const uint32_t tile_row = Div(item, kb);
      p.scales[static_cast<int64_t>(tile_row) * p.scales_stride + (item - tile_row * kb.d)] =
          sc.stored;
    }
  } else {
    // NOTE: two IEEE divisions per block cost more than the block's conversion; so lane l of
    // the kLanes lanes sharing a block computes the scales of chunk l only and hands the quant
    // scale to the other lanes by shuffle.
    uint32_t mine = 0;
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      amax[u] = GroupMax<kLanes>(amax[u]);
      if (lane_col == u) mine = amax[u];
    }
    const BlockScale own = ComputeScale(mine, F::kMax, p.eps, p.pow2_scales);
    const uint32_t block =
        item * G::kItemBlocks + static_cast<uint32_t>(lane_col * G::kRowsPerPass + item_row);
    if (lane_col < kChunks && block < units) {
      const uint32_t row = Div(block, kb);
      const uint32_t col = block - row * kb.d;
      const int64_t s = p.k_block_major_scales ? static_cast<int64_t>(col) * p.scales_stride + row
                                               : static_cast<int64_t>(row) * p.scales_stride + col;
      p.scales[s] = own.stored;
    }
    const int lane_base = (tid % gpu::kLaneGroup) / kLanes * kLanes;
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      quant[u] = gpu::Shfl(own.quant, lane_base + u);
      finite[u] = amax[u] < kInfBits && (fp8::FloatBits(quant[u]) & kInfBits) != kInfBits;
    }
  }

#pragma unroll
  for (int u = 0; u < kChunks; ++u) {
    const Loc l = locate(u);
    uint32_t words[kVec / 4];
    EncodeChunk<kType, F>(raw[u], quant[kTile128 ? 0 : u], finite[kTile128 ? 0 : u], words);
    if (l.valid) {
      uint8_t* dst = p.output + l.out;
      if (vec_out) {
        if constexpr (kVec == 8) {
          *reinterpret_cast<uint2*>(dst) = make_uint2(words[0], words[1]);
        } else {
          *reinterpret_cast<uint32_t*>(dst) = words[0];
        }
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) dst[i] = static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4)));
      }
    }
  }
}

template <InputType kType, typename F, bool kTile128>
cudaError_t LaunchQuantizeVariant(const BlockwiseKernelArgs& p, cudaStream_t stream) {
  using G = Geometry<kType, kTile128>;
  using S = typename Input<kType>::Storage;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  // One chunk's codes are stored at a time.
  const bool vec_out = addr(p.output) % G::kVec == 0 && p.output_stride % G::kVec == 0;
  const int64_t kb = p.k / kBlock;
  const int64_t units = kTile128 ? (p.m + kBlock - 1) / kBlock * kb : p.m * kb;
  // Block and tile indices are 32-bit: 2^31 blocks are 2^38 elements, more than a device holds.
  if (kb < 1 || units < 1 || units > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const int64_t items = (units + G::kItemBlocks - 1) / G::kItemBlocks;
  const FastDivU32 div = MakeFastDiv(static_cast<uint32_t>(kb));
  const auto n = static_cast<uint32_t>(units);
  const dim3 grid(static_cast<unsigned>(items));
  if constexpr (!kTile128) {
    if (p.input_stride == p.k && p.output_stride == p.k) {
      QuantizeBlockwiseKernel<kType, F, false, true>
          <<<grid, G::kThreads, 0, stream>>>(p, div, n, vec_in, vec_out);
      return cudaGetLastError();
    }
  }
  QuantizeBlockwiseKernel<kType, F, kTile128, false>
      <<<grid, G::kThreads, 0, stream>>>(p, div, n, vec_in, vec_out);
  return cudaGetLastError();
}

// The blockwise family for outputs of format F (instantiated by quantize_blockwise_<format>.cu).
template <typename F>
cudaError_t LaunchBlockwiseFormat(const QuantizeParams& q, cudaStream_t stream) {
  const BlockwiseKernelArgs p = BlockwiseArgsOf(q);
  auto by_type = [&](auto tile128) -> cudaError_t {
    constexpr bool kTile128 = decltype(tile128)::value;
    switch (p.input_type) {
      case InputType::kBF16:
        return LaunchQuantizeVariant<InputType::kBF16, F, kTile128>(p, stream);
      case InputType::kF16:
        return LaunchQuantizeVariant<InputType::kF16, F, kTile128>(p, stream);
      case InputType::kF32:
        return LaunchQuantizeVariant<InputType::kF32, F, kTile128>(p, stream);
    }
    return cudaErrorInvalidValue;
  };
  return p.tile_128x128 ? by_type(std::true_type{}) : by_type(std::false_type{});
}

}  // namespace quant
}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_BLOCKWISE_CUH_
