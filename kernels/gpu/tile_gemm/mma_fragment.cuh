// The matrix-core fragment the portable tile loop is written over: one warp (NVIDIA, 32 lanes)
// or wavefront (AMD, 64 lanes) multiplies a kM x kK tile of A by a kK x kN tile of B into
// kAccs fp32 accumulators per lane. The fragment owns the lane mapping: which bytes of the
// shared-memory tiles each lane loads and which output element each accumulator is, so the loop
// never assumes a lane count.
//
//   Fragment::kLanes, kM, kN, kK, kAccs
//   FragA, FragB, Acc          operand registers and the fp32 accumulators (Acc: operator[])
//   LoadA(f, tile, pitch, lane)  rows [0, kM) x reduction [0, kK) of a shared-memory tile whose
//                                rows (reduction-contiguous) are `pitch` bytes apart
//   LoadB(f, tile, pitch, lane)  columns [0, kN) x reduction [0, kK), the same row layout (one
//                                row per output column)
//   Run(acc, a, b)             acc += A * B on the matrix cores
//   AccRow(lane, i), AccCol(lane, i)  the output element of accumulator i of `lane`
//
// NVIDIA (sm_89, sm_90): MmaSyncFragment, two mma.sync.m16n8k32 side by side, a 16x16x32
// fragment, operands through ldmatrix. AMD (gfx94x, gfx950): MfmaFragment, two
// v_mfma_f32_32x32x16 FP8 along K, a 32x32x32 fragment; each lane loads 16 reduction-contiguous
// bytes and feeds 8 to each instruction (A and B use the same byte-to-instruction split, so the
// sum over the 32 is the same). The instructions themselves come from an Isa policy (the
// hardware's here; the tests substitute an emulation written from the ISA documents), and
// MmaFp8 names the vendor's fragment.
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_MMA_FRAGMENT_CUH_
#define KERNELD_KERNELS_GPU_TILE_GEMM_MMA_FRAGMENT_CUH_

#include <cstdint>

#include "kernels/gpu/tile_gemm/tile_gemm_params.h"
#include "kernels/gpu/tile_gemm/vendor_namespace.h"
#include "kernels/gpu/vendor.h"

namespace kd {
namespace tile_gemm {
KD_TILE_GEMM_VENDOR_NS_BEGIN

// ---- NVIDIA: mma.sync ------------------------------------------------------------------------

#if KD_GPU_NVIDIA
struct MmaSyncIsa {
  // ldmatrix.x4: lanes 8j..8j+7 give the row addresses of 8x16-byte matrix j; lane l receives,
  // in register j, bytes 4(l%4)..4(l%4)+3 of row l/4 of matrix j.
  static __device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const uint8_t* p) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  // c (+)= A (16x32, registers a) * B (32x8, registers b0 b1), PTX's m16n8k32 FP8 layouts.
  template <Fp8Kind kA, Fp8Kind kB>
  static __device__ __forceinline__ void Mma16832(float* c, const uint32_t (&a)[4], uint32_t b0,
                                                  uint32_t b1) {
#define KD_MMA_FP8(TA, TB)                                                              \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TA "." TB                       \
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
    if constexpr (kA == Fp8Kind::kE4M3 && kB == Fp8Kind::kE4M3) {
      KD_MMA_FP8("e4m3", "e4m3");
    } else if constexpr (kA == Fp8Kind::kE4M3) {
      KD_MMA_FP8("e4m3", "e5m2");
    } else if constexpr (kB == Fp8Kind::kE4M3) {
      KD_MMA_FP8("e5m2", "e4m3");
    } else {
      KD_MMA_FP8("e5m2", "e5m2");
    }
#undef KD_MMA_FP8
  }
};
#endif

template <Fp8Kind kA, Fp8Kind kB, typename Isa>
struct MmaSyncFragment {
  static constexpr int kLanes = 32;
  static constexpr int kM = 16, kN = 16, kK = 32;
  static constexpr int kAccs = 8;
  struct FragA {
    uint32_t r[4];  // mma's a0..a3
  };
  struct FragB {
    uint32_t r[4];  // {b0, b1} of columns 0-7, then of columns 8-15
  };
  struct Acc {
    float v[kAccs];
    __device__ __forceinline__ float& operator[](int i) { return v[i]; }
  };

  // A: matrix j covers rows 8(j&1).., bytes 16(j>>1)..: registers a0..a3 in mma's order (a0 rows
  // 0-7 and a1 rows 8-15 of reduction bytes 0-15, a2 and a3 of bytes 16-31).
  static __device__ __forceinline__ void LoadA(FragA& f, const uint8_t* tile, int pitch, int lane) {
    const int j = lane >> 3;
    Isa::LdMatrixX4(f.r, tile + ((lane & 7) + ((j & 1) << 3)) * pitch + ((j >> 1) << 4));
  }
  // B: matrix j covers columns 8(j>>1).., bytes 16(j&1)..: {b0, b1} of each 8-column half.
  static __device__ __forceinline__ void LoadB(FragB& f, const uint8_t* tile, int pitch, int lane) {
    const int j = lane >> 3;
    Isa::LdMatrixX4(f.r, tile + ((lane & 7) + ((j >> 1) << 3)) * pitch + ((j & 1) << 4));
  }
  static __device__ __forceinline__ void Run(Acc& acc, const FragA& a, const FragB& b) {
    Isa::template Mma16832<kA, kB>(acc.v, a.r, b.r[0], b.r[1]);
    Isa::template Mma16832<kA, kB>(acc.v + 4, a.r, b.r[2], b.r[3]);
  }
  // mma's C layout: c0, c1 at row l/4, columns 2(l%4) and +1; c2, c3 eight rows below; the
  // second instruction's four 8 columns to the right.
  static __device__ __forceinline__ int AccRow(int lane, int i) {
    return (lane >> 2) + ((i & 2) << 2);
  }
  static __device__ __forceinline__ int AccCol(int lane, int i) {
    return ((i >> 2) << 3) + ((lane & 3) << 1) + (i & 1);
  }
};

// ---- AMD: MFMA -------------------------------------------------------------------------------

#if KD_GPU_AMD
typedef float MfmaAcc16 __attribute__((ext_vector_type(16)));
#elif !KD_GPU_NVIDIA
struct MfmaAcc16 {  // the emulation's (a host compiler need not know clang's vector types)
  float v[16];
  float& operator[](int i) { return v[i]; }
};
#endif

#if KD_GPU_AMD
struct MfmaIsa {
  // D = A (32x16) * B (16x32) + C; gfx94x reads fp8 as e4m3fnuz and bf8 as e5m2fnuz, gfx950 the
  // same opcodes as OCP e4m3fn and e5m2.
  template <Fp8Kind kA, Fp8Kind kB>
  static __device__ __forceinline__ MfmaAcc16 Mfma32x32x16(long a, long b, MfmaAcc16 c) {
    if constexpr (kA == Fp8Kind::kE4M3 && kB == Fp8Kind::kE4M3) {
      return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a, b, c, 0, 0, 0);
    } else if constexpr (kA == Fp8Kind::kE4M3) {
      return __builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8(a, b, c, 0, 0, 0);
    } else if constexpr (kB == Fp8Kind::kE4M3) {
      return __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8(a, b, c, 0, 0, 0);
    } else {
      return __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8(a, b, c, 0, 0, 0);
    }
  }
};
#endif

#if !KD_GPU_NVIDIA
template <Fp8Kind kA, Fp8Kind kB, typename Isa>
struct MfmaFragment {
  static constexpr int kLanes = 64;
  static constexpr int kM = 32, kN = 32, kK = 32;
  static constexpr int kAccs = 16;
  using Acc = MfmaAcc16;
  struct FragA {
    long lo, hi;  // reduction bytes 16(l/32) + 0..7 and + 8..15 of the lane's row
  };
  using FragB = FragA;

  // MFMA 32x32x16 FP8 operands: lane l holds row (A) or column (B) l%32, reduction slots
  // 8(l/32)..+7. Here slot 8h+e of the first instruction is byte 16h+e of the 32, and of the
  // second byte 16h+8+e, for A and B alike.
  static __device__ __forceinline__ void LoadA(FragA& f, const uint8_t* tile, int pitch, int lane) {
    const long* p = reinterpret_cast<const long*>(tile + (lane & 31) * pitch + ((lane >> 5) << 4));
    f.lo = p[0];
    f.hi = p[1];
  }
  static __device__ __forceinline__ void LoadB(FragB& f, const uint8_t* tile, int pitch, int lane) {
    LoadA(f, tile, pitch, lane);
  }
  static __device__ __forceinline__ void Run(Acc& acc, const FragA& a, const FragB& b) {
    acc = Isa::template Mfma32x32x16<kA, kB>(a.lo, b.lo, acc);
    acc = Isa::template Mfma32x32x16<kA, kB>(a.hi, b.hi, acc);
  }
  // MFMA 32x32 C layout: lane l holds column l%32; accumulator i is row 8(i/4) + 4(l/32) + i%4.
  static __device__ __forceinline__ int AccRow(int lane, int i) {
    return ((i >> 2) << 3) + ((lane >> 5) << 2) + (i & 3);
  }
  static __device__ __forceinline__ int AccCol(int lane, int i) { return lane & 31; }
};
#endif

#if KD_GPU_NVIDIA
template <Fp8Kind kA, Fp8Kind kB>
using MmaFp8 = MmaSyncFragment<kA, kB, MmaSyncIsa>;
#elif KD_GPU_AMD
template <Fp8Kind kA, Fp8Kind kB>
using MmaFp8 = MfmaFragment<kA, kB, MfmaIsa>;
#endif

KD_TILE_GEMM_VENDOR_NS_END
}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_MMA_FRAGMENT_CUH_
