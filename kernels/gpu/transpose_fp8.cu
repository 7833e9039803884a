// 128x128-byte tiled transpose (see transpose_fp8.h). Each CTA of 256 threads moves one tile:
//   load:  every thread reads four 16-byte chunks of source rows (a row of the tile is 8 chunks,
//          so consecutive threads read consecutive 128-byte lines) into shared memory;
//   store: thread t owns source rows 16*(t%8) .. +15 at output rows 4*(t/8) .. +3. It reads one
//          32-bit word (4 output rows' bytes) from each of its 16 source rows, transposes the
//          four 4x4 byte blocks in registers (byte_perm), and writes 16 bytes to each of its 4
//          output rows; 8 neighbouring threads fill a whole 128-byte output line.
// Shared memory is a 128 x 32-word tile whose 4-word groups are XOR-swizzled by the row's 16-row
// band, so both the 16-byte stores of the load phase and the word reads of the store phase hit
// 32 distinct banks.
#include "kernels/gpu/transpose_fp8.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace {

constexpr int kTile = 128;  // bytes per tile side
constexpr int kThreads = 256;
constexpr int kChunks = kTile / 16;                          // 16-byte chunks per tile row
constexpr int kWords = kTile / 4;                            // 32-bit words per tile row
constexpr int kRowsPerThread = kTile / (kThreads / kWords);  // 16 source rows per thread

// Word column `w` of tile row `r` in the swizzled tile.
__device__ __forceinline__ int SwizzledWord(int r, int w) {
  return r * kWords + (w ^ ((r >> 4) << 2));
}

// Transposes the 4x4 byte block held in rows x0..x3 (byte j of x_i is element (i, j)): returns
// in y_j the bytes (0, j), (1, j), (2, j), (3, j).
__device__ __forceinline__ void Transpose4x4(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3,
                                             uint32_t y[4]) {
  const uint32_t lo01 = __byte_perm(x0, x1, 0x5140), hi01 = __byte_perm(x0, x1, 0x7362);
  const uint32_t lo23 = __byte_perm(x2, x3, 0x5140), hi23 = __byte_perm(x2, x3, 0x7362);
  y[0] = __byte_perm(lo01, lo23, 0x5410);
  y[1] = __byte_perm(lo01, lo23, 0x7632);
  y[2] = __byte_perm(hi01, hi23, 0x5410);
  y[3] = __byte_perm(hi01, hi23, 0x7632);
}

__global__ void KD_LAUNCH_BOUNDS(kThreads) TransposeFp8Kernel(const TransposeFp8Params p) {
  __shared__ __align__(16) uint32_t tile[kTile * kWords];
  const int64_t col_tiles = (p.cols + kTile - 1) / kTile;
  const int64_t row_tile = gpu::BlockIdxX() / col_tiles, col_tile = gpu::BlockIdxX() % col_tiles;
  const int64_t r0 = row_tile * kTile, c0 = col_tile * kTile;
  const int64_t cols_here = p.cols - c0 < kTile ? p.cols - c0 : kTile;
  const int tid = gpu::ThreadIdxX();

  if (tid == 0 && p.src_scales != nullptr) {
    p.dst_scales[col_tile * (p.rows / kTile) + row_tile] =
        p.src_scales[row_tile * p.src_scales_stride + col_tile];
  }

#pragma unroll
  for (int i = 0; i < kTile * kChunks / kThreads; ++i) {
    const int chunk = tid + i * kThreads;
    const int r = chunk / kChunks, c = chunk % kChunks;
    const uint8_t* src = p.src + (r0 + r) * p.src_stride + c0 + c * 16;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (c * 16 + 16 <= cols_here) {
      v = __ldg(reinterpret_cast<const uint4*>(src));
    } else if (c * 16 < cols_here) {
      // The ragged last chunk: byte loads, so nothing past the row's last column is read.
      uint64_t lo = 0, hi = 0;
      for (int b = 0; b < cols_here - c * 16; ++b) {
        const uint64_t byte = src[b];
        if (b < 8)
          lo |= byte << (8 * b);
        else
          hi |= byte << (8 * (b - 8));
      }
      v = make_uint4(static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),
                     static_cast<uint32_t>(hi), static_cast<uint32_t>(hi >> 32));
    }
    *reinterpret_cast<uint4*>(&tile[SwizzledWord(r, c * 4)]) = v;
  }
  gpu::SyncThreads();

  const int band = tid % (kThreads / kWords);  // 16-row band of the source tile
  const int w = tid / (kThreads / kWords);     // word column: output rows 4w .. 4w+3
  uint32_t out[4][4];                          // [output row j][word g of its 16 bytes]
#pragma unroll
  for (int g = 0; g < kRowsPerThread / 4; ++g) {
    const int r = band * kRowsPerThread + 4 * g;
    uint32_t y[4];
    Transpose4x4(tile[SwizzledWord(r, w)], tile[SwizzledWord(r + 1, w)],
                 tile[SwizzledWord(r + 2, w)], tile[SwizzledWord(r + 3, w)], y);
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j][g] = y[j];
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t col = c0 + 4 * w + j;
    if (col < p.cols) {
      uint8_t* dst = p.dst + col * p.rows + r0 + band * kRowsPerThread;
      *reinterpret_cast<uint4*>(dst) = make_uint4(out[j][0], out[j][1], out[j][2], out[j][3]);
    }
  }
}

}  // namespace

cudaError_t LaunchTransposeFp8(const TransposeFp8Params& p, cudaStream_t stream) {
  const bool scales_ok = (p.src_scales == nullptr) == (p.dst_scales == nullptr);
  if (p.src == nullptr || p.dst == nullptr || p.rows <= 0 || p.cols <= 0 || p.rows % kTile != 0 ||
      p.src_stride < p.cols || p.src_stride % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.src) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.dst) % 16 != 0 || !scales_ok) {
    return cudaErrorInvalidValue;
  }
  const int64_t tiles = (p.rows / kTile) * ((p.cols + kTile - 1) / kTile);
  if (tiles > INT32_MAX) return cudaErrorInvalidValue;
  TransposeFp8Kernel<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
