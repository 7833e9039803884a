// Division of non-negative 31-bit integers by a divisor fixed at kernel start, as a multiply-high,
// an add and a shift. The GEMM's tile scheduler maps a work item to its tile with divisions by
// launch constants (the raster band and its height); as `/` each is an I2F, MUFU.RCP, F2I chain
// with fix-ups, and a tile boundary runs four to five of those mappings between the last K
// block's promotion and the next tile's first issue
// (docs/decisions/0004-gemm-scheduler-fast-division.md). Header-only and host-compilable, so that
// the CPU tests check it.
#ifndef KERNELD_KERNELS_CUDA_GEMM_FAST_DIV_H_
#define KERNELD_KERNELS_CUDA_GEMM_FAST_DIV_H_

#include <cstdint>

#if defined(__CUDACC__)
#define KD_FAST_DIV_HD __host__ __device__ __forceinline__
#else
#define KD_FAST_DIV_HD inline
#endif

namespace kd {
namespace cuda_gemm {

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31: with s = ceil(log2 d) and
// m = floor(2^32 (2^s - d) / d) + 1, n / d = (mulhi(n, m) + n) >> s, where the sum stays below
// 2^32 because n < 2^31 and mulhi(n, m) <= n.
struct FastDiv {
  uint32_t d = 1;
  uint32_t m = 1;
  uint32_t s = 0;

  KD_FAST_DIV_HD constexpr void Init(int divisor) {
    d = static_cast<uint32_t>(divisor);
    s = 0;
    while ((uint64_t{1} << s) < d) ++s;
    m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1);
  }

  KD_FAST_DIV_HD int Div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(u, m);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(u) * m) >> 32);
#endif
    return static_cast<int>((hi + u) >> s);
  }

  // n % d, given q = Div(n).
  KD_FAST_DIV_HD int Mod(int n, int q) const { return n - q * static_cast<int>(d); }
};

}  // namespace cuda_gemm
}  // namespace kd

#undef KD_FAST_DIV_HD

#endif  // KERNELD_KERNELS_CUDA_GEMM_FAST_DIV_H_
