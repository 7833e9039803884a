// The blockwise quantizer instantiated for e4m3fn outputs (one file per format: parallel builds).
#include "kernels/gpu/quantize_blockwise.cuh"

namespace kd {
namespace cuda {
namespace quant {

template cudaError_t LaunchBlockwiseFormat<fp8::E4M3FN>(const QuantizeParams&, cudaStream_t);

}  // namespace quant
}  // namespace cuda
}  // namespace kd
