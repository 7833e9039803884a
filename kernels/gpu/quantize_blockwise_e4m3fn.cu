// The blockwise quantizer instantiated for e4m3fn outputs (one file per format: parallel builds).
#include "kernels/gpu/quantize_blockwise.cuh"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {

template cudaError_t LaunchBlockwiseFormat<fp8::E4M3FN>(const QuantizeParams&, cudaStream_t);

}  // namespace quant
}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
