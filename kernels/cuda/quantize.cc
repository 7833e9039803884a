// Picks the per-format instantiation of the blockwise quantizer (quantize_<format>.cu).
#include "kerneld/kernels/fp8.h"
#include "kernels/cuda/cuda_kernels.h"

namespace kd {
namespace cuda {
namespace quant {
template <typename F>
cudaError_t LaunchQuantizeFormat(const QuantizeParams& params, cudaStream_t stream);
extern template cudaError_t LaunchQuantizeFormat<fp8::E4M3FN>(const QuantizeParams&, cudaStream_t);
extern template cudaError_t LaunchQuantizeFormat<fp8::E4M3FNUZ>(const QuantizeParams&,
                                                                cudaStream_t);
extern template cudaError_t LaunchQuantizeFormat<fp8::E5M2>(const QuantizeParams&, cudaStream_t);
}  // namespace quant

cudaError_t LaunchQuantize(const QuantizeParams& params, cudaStream_t stream) {
  switch (params.format) {
    case Fp8Format::kE4M3FN:
      return quant::LaunchQuantizeFormat<fp8::E4M3FN>(params, stream);
    case Fp8Format::kE4M3FNUZ:
      return quant::LaunchQuantizeFormat<fp8::E4M3FNUZ>(params, stream);
    case Fp8Format::kE5M2:
      return quant::LaunchQuantizeFormat<fp8::E5M2>(params, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace kd
