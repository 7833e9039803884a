// The general FP8 quantizer: every granularity kernels/cpu/quantize.cc defines on Y = X or
// Y = Xᵀ (1x128, 128x1, 128x128, per_row, per_tensor, mx1x32), in three stream-ordered passes
// over device scratch, with no host synchronisation:
//   1. amax: each thread takes runs of 8 elements of Y that share one scale cell and folds their
//      |y| bits into the cell with atomicMax (|y| bits order as unsigned: NaN above Inf above
//      every finite value, as the CPU's AbsMaxBits);
//   2. scales: one thread per cell turns its amax into the quant scale (kept in scratch) and the
//      stored scale (written to the scales tensor), by the same ComputeScale as the blockwise
//      kernels, or the mx1x32 e8m0 recipe;
//   3. encode: the runs again, each element with its cell's scale, by fp8::EncodeBranchFree
//      (fp8::Encode's byte for every input).
// Runs go along C (along R for 128x1), so that a run never crosses a cell; consecutive threads
// take runs adjacent in X's contiguous dimension, so that loads coalesce.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kerneld/kernels/fp8.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/quantize_kernels.cuh"

namespace kd {
namespace cuda {
namespace quant {
namespace {

constexpr int kRun = 8;
constexpr int kGenericThreads = 256;

struct RunGeometry {
  int64_t runs_a, runs_b;  // runs along the run axis (chunks of 8), positions across it
  bool a_contiguous;       // the run axis is X's contiguous dimension
};

__device__ __forceinline__ RunGeometry Geometry(const GenericQuantizeParams& p) {
  RunGeometry g;
  const int64_t len_a = p.runs_along_rows ? p.rows : p.cols;
  g.runs_a = (len_a + kRun - 1) / kRun;
  g.runs_b = p.runs_along_rows ? p.cols : p.rows;
  // X's contiguous dimension is Y's C for Y = X and Y's R for Y = Xᵀ.
  g.a_contiguous = p.runs_along_rows == p.transposed;
  return g;
}

// Run `t`: its first element (r, c) of Y and the step between its elements.
__device__ __forceinline__ void RunStart(const GenericQuantizeParams& p, const RunGeometry& g,
                                         int64_t t, int64_t& r, int64_t& c) {
  const int64_t a = g.a_contiguous ? t % g.runs_a : t / g.runs_b;
  const int64_t b = g.a_contiguous ? t / g.runs_a : t % g.runs_b;
  r = p.runs_along_rows ? a * kRun : b;
  c = p.runs_along_rows ? b : a * kRun;
}

template <InputType kType>
__device__ __forceinline__ float LoadY(const GenericQuantizeParams& p, int64_t r, int64_t c) {
  using S = typename Input<kType>::Storage;
  const int64_t xr = p.transposed ? c : r, xc = p.transposed ? r : c;
  return Input<kType>::ToFloat(static_cast<const S*>(p.input)[xr * p.input_stride + xc]);
}

__device__ __forceinline__ int64_t CellOf(const GenericQuantizeParams& p, int64_t r, int64_t c) {
  return (r / p.cell_rows) * p.cells_per_row + c / p.cell_cols;
}

template <InputType kType>
__global__ void __launch_bounds__(kGenericThreads) GenericAmaxKernel(GenericQuantizeParams p) {
  const RunGeometry g = Geometry(p);
  const int64_t runs = g.runs_a * g.runs_b;
  int64_t cell = -1;
  uint32_t amax = 0;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < runs;
       t += int64_t{gridDim.x} * blockDim.x) {
    int64_t r, c;
    RunStart(p, g, t, r, c);
    const int64_t this_cell = CellOf(p, r, c);
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      const int64_t ri = p.runs_along_rows ? r + i : r, ci = p.runs_along_rows ? c : c + i;
      if (ri < p.rows && ci < p.cols) {
        m = max(m, fp8::FloatBits(LoadY<kType>(p, ri, ci)) & 0x7FFFFFFFu);
      }
    }
    if (this_cell != cell) {
      if (cell >= 0) atomicMax(&p.cell_amax[cell], amax);
      cell = this_cell;
      amax = m;
    } else {
      amax = max(amax, m);
    }
  }
  if (cell >= 0) atomicMax(&p.cell_amax[cell], amax);
}

template <typename F>
__global__ void __launch_bounds__(kGenericThreads) GenericScaleKernel(GenericQuantizeParams p) {
  for (int64_t cell = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; cell < p.cells;
       cell += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = cell / p.cells_per_row, j = cell % p.cells_per_row;
    const int64_t at = i * p.scale_stride_i + j * p.scale_stride_j;
    const uint32_t bits = p.cell_amax[cell];
    if (p.mx) {
      // torchao's to_mx: the e8m0 exponent S, and the multiplier 2^(127 - S).
      uint8_t s;
      if ((bits & kInfBits) == kInfBits) {
        s = 0xFF;
      } else if (!p.mx_rceil) {
        constexpr uint32_t kEmax = (F::kMaxCode >> F::kManBits) - F::kBias;
        const uint32_t e = bits >> 23;
        s = static_cast<uint8_t>(e > kEmax ? e - kEmax : 0);
      } else {
        constexpr float kInvMax = 1.0f / F::kMax;
        const uint32_t d = fp8::FloatBits(__fmul_rn(fp8::BitsToFloat(bits), kInvMax));
        const uint32_t e = d >> 23, man = d & 0x7FFFFFu;
        s = static_cast<uint8_t>(e + (e == 0 ? (man > 0x400000u) : (man != 0)));
      }
      float mult;
      if (s == 0xFF) {
        mult = fp8::BitsToFloat(kQuietNanBits);
      } else {
        const uint32_t e = 254u - s;
        mult = fp8::BitsToFloat(e == 0 ? 0x00400000u : e << 23);
      }
      p.cell_scale[cell] = mult;
      static_cast<uint8_t*>(p.scales)[at] = s;
    } else {
      const BlockScale sc = ComputeScale(bits, F::kMax, p.eps, p.pow2_scales);
      p.cell_scale[cell] = sc.quant;
      static_cast<float*>(p.scales)[at] = sc.stored;
    }
  }
}

template <InputType kType, typename F>
__global__ void __launch_bounds__(kGenericThreads) GenericEncodeKernel(GenericQuantizeParams p) {
  const RunGeometry g = Geometry(p);
  const int64_t runs = g.runs_a * g.runs_b;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < runs;
       t += int64_t{gridDim.x} * blockDim.x) {
    int64_t r, c;
    RunStart(p, g, t, r, c);
    const float q = p.cell_scale[CellOf(p, r, c)];
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      const int64_t ri = p.runs_along_rows ? r + i : r, ci = p.runs_along_rows ? c : c + i;
      if (ri < p.rows && ci < p.cols) {
        p.output[ri * p.output_stride + ci] =
            fp8::EncodeBranchFree<F>(__fmul_rn(LoadY<kType>(p, ri, ci), q));
      }
    }
  }
}

int64_t GridFor(int64_t items) {
  constexpr int64_t kMaxBlocks = 132 * 32;
  return std::max<int64_t>(1, std::min(kMaxBlocks, (items + kGenericThreads - 1) / kGenericThreads));
}

template <InputType kType, typename F>
cudaError_t LaunchGenericAs(const GenericQuantizeParams& p, cudaStream_t stream) {
  const int64_t len_a = p.runs_along_rows ? p.rows : p.cols;
  const int64_t runs = (len_a + kRun - 1) / kRun * (p.runs_along_rows ? p.cols : p.rows);
  cudaError_t err = cudaMemsetAsync(p.cell_amax, 0, p.cells * sizeof(uint32_t), stream);
  if (err != cudaSuccess) return err;
  GenericAmaxKernel<kType><<<GridFor(runs), kGenericThreads, 0, stream>>>(p);
  GenericScaleKernel<F><<<GridFor(p.cells), kGenericThreads, 0, stream>>>(p);
  GenericEncodeKernel<kType, F><<<GridFor(runs), kGenericThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename F>
cudaError_t LaunchGenericFormat(const GenericQuantizeParams& p, cudaStream_t stream) {
  switch (p.input_type) {
    case InputType::kBF16: return LaunchGenericAs<InputType::kBF16, F>(p, stream);
    case InputType::kF16: return LaunchGenericAs<InputType::kF16, F>(p, stream);
    case InputType::kF32: return LaunchGenericAs<InputType::kF32, F>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace
}  // namespace quant

cudaError_t LaunchQuantizeGeneric(const GenericQuantizeParams& p, cudaStream_t stream) {
  if (p.rows < 1 || p.cols < 1 || p.cells < 1) return cudaErrorInvalidConfiguration;
  switch (p.format) {
    case Fp8Format::kE4M3FN: return quant::LaunchGenericFormat<fp8::E4M3FN>(p, stream);
    case Fp8Format::kE4M3FNUZ: return quant::LaunchGenericFormat<fp8::E4M3FNUZ>(p, stream);
    case Fp8Format::kE5M2: return quant::LaunchGenericFormat<fp8::E5M2>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace kd
