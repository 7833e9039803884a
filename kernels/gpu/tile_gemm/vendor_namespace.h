// The namespace of the tile GEMM's vendor-built code (the kernels, their raw launcher and the
// launcher of tile_gemm.h): the AMD build's lives in kd::tile_gemm::amd, an inline namespace, so
// that one binary links it beside the NVIDIA build's, which stays in kd::tile_gemm itself (its
// symbols are those the NVIDIA tests and benchmarks name). The host-only pieces (Params,
// configs, argument rules: kerneld_tile_gemm_host) are compiled once and shared by both builds,
// in kd::tile_gemm.
//
//   namespace kd {
//   namespace tile_gemm {
//   KD_TILE_GEMM_VENDOR_NS_BEGIN
//   ...
//   KD_TILE_GEMM_VENDOR_NS_END
//   }  // namespace tile_gemm
//   }  // namespace kd
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_VENDOR_NAMESPACE_H_
#define KERNELD_KERNELS_GPU_TILE_GEMM_VENDOR_NAMESPACE_H_

#include "kernels/gpu/vendor.h"

#if KD_GPU_AMD
#define KD_TILE_GEMM_VENDOR_NS_BEGIN inline namespace amd {
#define KD_TILE_GEMM_VENDOR_NS_END }
#else
#define KD_TILE_GEMM_VENDOR_NS_BEGIN
#define KD_TILE_GEMM_VENDOR_NS_END
#endif

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_VENDOR_NAMESPACE_H_
