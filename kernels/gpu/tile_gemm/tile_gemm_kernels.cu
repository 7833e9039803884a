// The portable tile GEMM's instantiations and raw launcher (tile_gemm_launch.h). The same file is
// compiled by nvcc (sm_89, sm_90a) and, as a code-object-only build, by hipcc / clang for gfx9.
#include <cstdint>

#include "kernels/gpu/tile_gemm/tile_gemm_kernel.cuh"
#include "kernels/gpu/tile_gemm/tile_gemm_launch.h"
#include "kernels/gpu/tile_gemm/vendor_namespace.h"

namespace kd {
namespace tile_gemm {
KD_TILE_GEMM_VENDOR_NS_BEGIN
namespace {

// X(block_m, block_n, stages, warps_m, warps_n): the tile shapes each vendor builds. NVIDIA: eight
// warps of 16x16 fragments, 64x32 sub-tiles on 128x128 and 32x32 on the narrower tiles (with
// four warps there, the 128 threads each held twice the staging registers and ptxas spilled);
// AMD: four wavefronts of 32x32 fragments, at most 64 KB of LDS per workgroup on gfx942, so two
// stages of at most 192 tile rows.
#if KD_GPU_NVIDIA
#define KD_TILE_SHAPES(X) \
  X(128, 128, 3, 2, 4)    \
  X(128, 128, 2, 2, 4)    \
  X(64, 128, 3, 2, 4)     \
  X(128, 64, 3, 4, 2)
#else
#define KD_TILE_SHAPES(X) \
  X(128, 64, 2, 2, 2)     \
  X(64, 128, 2, 2, 2)     \
  X(64, 64, 2, 2, 2)
#endif

dim3 Grid(const Params& p, int block_m, int block_n) {
  const int num_n = (p.n + block_n - 1) / block_n;
  const int num_m = (p.m + block_m - 1) / block_m;
  switch (p.mode) {
    case Mode::kKGrouped:
      return dim3(num_m * num_n, p.num_groups);
    case Mode::kMGrouped:
      // Each group adds at most one partial tile row to ceil(T / block_m).
      return dim3((num_m + p.num_groups) * num_n);
    default:
      return dim3(num_m * num_n);
  }
}

template <int kBM, int kBN, int kS, int kWM, int kWN, bool kKMajor, Fp8Kind kA, Fp8Kind kB>
cudaError_t LaunchOne(const Params& p, cudaStream_t stream) {
  using Mma = MmaFp8<kA, kB>;
  using T = TileTraits<Mma, kBM, kBN, kS, kWM, kWN>;
  auto* kernel = &TileGemmKernel<Mma, kBM, kBN, kS, kWM, kWN, kKMajor>;
  const int smem = T::Smem::kBytes;
  const cudaError_t set = cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (set != cudaSuccess) return set;
  kernel<<<Grid(p, kBM, kBN), T::kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <int kBM, int kBN, int kS, int kWM, int kWN, bool kKMajor>
cudaError_t LaunchLayout(const Params& p, Fp8Kind a, Fp8Kind b, cudaStream_t stream) {
  constexpr Fp8Kind kE4 = Fp8Kind::kE4M3, kE5 = Fp8Kind::kE5M2;
  if (a == kE4 && b == kE4) return LaunchOne<kBM, kBN, kS, kWM, kWN, kKMajor, kE4, kE4>(p, stream);
  if (a == kE4) return LaunchOne<kBM, kBN, kS, kWM, kWN, kKMajor, kE4, kE5>(p, stream);
  if (b == kE4) return LaunchOne<kBM, kBN, kS, kWM, kWN, kKMajor, kE5, kE4>(p, stream);
  return LaunchOne<kBM, kBN, kS, kWM, kWN, kKMajor, kE5, kE5>(p, stream);
}

template <int kBM, int kBN, int kS, int kWM, int kWN>
cudaError_t LaunchShape(const Params& p, Fp8Kind a, Fp8Kind b, cudaStream_t stream) {
  return p.b_k_major ? LaunchLayout<kBM, kBN, kS, kWM, kWN, true>(p, a, b, stream)
                     : LaunchLayout<kBM, kBN, kS, kWM, kWN, false>(p, a, b, stream);
}

template <int kBM, int kBN, int kS, int kWM, int kWN>
using TraitsOf = TileTraits<MmaFp8<Fp8Kind::kE4M3, Fp8Kind::kE4M3>, kBM, kBN, kS, kWM, kWN>;

}  // namespace

bool TileShapeBuilt(const TileShape& shape) { return TileShapeThreads(shape) > 0; }

int TileShapeSmemBytes(const TileShape& s) {
#define KD_SMEM(BM, BN, S, WM, WN) \
  if (s == TileShape{BM, BN, S}) return TraitsOf<BM, BN, S, WM, WN>::Smem::kBytes;
  KD_TILE_SHAPES(KD_SMEM)
#undef KD_SMEM
  return 0;
}

int TileShapeThreads(const TileShape& s) {
#define KD_THREADS(BM, BN, S, WM, WN) \
  if (s == TileShape{BM, BN, S}) return TraitsOf<BM, BN, S, WM, WN>::kThreads;
  KD_TILE_SHAPES(KD_THREADS)
#undef KD_THREADS
  return 0;
}

cudaError_t LaunchTileGemmKernel(const Params& p, const TileShape& s, cudaStream_t stream) {
#define KD_LAUNCH(BM, BN, S, WM, WN) \
  if (s == TileShape{BM, BN, S})     \
    return LaunchShape<BM, BN, S, WM, WN>(p, p.a_kind, p.b_kind, stream);
  KD_TILE_SHAPES(KD_LAUNCH)
#undef KD_LAUNCH
  return cudaErrorInvalidValue;
}

cudaError_t TileGemmKernelVersions(const TileShape& s, int* ptx_version, int* binary_version) {
#if KD_GPU_NVIDIA
  cudaFuncAttributes attr{};
#define KD_VERSIONS(BM, BN, S, WM, WN)                                                        \
  if (s == TileShape{BM, BN, S}) {                                                            \
    using Mma = MmaFp8<Fp8Kind::kE4M3, Fp8Kind::kE4M3>;                                       \
    const cudaError_t err = cudaFuncGetAttributes(                                            \
        &attr, reinterpret_cast<const void*>(&TileGemmKernel<Mma, BM, BN, S, WM, WN, true>)); \
    *ptx_version = attr.ptxVersion;                                                           \
    *binary_version = attr.binaryVersion;                                                     \
    return err;                                                                               \
  }
  KD_TILE_SHAPES(KD_VERSIONS)
#undef KD_VERSIONS
#endif
  return cudaErrorInvalidValue;
}

KD_TILE_GEMM_VENDOR_NS_END
}  // namespace tile_gemm
}  // namespace kd
