// Row-wise scales of Y = X: mx1x32 and jagged_rowwise (RowBlocksKernel), per_row (PerRowKernel)
// and per_tensor (TensorAmaxKernel, then TensorEncodeKernel; the amax kernel also serves
// per_tensor of Xᵀ).
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_ROWWISE_CUH_
#define KERNELD_KERNELS_GPU_QUANTIZE_ROWWISE_CUH_

#include <cstdint>

#include "kernels/gpu/gpu_kernels.h"
#include "kernels/gpu/quantize_common.cuh"
#include "kernels/gpu/quantize_group_ends.cuh"
#include "kernels/gpu/quantize_rowcol.cuh"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {

// mx1x32 (kMx) and jagged_rowwise (1x128 of X). Grid: x covers the chunks of a row, y walks
// groups of kBlockRows rows. jagged_rowwise: `valid` is the check kernel's verdict, or null when
// every CTA checks the client's ends itself (`fused_check`).
template <InputType kType, typename F, bool kMx>
__global__ void KD_LAUNCH_BOUNDS(kRowThreads)
    RowBlocksKernel(RowColKernelArgs p, bool vec_in, bool vec_out, const int32_t* valid,
                    bool fused_check) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  constexpr int kLanes = (kMx ? 32 : 128) / kVec;  // lanes sharing one block
  static_assert(kMx || kLanes >= kBlockRows, "lane i computes the scale of row i");
  if (valid != nullptr && *valid == 0) return;
  if (fused_check) {
    const Violation v = FindViolation([&](int64_t g) { return ClientEnd(p, g); }, p.groups, p.m);
    if (v.code != DeviceErrorRecord::kNone) {
      if (gpu::BlockIdxX() == 0 && gpu::BlockIdxY() == 0 && gpu::ThreadIdxX() == 0)
        ReportViolation(p, v);
      return;
    }
  }
  const int tid = gpu::ThreadIdxX();
  const int64_t cpr = p.k / kVec;  // k is a multiple of the block
  const int64_t c = static_cast<int64_t>(gpu::BlockIdxX()) * kRowThreads + tid;
  const bool active = c < cpr;
  const int lane = tid % kLanes;
  const int lane_base = (tid % gpu::kLaneGroup) / kLanes * kLanes;
  const int64_t block = c / kLanes;
  const S* input = static_cast<const S*>(p.input);
  for (int64_t r0 = static_cast<int64_t>(gpu::BlockIdxY()) * kBlockRows; r0 < p.m;
       r0 += static_cast<int64_t>(gpu::GridDimY()) * kBlockRows) {
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
        quant[i] = gpu::Shfl(own.quant, lane_base + i);
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
__global__ void KD_LAUNCH_BOUNDS(kMaxPerRowThreads)
    PerRowKernel(RowColKernelArgs p, bool vec_in, bool vec_out) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  __shared__ uint32_t warp_max[2][gpu::kLaneGroup];
  const int tid = gpu::ThreadIdxX();
  const int64_t threads = gpu::BlockDimX();
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t pass = threads * kPerRowChunks;
  int parity = 0;
  for (int64_t r = gpu::BlockIdxX(); r < p.m; r += gpu::GridDimX()) {
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
__global__ void KD_LAUNCH_BOUNDS(kRowThreads)
    TensorAmaxKernel(RowColKernelArgs p, bool vec_in, uint32_t* partials) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  __shared__ uint32_t warp_max[kRowThreads / gpu::kLaneGroup];
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t c = static_cast<int64_t>(gpu::BlockIdxX()) * kRowThreads + gpu::ThreadIdxX();
  const S* input = static_cast<const S*>(p.input);
  uint32_t m = 0;
  if (c < cpr) {
    for (int64_t r0 = static_cast<int64_t>(gpu::BlockIdxY()) * kRowsInFlight; r0 < p.m;
         r0 += static_cast<int64_t>(gpu::GridDimY()) * kRowsInFlight) {
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
  if (gpu::ThreadIdxX() == 0)
    partials[static_cast<int64_t>(gpu::BlockIdxY()) * gpu::GridDimX() + gpu::BlockIdxX()] = m;
}

// Folds the `count` partials into the scale (every CTA), writes the stored scale (CTA 0), and
// encodes, walking row groups from the last.
template <InputType kType, typename F>
__global__ void KD_LAUNCH_BOUNDS(kRowThreads)
    TensorEncodeKernel(RowColKernelArgs p, bool vec_in, bool vec_out, const uint32_t* partials,
                       int64_t count) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  __shared__ uint32_t warp_max[kRowThreads / gpu::kLaneGroup];
  uint32_t m = 0;
  for (int64_t i = gpu::ThreadIdxX(); i < count; i += kRowThreads) m = max(m, partials[i]);
  m = CtaMax(m, warp_max);
  const BlockScale sc = ComputeScale(m, F::kMax, p.eps, p.pow2_scales);
  if (gpu::BlockIdxX() == 0 && gpu::BlockIdxY() == 0 && gpu::ThreadIdxX() == 0) {
    static_cast<float*>(p.scales)[0] = sc.stored;
  }
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t c = static_cast<int64_t>(gpu::BlockIdxX()) * kRowThreads + gpu::ThreadIdxX();
  if (c >= cpr) return;
  const S* input = static_cast<const S*>(p.input);
  const int64_t groups = (p.m + kRowsInFlight - 1) / kRowsInFlight;
  for (int64_t g = gpu::BlockIdxY(); g < groups; g += gpu::GridDimY()) {
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

}  // namespace quant
}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_ROWWISE_CUH_
