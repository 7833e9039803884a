// The device-side check of the hardware FP8 conversion (fp8::EncodeFinite4) against fp8::Encode
// on every non-NaN float.
#include <cstdint>

#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/fp8_encode.h"
#include "kernels/gpu/gpu_kernels.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace {

// Thread t of the grid-stride loop takes the 4 consecutive patterns 4t..4t+3; NaN patterns are
// replaced by 0 and not compared (the quantizer never converts a NaN this way).
constexpr int kCheckThreads = 256;

template <typename F>
__global__ void KD_LAUNCH_BOUNDS(kCheckThreads)
    Fp8EncodeCheckKernel(unsigned long long* mismatches, uint32_t* first_bad) {
  unsigned long long bad = 0;
  const uint64_t quads = uint64_t{1} << 30;
  for (uint64_t q = gpu::BlockIdxX() * uint64_t{gpu::BlockDimX()} + gpu::ThreadIdxX(); q < quads;
       q += uint64_t{gpu::GridDimX()} * gpu::BlockDimX()) {
    float x[4];
    bool nan[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t u = static_cast<uint32_t>(q * 4 + i);
      nan[i] = (u & 0x7FFFFFFFu) > 0x7F800000u;
      x[i] = nan[i] ? 0.0f : fp8::BitsToFloat(u);
    }
#if defined(KD_HAVE_HW_FP8_CVT)
    const uint32_t codes = fp8::EncodeFinite4<F>(x[0], x[1], x[2], x[3]);
#else
    const uint32_t codes = 0xFFFFFFFFu;  // no hardware conversion: every input mismatches
#endif
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (nan[i]) continue;
      if (static_cast<uint8_t>(codes >> (8 * i)) != fp8::Encode<F>(x[i])) {
        ++bad;
        atomicMin(first_bad, static_cast<uint32_t>(q * 4 + i));
      }
    }
  }
  if (bad != 0) atomicAdd(mismatches, bad);
}

}  // namespace

cudaError_t LaunchFp8EncodeCheck(Fp8Format format, unsigned long long* mismatches,
                                 uint32_t* first_bad, cudaStream_t stream) {
  const dim3 grid(132 * 16), block(kCheckThreads);
  switch (format) {
    case Fp8Format::kE4M3FN:
      Fp8EncodeCheckKernel<fp8::E4M3FN><<<grid, block, 0, stream>>>(mismatches, first_bad);
      break;
    case Fp8Format::kE4M3FNUZ:
      Fp8EncodeCheckKernel<fp8::E4M3FNUZ><<<grid, block, 0, stream>>>(mismatches, first_bad);
      break;
    case Fp8Format::kE5M2:
      Fp8EncodeCheckKernel<fp8::E5M2><<<grid, block, 0, stream>>>(mismatches, first_bad);
      break;
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
