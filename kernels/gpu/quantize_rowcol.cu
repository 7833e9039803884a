// The row/column family's launchers: per_row, per_tensor and mx1x32 of Y = X and of Y = Xᵀ, and
// the jagged granularities (quantize_params.h), the recipes of kernels/cpu/quantize.cc, bit for
// bit. Every kernel moves 16-byte chunks of X (8 bf16/f16 or 4 f32 elements; element accesses
// where a row is not 16-byte aligned or a chunk is partial) and keeps them in registers between
// the amax and the encode:
//   mx1x32, jagged_rowwise  one pass. A CTA of kRowThreads threads takes kRowThreads consecutive
//                           chunks of kBlockRows rows (a 1x32 or 1x128 block is 4 or 16 adjacent
//                           lanes, which reduce its amax by shuffles), so a warp reads 512
//                           contiguous bytes of a row, as a row copy does (quantize_rowwise.cuh).
//   per_row                 one pass: a CTA holds a whole row (up to 512 threads x kPerRowChunks
//                           chunks, 32 KB) and reduces its amax across the CTA; longer rows read
//                           the row again for the encode (from L2).
//   per_tensor              two kernels: amax partials (one word per CTA, no atomics), then an
//                           encode whose CTAs fold the partials into the one scale (no host
//                           round trip). It reads X twice; the encode walks the rows backwards so
//                           that the end of X, read last by the first kernel, is still in L2.
//   jagged_colwise,         Y = Xᵀ with one scale per (group, column of X); per_row of Xᵀ is the
//   per_row of Xᵀ           same with one group of every row (quantize_colwise.cuh). Two-byte X of
//                           up to 8192 rows with 16-byte aligned rows: ColStripKernel, one read;
//                           otherwise the ends checked and the cells zeroed in one kernel, amax per
//                           cell by atomicMax, scales per cell, then a transposing encode through
//                           shared memory: X read twice, backwards the second time.
//   per_tensor of Xᵀ        per_tensor's amax partials, then ColTileKernel: persistent CTAs
//                           encode 128-row tiles of X and write them transposed (two reads of X;
//                           quantize_transposed.cuh).
//   mx1x32 of Xᵀ            one pass. Two-byte X with 16-byte aligned rows: MxTileAsyncKernel,
//                           one 128x128 tile per CTA by cp.async into shared memory; otherwise
//                           ColTileKernel.
// Group ends (jagged) are checked on the device as kd::CheckGroupEnds does
// (quantize_group_ends.cuh): a violation goes to the op's DeviceErrorRecord and the op writes
// nothing, as the CPU backend writes nothing when its check fails. jagged_colwise (whose ends index
// its scale cells) and jagged_rowwise with many groups copy the ends once from client memory in one
// kernel (CTA 0), check the copy there, and read only the copy; every later kernel exits on a bad
// verdict. jagged_rowwise with up to kFusedCheckGroups groups, whose ends index nothing, saves that
// launch: every CTA of its one kernel checks the client's ends itself (CTA 0 reports), so a client
// rewriting them during the op may get a mix of written and unwritten rows, never an access
// outside the tensors.
#include <algorithm>
#include <cstdint>

#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/device_attributes.h"
#include "kernels/gpu/gpu_kernels.h"
#include "kernels/gpu/quantize_colwise.cuh"
#include "kernels/gpu/quantize_common.cuh"
#include "kernels/gpu/quantize_group_ends.cuh"
#include "kernels/gpu/quantize_params.h"
#include "kernels/gpu/quantize_rowcol.cuh"
#include "kernels/gpu/quantize_rowwise.cuh"
#include "kernels/gpu/quantize_transposed.cuh"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {
namespace {

// ---------------------------------------------------------------------------------------------
// Launchers.

// CTAs of `kKernel` with `threads` threads resident on the whole device at once (the device's
// values read once, device_attributes.h).
template <auto kKernel>
cudaError_t ResidentCtas(int threads, int64_t& resident) {
  int sms = 0, per_sm = 0;
  cudaError_t err = CurrentSmCount(&sms);
  if (err == cudaSuccess) err = CtasPerSm<kKernel>(threads, &per_sm);
  resident = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  return err;
}

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); }

// The per_tensor grid: x covers a row's chunks, y as many row groups as fill the device once,
// at most kMaxPartials CTAs in all unless x alone is more.
dim3 TensorGrid(const RowColKernelArgs& p, int vec, int64_t resident) {
  const int64_t cpr = (p.k + vec - 1) / vec;
  const int64_t x = (cpr + kRowThreads - 1) / kRowThreads;
  const int64_t groups = (p.m + kRowsInFlight - 1) / kRowsInFlight;
  const int64_t y =
      Clamp(std::min(resident / x, kMaxPartials / x), 1, std::min<int64_t>(groups, 65535));
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

// CTAs of ColTileKernel per SM of the current device. The staged buffers are dynamic shared
// memory: opted in, and counted by the occupancy query, once per device.
template <InputType kType, typename F, ColMode kMode>
cudaError_t ColTileCtasPerSm(int* per_sm) {
  constexpr auto kKernel = ColTileKernel<kType, F, kMode>;
  static PerDeviceValue per_sm_cache;
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  return per_sm_cache.Get(device, per_sm, [](int* v) {
    const cudaError_t e = OptInSharedMemory<kKernel>(kCtStagedBytes);
    if (e != cudaSuccess) return e;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(v, kKernel, kCtThreads, kCtStagedBytes);
  });
}

// ColTileKernel's launch: a persistent grid of at most the resident CTAs. `a` holds the mode's
// own fields; the rest is set here.
template <InputType kType, typename F, ColMode kMode>
cudaError_t LaunchColTiles(const RowColKernelArgs& p, ColTileArgs a, cudaStream_t stream) {
  using S = typename Input<kType>::Storage;
  constexpr auto kKernel = ColTileKernel<kType, F, kMode>;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  a.vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  a.vec_out16 = addr(p.output) % 16 == 0 && p.output_stride % 16 == 0;
  a.row_tiles = (p.m + kCtRows - 1) / kCtRows;
  a.strips = (p.k + kCtColsOf<kType> - 1) / kCtColsOf<kType>;
  a.items = a.row_tiles * a.strips;
  int sms = 0, per_sm = 0;
  cudaError_t err = CurrentSmCount(&sms);
  if (err == cudaSuccess) err = ColTileCtasPerSm<kType, F, kMode>(&per_sm);
  if (err != cudaSuccess) return err;
  const int64_t resident = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  const int64_t grid = std::min(a.items, resident);
  kKernel<<<static_cast<unsigned>(grid), kCtThreads, kCtStagedBytes, stream>>>(p, a);
  return cudaGetLastError();
}

// Two-byte X whose base and row pitch allow 16-byte cp.async chunks, none of them cut by K.
bool AsyncRows(const RowColKernelArgs& p) {
  return reinterpret_cast<uintptr_t>(p.input) % 16 == 0 && (p.input_stride * 2) % 16 == 0 &&
         p.k % 8 == 0;
}

// Whether jagged_colwise / per_row of Xᵀ take ColStripKernel (two-byte inputs).
// NOTE: up to 8192 rows the strip kernel's one read gains 0.025-0.09 of the copy on an H100 over
// the two-read kernels; taller groups no longer fit a CTA's shared memory (kCsCapRows), the
// pieces read again come mostly from DRAM, and it loses up to 0.11. So: up to kCsMaxRows rows,
// and enough CTAs to fill about half the CTA slots.
constexpr int kCsCapRows = 1536;  // 96 KB of shared memory: 2 CTAs per SM
constexpr int kCsSmemBytes = kCsCapRows * kCsRowBytes;
constexpr int64_t kCsMaxRows = 8192;
constexpr int64_t kCsMinCtas = 128;
bool UseColStrips(const RowColKernelArgs& p, int64_t groups) {
  const int64_t strips = (p.k + kCsCols - 1) / kCsCols;
  return AsyncRows(p) && groups <= 65535 && p.m <= kCsMaxRows && strips * groups >= kCsMinCtas;
}

// mx1x32 of Xᵀ on MxTileAsyncKernel: one CTA per 128x128 tile of X, grouped tile order from
// 16384 rows up (as quantize_tiled.cu's transposed forms).
template <InputType kType, typename F>
cudaError_t LaunchMxTiles(const RowColKernelArgs& p, cudaStream_t stream) {
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_out16 = addr(p.output) % 16 == 0 && p.output_stride % 16 == 0;
  const bool vec_scales = addr(p.scales) % 4 == 0 && p.scales_stride % 4 == 0;
  const int64_t k_tiles = (p.k + kMxtEdge - 1) / kMxtEdge;
  const int64_t tiles = (p.m + kMxtEdge - 1) / kMxtEdge * k_tiles;
  if (tiles > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const int group_k = p.m >= 16384 && k_tiles > 4 ? 4 : static_cast<int>(k_tiles);
  MxTileAsyncKernel<kType, F><<<static_cast<unsigned>(tiles), kMxtThreads, kMxtSmemBytes, stream>>>(
      p, group_k, vec_out16, vec_scales);
  return cudaGetLastError();
}

// jagged_colwise and per_row of Xᵀ on ColStripKernel: a CTA per (strip, group); the ends are
// checked (s.valid) by the kernel launched before.
template <InputType kType, typename F>
cudaError_t LaunchColStrips(const RowColKernelArgs& p, const JaggedScratch& s,
                            cudaStream_t stream) {
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_out16 = addr(p.output) % 16 == 0 && p.output_stride % 16 == 0;
  constexpr auto kKernel = ColStripKernel<kType, F>;
  const cudaError_t err = OptInSharedMemory<kKernel>(kCsSmemBytes);
  if (err != cudaSuccess) return err;
  const int64_t strips = (p.k + kCsCols - 1) / kCsCols;
  if (strips > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  kKernel<<<dim3(static_cast<unsigned>(strips), static_cast<unsigned>(ColGroups(p))), kCsThreads,
            kCsSmemBytes, stream>>>(p, s, kCsCapRows, vec_out16);
  return cudaGetLastError();
}

// jagged_colwise and per_row of Xᵀ: the ends copied and checked (and, for the two-read kernels,
// the cell maxima zeroed) in one kernel, then ColStripKernel (UseColStrips), or amax per cell,
// scales per cell and a transposing encode.
// NOTE: the two-read kernels read X twice; the one-read designs measured so far
// (docs/decisions/0010-quantize-kernel-families.md) are faster only where
// ColStripKernel runs.
template <InputType kType, typename F>
cudaError_t LaunchColumnCells(const RowColKernelArgs& p, cudaStream_t stream) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  const int64_t groups = ColGroups(p);
  const JaggedScratch s = ScratchOf(p);
  const bool strips = sizeof(S) == 2 && UseColStrips(p, groups);
  // The strip kernel needs no cell maxima: the ends are checked by one CTA that zeroes nothing.
  const int64_t zero_words = strips ? 0 : s.zero_words;
  const int64_t zero_ctas = std::min<int64_t>(64, zero_words / (4 * kCheckThreads) + 1);
  CheckGroupEndsKernel<<<static_cast<unsigned>(zero_ctas), kCheckThreads, 0, stream>>>(
      p, s.ends, s.valid, s.cell_amax, zero_words);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  // No group: nothing to write (the CPU backend writes nothing either).
  if (groups == 0) return cudaSuccess;
  if constexpr (sizeof(S) == 2) {
    if (strips) return LaunchColStrips<kType, F>(p, s, stream);
  }
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t cells = groups * p.k;
  const int64_t amax_x = (cpr + kColAmaxThreads - 1) / kColAmaxThreads;
  const int64_t amax_y = (p.m + kColAmaxRows - 1) / kColAmaxRows;
  const int64_t enc_x = (p.k + kColTileCols - 1) / kColTileCols;
  const int64_t enc_y = (p.m + kColTileRows - 1) / kColTileRows;
  if (amax_x > 0x7FFFFFFF || amax_y > 65535 || enc_x > 0x7FFFFFFF) {
    return cudaErrorInvalidConfiguration;
  }
  ColAmaxKernel<kType><<<dim3(static_cast<unsigned>(amax_x), static_cast<unsigned>(amax_y)),
                         kColAmaxThreads, 0, stream>>>(p, vec_in, s);
  const int64_t scale_blocks = std::min<int64_t>((cells + kColThreads - 1) / kColThreads, 132 * 32);
  ColScaleKernel<F><<<static_cast<unsigned>(scale_blocks), kColThreads, 0, stream>>>(p, s);
  const bool vec_out16 = addr(p.output) % 16 == 0 && p.output_stride % 16 == 0;
  ColEncodeKernel<kType, F>
      <<<dim3(static_cast<unsigned>(enc_x), static_cast<unsigned>(std::min<int64_t>(enc_y, 65535))),
         kColThreads, 0, stream>>>(p, vec_in, vec_out16, s);
  return cudaGetLastError();
}

template <InputType kType, typename F>
cudaError_t LaunchRowsAs(const RowColKernelArgs& p, cudaStream_t stream) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  const bool vec_out = addr(p.output) % kVec == 0 && p.output_stride % kVec == 0;
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t row_groups = (p.m + kBlockRows - 1) / kBlockRows;
  const int64_t x_blocks = (cpr + kRowThreads - 1) / kRowThreads;
  if (x_blocks > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const dim3 row_grid(static_cast<unsigned>(x_blocks),
                      static_cast<unsigned>(std::min<int64_t>(row_groups, 65535)));
  switch (p.kind) {
    case RowQuantizeKind::kPerRow: {
      const int64_t threads = Clamp((cpr + kPerRowChunks - 1) / kPerRowChunks + gpu::kWaveSize - 1,
                                    gpu::kWaveSize, kMaxPerRowThreads) /
                              gpu::kWaveSize * gpu::kWaveSize;
      const int64_t grid = std::min<int64_t>(p.m, int64_t{1} << 30);
      PerRowKernel<kType, F>
          <<<static_cast<unsigned>(grid), static_cast<unsigned>(threads), 0, stream>>>(p, vec_in,
                                                                                       vec_out);
      return cudaGetLastError();
    }
    case RowQuantizeKind::kMx1x32:
      if constexpr (F::kFnuz) {
        return cudaErrorInvalidValue;  // not an MX element format
      } else {
        RowBlocksKernel<kType, F, true>
            <<<row_grid, kRowThreads, 0, stream>>>(p, vec_in, vec_out, nullptr, false);
        return cudaGetLastError();
      }
    case RowQuantizeKind::kPerTensor: {
      int64_t resident = 0;
      cudaError_t err = ResidentCtas<TensorAmaxKernel<kType>>(kRowThreads, resident);
      if (err != cudaSuccess) return err;
      const dim3 amax_grid = TensorGrid(p, kVec, resident);
      uint32_t* partials = static_cast<uint32_t*>(p.scratch);
      TensorAmaxKernel<kType><<<amax_grid, kRowThreads, 0, stream>>>(p, vec_in, partials);
      err = ResidentCtas<TensorEncodeKernel<kType, F>>(kRowThreads, resident);
      if (err != cudaSuccess) return err;
      const dim3 encode_grid = TensorGrid(p, kVec, resident);
      TensorEncodeKernel<kType, F><<<encode_grid, kRowThreads, 0, stream>>>(
          p, vec_in, vec_out, partials, static_cast<int64_t>(amax_grid.x) * amax_grid.y);
      return cudaGetLastError();
    }
    case RowQuantizeKind::kJaggedRowwise:
      if (p.groups <= kFusedCheckGroups) {
        RowBlocksKernel<kType, F, false>
            <<<row_grid, kRowThreads, 0, stream>>>(p, vec_in, vec_out, nullptr, true);
        return cudaGetLastError();
      }
      break;
    case RowQuantizeKind::kMx1x32Transposed:
      if constexpr (F::kFnuz) {
        return cudaErrorInvalidValue;
      } else {
        if constexpr (sizeof(S) == 2) {
          if (AsyncRows(p)) return LaunchMxTiles<kType, F>(p, stream);
        }
        return LaunchColTiles<kType, F, ColMode::kMx>(p, ColTileArgs(), stream);
      }
    case RowQuantizeKind::kPerTensorTransposed: {
      int64_t resident = 0;
      const cudaError_t err = ResidentCtas<TensorAmaxKernel<kType>>(kRowThreads, resident);
      if (err != cudaSuccess) return err;
      const dim3 amax_grid = TensorGrid(p, kVec, resident);
      uint32_t* partials = static_cast<uint32_t*>(p.scratch);
      TensorAmaxKernel<kType><<<amax_grid, kRowThreads, 0, stream>>>(p, vec_in, partials);
      ColTileArgs a;
      a.partials = partials;
      a.partial_count = static_cast<int64_t>(amax_grid.x) * amax_grid.y;
      return LaunchColTiles<kType, F, ColMode::kTensor>(p, a, stream);
    }
    case RowQuantizeKind::kJaggedColwise:
    case RowQuantizeKind::kPerRowTransposed:
      return LaunchColumnCells<kType, F>(p, stream);
  }
  const JaggedScratch s = ScratchOf(p);
  CheckGroupEndsKernel<<<1, kCheckThreads, 0, stream>>>(p, s.ends, s.valid, nullptr, 0);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  RowBlocksKernel<kType, F, false>
      <<<row_grid, kRowThreads, 0, stream>>>(p, vec_in, vec_out, s.valid, false);
  return cudaGetLastError();
}

template <typename F>
cudaError_t LaunchRowsFormat(const RowColKernelArgs& p, cudaStream_t stream) {
  switch (p.input_type) {
    case InputType::kBF16:
      return LaunchRowsAs<InputType::kBF16, F>(p, stream);
    case InputType::kF16:
      return LaunchRowsAs<InputType::kF16, F>(p, stream);
    case InputType::kF32:
      return LaunchRowsAs<InputType::kF32, F>(p, stream);
  }
  return cudaErrorInvalidValue;
}

// The per-device caches of every kernel LaunchRowsAs may reach for this type and format with a
// first-use query (ResidentCtas, LaunchColTiles, LaunchColStrips): the first error.
template <InputType kType, typename F>
cudaError_t WarmRowsAs() {
  int unused = 0;
  cudaError_t err = CtasPerSm<TensorAmaxKernel<kType>>(kRowThreads, &unused);
  if (err == cudaSuccess) err = CtasPerSm<TensorEncodeKernel<kType, F>>(kRowThreads, &unused);
  if (err == cudaSuccess) err = ColTileCtasPerSm<kType, F, ColMode::kTensor>(&unused);
  if constexpr (!F::kFnuz) {
    if (err == cudaSuccess) err = ColTileCtasPerSm<kType, F, ColMode::kMx>(&unused);
  }
  if constexpr (sizeof(typename Input<kType>::Storage) == 2) {
    if (err == cudaSuccess) err = OptInSharedMemory<ColStripKernel<kType, F>>(kCsSmemBytes);
  }
  return err;
}

template <typename F>
cudaError_t WarmRowsFormat() {
  cudaError_t err = WarmRowsAs<InputType::kBF16, F>();
  if (err == cudaSuccess) err = WarmRowsAs<InputType::kF16, F>();
  if (err == cudaSuccess) err = WarmRowsAs<InputType::kF32, F>();
  return err;
}

}  // namespace
}  // namespace quant

cudaError_t WarmQuantizeRowCol() {
  int sms = 0;
  cudaError_t err = CurrentSmCount(&sms);
  if (err == cudaSuccess) err = quant::WarmRowsFormat<fp8::E4M3FN>();
  if (err == cudaSuccess) err = quant::WarmRowsFormat<fp8::E4M3FNUZ>();
  if (err == cudaSuccess) err = quant::WarmRowsFormat<fp8::E5M2>();
  return err;
}

uint64_t RowColQuantizeScratchBytes(const QuantizeParams& q) {
  const quant::RowColKernelArgs p = quant::RowColArgsOf(q);
  switch (p.kind) {
    case RowQuantizeKind::kPerTensor:
    case RowQuantizeKind::kPerTensorTransposed: {
      const int vec = p.input_type == InputType::kF32 ? 4 : 8;
      const int64_t x = ((p.k + vec - 1) / vec + quant::kRowThreads - 1) / quant::kRowThreads;
      return static_cast<uint64_t>(std::max(quant::kMaxPartials, x)) * sizeof(uint32_t);
    }
    case RowQuantizeKind::kJaggedRowwise:
      return static_cast<uint64_t>(quant::CellsOffset(p.groups));
    case RowQuantizeKind::kJaggedColwise:
    case RowQuantizeKind::kPerRowTransposed: {
      const int64_t groups = quant::ColGroups(p);
      const int64_t cell_bytes = quant::AlignUp(groups * p.k * 4, quant::kScratchAlign);
      return static_cast<uint64_t>(quant::CellsOffset(groups) + 2 * cell_bytes);
    }
    default:
      return 0;
  }
}

cudaError_t LaunchQuantizeRowCol(const QuantizeParams& q, cudaStream_t stream) {
  const quant::RowColKernelArgs p = quant::RowColArgsOf(q);
  if (p.m < 1 || p.k < 1 || p.groups < 0) return cudaErrorInvalidConfiguration;
  switch (p.format) {
    case Fp8Format::kE4M3FN:
      return quant::LaunchRowsFormat<fp8::E4M3FN>(p, stream);
    case Fp8Format::kE4M3FNUZ:
      return quant::LaunchRowsFormat<fp8::E4M3FNUZ>(p, stream);
    case Fp8Format::kE5M2:
      return quant::LaunchRowsFormat<fp8::E5M2>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
