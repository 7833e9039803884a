// The epilogue of the FP8 GEMM. Each consumer warpgroup writes its 64 x kBlockN fp32 accumulator
// through 8 KB shared-memory buffers of its own, one 128-byte-wide column slice at a time (64 bf16
// or 32 f32 columns). The 16-byte chunks of a buffer row are XOR-swizzled by the row so that the
// fragment writes are free of bank conflicts. A bf16 slice of a dense or M-grouped problem
// (KernelParams::d_tma) leaves through a TMA bulk-tensor store that one thread issues, and the
// warpgroup goes on to its next K block while the store drains: the bf16 chunk swizzle is TMA's
// 128-byte swizzle. Otherwise the warpgroup reads the slice back row-wise and each warp stores
// whole 128-byte row segments with 16-byte accesses (the row reads are conflict-free too); those
// stores hold the warpgroup until the memory system takes them.
#ifndef KERNELD_KERNELS_CUDA_GEMM_EPILOGUE_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_EPILOGUE_CUH_

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/ptx_barrier.cuh"
#include "kernels/cuda/gemm/ptx_tma.cuh"
#include "kernels/cuda/gemm/ptx_utils.cuh"
#include "kernels/cuda/gemm/smem_layout.cuh"
#include "kernels/cuda/gemm/tile_scheduler.cuh"
#include "kernels/cuda/gemm/trace.cuh"

namespace kd {
namespace cuda_gemm {

// One consumer warpgroup's epilogue state.
struct EpiState {
  uint32_t buf = 0;                    // shared address of its first buffer
  const CUtensorMap* map_d = nullptr;  // D as 64 x 64 bf16 boxes (KernelParams::d_tma)
  uint32_t seq = 0;                    // bulk stores issued; the next writes buffer seq % n
};

// Chunk swizzle: bf16 fragments put 8 rows of one chunk in a warp access (4-byte stores), f32
// fragments 4 rows of two chunks in each half-warp access (8-byte stores).
__device__ __forceinline__ int EpiSwizzle(int row, bool f32) {
  return f32 ? 2 * (row % 4) : row % 8;
}

// Four f32 or eight bf16 values of D at (row, col): one 16-byte access where D's rows allow it and
// the chunk is whole, else element by element up to column p.n; f32 adds D's value when
// accumulating.
__device__ __forceinline__ void StoreVec16(const KernelParams& p, char* d_base, int row, int col,
                                           const uint4& v) {
  if (p.d_f32) {
    float* d = reinterpret_cast<float*>(d_base) + static_cast<int64_t>(row) * p.d_row + col;
    float x[4] = {__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                  __uint_as_float(v.w)};
    if (p.d_vec_aligned && col + 4 <= p.n) {
      if (p.accumulate) {
        const float4 old = *reinterpret_cast<const float4*>(d);
        x[0] += old.x;
        x[1] += old.y;
        x[2] += old.z;
        x[3] += old.w;
      }
      *reinterpret_cast<float4*>(d) = make_float4(x[0], x[1], x[2], x[3]);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (col + e < p.n) d[e] = p.accumulate ? d[e] + x[e] : x[e];
      }
    }
  } else {
    uint16_t* d = reinterpret_cast<uint16_t*>(d_base) + static_cast<int64_t>(row) * p.d_row + col;
    if (p.d_vec_aligned && col + 8 <= p.n) {
      *reinterpret_cast<uint4*>(d) = v;
    } else {
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (col + e < p.n) d[e] = static_cast<uint16_t>(w[e / 2] >> (16 * (e % 2)));
      }
    }
  }
}

// Columns of one bf16 slice of the epilogue: 64 (a 128-byte buffer row), or the whole tile where
// it is narrower (the 32-column tile fills half of each row).
template <int kBlockN>
constexpr int kBf16SliceCols = kBlockN < 64 ? kBlockN : 64;

// Writes column slice `q` (kBf16SliceCols columns) of this thread's fragment of the warpgroup's
// 64 x kBlockN accumulator to the bf16 buffer at shared address `buf` (rows of 128 bytes, chunks
// swizzled by EpiSwizzle); `frag_row` is the thread's first fragment row (and frag_row + 8).
template <int kBlockN>
__device__ __forceinline__ void WriteBf16Slice(const float (&acc)[kBlockN / 2], int q, uint32_t buf,
                                               int frag_row, int lane) {
#pragma unroll
  for (int jj = 0; jj < kBf16SliceCols<kBlockN> / 8; ++jj) {
    const int j = 8 * q + jj;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = frag_row + 8 * h;
      const __nv_bfloat162 pair = __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      const uint32_t bits = *reinterpret_cast<const uint32_t*>(&pair);
      const uint32_t addr =
          buf + r * kEpiRowBytes + (jj ^ EpiSwizzle(r, false)) * 16 + 4 * (lane % 4);
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(bits) : "memory");
    }
  }
}

// Stores this warpgroup's 64 rows of the tile (`acc` in the m64nN fragment layout) to D, rows
// at or past tile.row_end and columns at or past p.n left alone. `epi` holds the warpgroup's
// buffers (kEpiBuffers of kEpiBytes for the TMA-store path, 0 for a tile built without it);
// `tid` its thread index 0..127; `bar_id` its named barrier.
template <int kBlockN, int kEpiBuffers>
__device__ __forceinline__ void StoreTile(const KernelParams& p, const Tile& tile, int consumer,
                                          float (&acc)[kBlockN / 2], EpiState& epi, int tid,
                                          int bar_id, Tracer& tr) {
  const uint32_t buf_addr = epi.buf;
  char* d_base = static_cast<char*>(p.d);
  if (p.mode == KernelMode::kKGrouped) d_base += tile.group * p.d_group * (p.d_f32 ? 4 : 2);
  const int warp = tid / 32, lane = tid % 32;
  const int frag_row = warp * 16 + lane / 4;  // and frag_row + 8
  const int row0 = tile.m0 + consumer * 64;
  // Reads: 4 rows of 8 chunks per warp instruction, 4 instructions per pass.
  const int read_chunk = tid % 8;
  const int read_row = tid / 8;  // + 16 * i
  if constexpr (kEpiBuffers > 0) {
    if (p.d_tma && Uniform(p.mode == KernelMode::kDense || row0 + 64 <= tile.row_end)) {
      // (M-grouped: a slice whose rows all belong to the tile's group; the map would not stop at
      // the group's end.)
#pragma unroll
      for (int q = 0; q < kBlockN / 64; ++q) {
        const uint32_t buf = buf_addr + (epi.seq % kEpiBuffers) * kEpiBytes;
        // The bulk store that last read this buffer (kEpiBuffers stores ago) is done with it; the
        // barrier then holds the warpgroup's writes until thread 0 has seen that.
        BulkWaitRead<kEpiBuffers - 1>(tid == 0);
        tr.Mark(7 + 3 * q);
        NamedBarrierSync(bar_id, 128);
        tr.Mark(8 + 3 * q);
        WriteBf16Slice<kBlockN>(acc, q, buf, frag_row, lane);
        // Each thread's writes are made visible to the async proxy before the store reads them.
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        NamedBarrierSync(bar_id, 128);
        tr.Mark(9 + 3 * q);
        // Rows past D's end (the last M tile, or a cluster's tile past it) and columns past N are
        // clipped by the tensor map.
        TmaStore2d(epi.map_d, buf, tile.n0 + 64 * q, row0, tid == 0);
        ++epi.seq;
      }
      return;
    }
    // A slice that keeps the 16-byte stores (M-grouped, across its group's end) writes the first
    // buffer: no bulk store of an earlier slice may still be reading it.
    if (p.d_tma) BulkWaitRead<0>(tid == 0);
  }
  if (p.d_f32) {
#pragma unroll
    for (int q = 0; q < kBlockN / 32; ++q) {
      NamedBarrierSync(bar_id, 128);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const int j = 4 * q + jj;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = frag_row + 8 * h;
          const int chunk = (2 * jj + (lane % 4) / 2) ^ EpiSwizzle(r, true);
          const uint32_t addr = buf_addr + r * kEpiRowBytes + chunk * 16 + 8 * (lane % 2);
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(acc[4 * j + 2 * h]),
                       "f"(acc[4 * j + 2 * h + 1])
                       : "memory");
        }
      }
      NamedBarrierSync(bar_id, 128);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = read_row + 16 * i;
        const int row = row0 + r;
        uint4 v;
        const uint32_t addr = buf_addr + r * kEpiRowBytes + (read_chunk ^ EpiSwizzle(r, true)) * 16;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(addr)
                     : "memory");
        const int col = tile.n0 + 32 * q + 4 * read_chunk;
        if (row < tile.row_end && col < p.n) StoreVec16(p, d_base, row, col, v);
      }
    }
  } else {
    // Reads: kChunks 16-byte chunks per slice row, 128 / kChunks rows per warpgroup instruction.
    constexpr int kSliceCols = kBf16SliceCols<kBlockN>;
    constexpr int kChunks = kSliceCols / 8;
    constexpr int kRowsPerPass = 128 / kChunks;
    const int chunk = tid % kChunks;
    const int chunk_row = tid / kChunks;  // + kRowsPerPass * i
#pragma unroll
    for (int q = 0; q < kBlockN / kSliceCols; ++q) {
      NamedBarrierSync(bar_id, 128);
      WriteBf16Slice<kBlockN>(acc, q, buf_addr, frag_row, lane);
      NamedBarrierSync(bar_id, 128);
#pragma unroll
      for (int i = 0; i < 64 / kRowsPerPass; ++i) {
        const int r = chunk_row + kRowsPerPass * i;
        const int row = row0 + r;
        uint4 v;
        const uint32_t addr = buf_addr + r * kEpiRowBytes + (chunk ^ EpiSwizzle(r, false)) * 16;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(addr)
                     : "memory");
        const int col = tile.n0 + kSliceCols * q + 8 * chunk;
        if (row < tile.row_end && col < p.n) StoreVec16(p, d_base, row, col, v);
      }
    }
  }
}

// Writes zeros over this warpgroup's 64 rows of the tile (a tile with no K block).
template <int kBlockN>
__device__ __forceinline__ void StoreZeroTile(const KernelParams& p, const Tile& tile, int consumer,
                                              int tid) {
  char* d_base = static_cast<char*>(p.d);
  if (p.mode == KernelMode::kKGrouped) d_base += tile.group * p.d_group * (p.d_f32 ? 4 : 2);
  const int per_chunk = p.d_f32 ? 4 : 8;  // columns per 16 bytes
  const int chunks = kBlockN / per_chunk;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int i = tid; i < 64 * chunks; i += 128) {
    const int row = tile.m0 + consumer * 64 + i / chunks;
    const int col = tile.n0 + (i % chunks) * per_chunk;
    if (row < tile.row_end && col < p.n) StoreVec16(p, d_base, row, col, zero);
  }
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_EPILOGUE_CUH_
