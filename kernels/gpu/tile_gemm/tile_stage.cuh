// Global -> shared-memory staging of one K block (128 reduction bytes) of the A and B tiles and
// of their scales, for the portable tile GEMM's pipeline.
//
// Shared layout of a stage: kBlockM rows of A, then kBlockN rows of B, each row the 128
// reduction bytes of one output row (A) or column (B), kPitch bytes apart; then, in the scale
// area, kBlockM fp32 A scales and kBlockN fp32 B scales of that block. Rows and columns past the
// problem read as zero (codes and scales), so the tile loop never tests bounds.
//
// A stage is filled in two halves around the block's matrix-core work: Issue() starts the global
// reads and Finish() completes the shared-memory writes. Reduction-contiguous rows go through
// cp.async on NVIDIA (Issue does it all) and through registers on AMD (Issue loads, Finish
// stores: the latency of the loads hides behind the block's MFMAs). NN's B, contiguous along N,
// goes through registers on both: each thread reads 4 reduction rows x 4 columns, transposes the
// 4x4 bytes in registers and stores 4 column rows. Scales go through registers on both.
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_TILE_STAGE_CUH_
#define KERNELD_KERNELS_GPU_TILE_GEMM_TILE_STAGE_CUH_

#include <cstdint>

#include "kernels/gpu/tile_gemm/tile_gemm_params.h"
#include "kernels/gpu/tile_gemm/tile_schedule.cuh"
#include "kernels/gpu/tile_gemm/vendor_namespace.h"
#include "kernels/gpu/vendor.h"

namespace kd {
namespace tile_gemm {
KD_TILE_GEMM_VENDOR_NS_BEGIN

// NOTE: 16 bytes of padding per 128-byte row: 8 rows read at the same offset (one ldmatrix, or
// 8 lanes of an LDS load) start 4 banks apart and so hit 32 distinct banks.
constexpr int kPitch = kBlockK + 16;

template <int kBlockM, int kBlockN, int kStages>
struct SmemLayout {
  static constexpr int kRows = kBlockM + kBlockN;
  static constexpr int kStageBytes = kRows * kPitch;
  static constexpr int kTileBytes = kStages * kStageBytes;
  static constexpr int kBytes = kTileBytes + kStages * kRows * static_cast<int>(sizeof(float));
};

#if KD_GPU_NVIDIA
// 16 bytes global -> shared without registers; `bytes` 0 writes zeros and reads nothing.
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, int bytes) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void CommitAsync() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void WaitAsync() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
#else
#if KD_GPU_AMD
// 16 bytes as one register quad (a vector value, never a memory object: as a struct, hipcc kept
// the staging registers in scratch memory).
typedef uint32_t Bytes16 __attribute__((ext_vector_type(4)));
#else
struct alignas(16) Bytes16 {  // the emulation's
  uint32_t w[4];
};
#endif
__device__ __forceinline__ void CommitAsync() {}
template <int kPending>
__device__ __forceinline__ void WaitAsync() {}
#endif

// b[0..3] are 4 reduction rows of 4 column bytes; afterwards b[c] holds column c's 4 reduction
// bytes, in reduction order.
__device__ __forceinline__ void Transpose4x4(uint32_t (&b)[4]) {
#if KD_GPU_NVIDIA
  const uint32_t t0 = __byte_perm(b[0], b[1], 0x5140), t1 = __byte_perm(b[2], b[3], 0x5140);
  const uint32_t t2 = __byte_perm(b[0], b[1], 0x7362), t3 = __byte_perm(b[2], b[3], 0x7362);
  b[0] = __byte_perm(t0, t1, 0x5410);
  b[1] = __byte_perm(t0, t1, 0x7632);
  b[2] = __byte_perm(t2, t3, 0x5410);
  b[3] = __byte_perm(t2, t3, 0x7632);
#else
  uint32_t out[4];
  for (int c = 0; c < 4; ++c) {
    const int s = 8 * c;
    out[c] = ((b[0] >> s) & 0xFFu) | (((b[1] >> s) & 0xFFu) << 8) | (((b[2] >> s) & 0xFFu) << 16) |
             (((b[3] >> s) & 0xFFu) << 24);
  }
  for (int c = 0; c < 4; ++c) b[c] = out[c];
#endif
}

// The rows [0, kRows) of a reduction-contiguous operand, 128 bytes of block kb each: row r at
// base + r * ld + kb * 128, present when r < valid. 16-byte chunks, row-major over the threads
// (8 consecutive threads read one 128-byte row).
template <int kRows, int kThreads>
struct RowsLoader {
  static constexpr int kChunks = kRows * (kBlockK / 16) / kThreads;
  static_assert(kRows * (kBlockK / 16) % kThreads == 0, "whole chunks per thread");
  const uint8_t* base;
  int64_t ld;
  int valid;
#if !KD_GPU_NVIDIA
  Bytes16 regs[kChunks];
#endif

  __device__ RowsLoader(const uint8_t* b, int64_t l, int v) : base(b), ld(l), valid(v) {}
  __device__ void Issue(uint8_t* tile, int kb) {
    const int tid = gpu::ThreadIndex();
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = i * kThreads + tid, r = c >> 3, col = (c & 7) << 4;
      const bool present = r < valid;
      const uint8_t* src = base + (present ? r * ld + kb * kBlockK + col : 0);
#if KD_GPU_NVIDIA
      CopyAsync16(tile + r * kPitch + col, src, present ? 16 : 0);
#else
      Bytes16 v = {0, 0, 0, 0};
      if (present) v = *reinterpret_cast<const Bytes16*>(src);
      regs[i] = v;
#endif
    }
  }
  __device__ void Finish(uint8_t* tile) {
#if !KD_GPU_NVIDIA
    const int tid = gpu::ThreadIndex();
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = i * kThreads + tid;
      *reinterpret_cast<Bytes16*>(tile + (c >> 3) * kPitch + ((c & 7) << 4)) = regs[i];
    }
#endif
  }
};

// NN's B: columns [0, kCols) of b (R, N) contiguous along N, block kb, into column rows of the
// tile. Column c at base + c, reduction row r at r * ld; columns at or past `valid` read zero.
// A unit is 4 reduction rows x 4 columns; 8 consecutive threads take 8 units down the reduction
// (their column-row stores then fall in 2-way-conflicting banks at worst) and the next 8 the
// next 4 columns.
template <int kCols, int kThreads>
struct ColumnsLoader {
  static constexpr int kColQuads = kCols / 4;
  static constexpr int kUnits = (kBlockK / 4) * kColQuads / kThreads;
  static_assert((kBlockK / 4) * kColQuads % kThreads == 0, "whole units per thread");
  const uint8_t* base;
  int64_t ld;
  int valid;
  uint32_t regs[kUnits][4];

  __device__ ColumnsLoader(const uint8_t* b, int64_t l, int v) : base(b), ld(l), valid(v) {}
  __device__ void Unit(int i, int& kq, int& cq) const {
    const int u = i * kThreads + gpu::ThreadIndex();
    kq = (u & 7) + ((u / (8 * kColQuads)) << 3);
    cq = (u >> 3) % kColQuads;
  }
  __device__ void Issue(uint8_t* tile, int kb) {
#pragma unroll
    for (int i = 0; i < kUnits; ++i) {
      int kq, cq;
      Unit(i, kq, cq);
      const int col = cq * 4;
      const uint8_t* src = base + (static_cast<int64_t>(kb) * kBlockK + kq * 4) * ld + col;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const uint8_t* row = src + r * ld;
        if (col + 4 <= valid) {
          regs[i][r] = *reinterpret_cast<const uint32_t*>(row);
        } else {
          uint32_t w = 0;
          for (int e = 0; e < 4; ++e) {
            if (col + e < valid) w |= static_cast<uint32_t>(row[e]) << (8 * e);
          }
          regs[i][r] = w;
        }
      }
    }
  }
  __device__ void Finish(uint8_t* tile) {
#pragma unroll
    for (int i = 0; i < kUnits; ++i) {
      int kq, cq;
      Unit(i, kq, cq);
      Transpose4x4(regs[i]);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        *reinterpret_cast<uint32_t*>(tile + (cq * 4 + c) * kPitch + kq * 4) = regs[i][c];
      }
    }
  }
};

// The fp32 scales of block kb: kBlockM of A's rows, then kBlockN of B's columns; zero past the
// problem.
template <int kBlockM, int kBlockN, int kThreads>
struct ScalesLoader {
  static constexpr int kRows = kBlockM + kBlockN;
  static constexpr int kPerThread = (kRows + kThreads - 1) / kThreads;
  const float* sa;  // &SA(row0, 0)
  int64_t sa_ld;
  int a_valid;
  const float* sb;  // SB of the tile's group
  int64_t sb_row, sb_col;
  int sb_shift;
  int n0, b_valid;
  float regs[kPerThread];

  __device__ ScalesLoader(const float* a_scales, int64_t a_ld, int a_rows, const float* b_scales,
                          int64_t b_row, int64_t b_col, int b_shift, int first_col, int b_cols)
      : sa(a_scales),
        sa_ld(a_ld),
        a_valid(a_rows),
        sb(b_scales),
        sb_row(b_row),
        sb_col(b_col),
        sb_shift(b_shift),
        n0(first_col),
        b_valid(b_cols) {}
  __device__ void Issue(int kb) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int r = i * kThreads + gpu::ThreadIndex();
      float v = 0.0f;
      if (r < kBlockM) {
        if (r < a_valid) v = sa[r * sa_ld + kb];
      } else if (r < kRows && r - kBlockM < b_valid) {
        v = sb[((n0 + r - kBlockM) >> sb_shift) * sb_row + kb * sb_col];
      }
      regs[i] = v;
    }
  }
  __device__ void Finish(float* scales) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int r = i * kThreads + gpu::ThreadIndex();
      if (r < kRows) scales[r] = regs[i];
    }
  }
};

KD_TILE_GEMM_VENDOR_NS_END
}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_TILE_STAGE_CUH_
