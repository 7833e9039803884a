// The portable tile GEMM's kernel arguments: one plain struct of device pointers, shapes and
// strides, passed by value to the kernel, shared by the host launcher and the device code of
// both vendors. No runtime or library types, so the AMD code objects need nothing else.
//
// Every layout is read as "rows of A times rows of B along the reduction", with per-128-block
// scales applied to fp32 partial sums:
//   D(i, j) (+)= sum over kb of [sum over r in block kb of A(i, r) * B(j, r)] * SA(i, kb) * SB(j,
//   kb)
// where, with g the group of the tile (0 when dense):
//   A(i, r)   = a[i * lda + r]
//   B(j, r)   = b[g * b_group + j * ldb + r]   when b_k_major (NT, TN, M-grouped NT, K-grouped TN)
//             = b[r * ldb + j]                 otherwise (NN: b is (R, N), contiguous along N)
//   SA(i, kb) = sa[i * sa_ld + kb]
//   SB(j, kb) = sb[g * sb_group + (j >> sb_shift) * sb_row + kb * sb_col]
//             (sb_shift 7 for 128x128 weight scales, 0 for 1x128 scales)
//   D(i, j)   = d[g * d_group + i * ldd + j]     (d_group 0 for M-grouped: its rows are A's)
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_PARAMS_H_
#define KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_PARAMS_H_

#include <cstdint>

namespace kd {
namespace tile_gemm {

// The family of an FP8 operand. The device fixes the exact format: NVIDIA and gfx950 read OCP
// e4m3fn / e5m2, gfx94x reads e4m3fnuz / e5m2fnuz (tile_gemm.h says which dtypes each takes).
enum class Fp8Kind : uint8_t { kE4M3 = 0, kE5M2 = 1 };

enum class Mode : uint8_t {
  kDense = 0,     // one problem: rows [0, m) of A and D
  kMGrouped = 1,  // rows of A and D split by group_ends; B, SB per group
  kKGrouped = 2,  // the reduction split by group_ends; one D per group
};

// The most groups a grouped launch takes (the kernel builds its group table in shared memory).
constexpr int kMaxGroups = 1024;

struct Params {
  Mode mode = Mode::kDense;
  Fp8Kind a_kind = Fp8Kind::kE4M3;  // the kernel is instantiated per pair
  Fp8Kind b_kind = Fp8Kind::kE4M3;
  bool b_k_major = true;
  bool d_f32 = false;       // else bf16
  bool accumulate = false;  // D += result (f32 D only)
  int m = 0;                // rows of A and D (M-grouped: all groups' rows, T)
  int n = 0;                // columns of D
  int k = 0;                // the reduction, a multiple of 128 (K-grouped: all groups' tokens)
  int num_groups = 1;
  const uint8_t* a = nullptr;
  int64_t lda = 0;
  const float* sa = nullptr;
  int64_t sa_ld = 0;
  const uint8_t* b = nullptr;
  int64_t ldb = 0;
  int64_t b_group = 0;
  const float* sb = nullptr;
  int64_t sb_row = 0;
  int64_t sb_col = 0;
  int64_t sb_group = 0;
  int sb_shift = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  int64_t d_group = 0;
  // Grouped modes: the end of each group (rows for M-grouped, tokens for K-grouped), i32 or i64,
  // read by the kernel and clamped into [previous end, rows]; K-grouped ends are then rounded
  // down to a 128-block.
  const void* group_ends = nullptr;
  bool group_ends_i64 = false;
};

// A kernel instantiation's tile: block_m x block_n outputs per CTA, `stages` K blocks of 128 in
// flight in shared memory.
struct TileShape {
  int block_m = 0;
  int block_n = 0;
  int stages = 0;
  bool operator==(const TileShape& o) const {
    return block_m == o.block_m && block_n == o.block_n && stages == o.stages;
  }
  bool operator!=(const TileShape& o) const { return !(*this == o); }
};

}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_PARAMS_H_
