// Host side of the FP8 GEMM: the default config, operand checks the kernel needs,
// TMA tensor maps (cuTensorMapEncodeTiled through the runtime's driver entry point, so nothing
// links libcuda), and the launch.
#include "kernels/cuda/gemm/gemm_fp8.h"

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/scratch_buffer.h"
#include "kernels/gpu/device_attributes.h"
#include "kernels/gpu/transpose_fp8.h"
#include "kernels/gpu/transpose_scales.h"

namespace kd {

static_assert(cuda_gemm::kMaxRasterGroup == kMaxGemmRasterGroup,
              "the kernel's band table covers every raster_group CheckGemmConfig accepts");

namespace {

using cuda_gemm::KernelMode;
using cuda_gemm::KernelParams;
using cuda_gemm::ScratchBuffer;

template <typename... Parts>
absl::Status Invalid(Parts&&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(std::forward<Parts>(parts)...));
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn EncodeTiled() {
  static const EncodeTiledFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return EncodeTiledFn{nullptr};
    }
    return reinterpret_cast<EncodeTiledFn>(p);
  }();
  return fn;
}

// A K-major FP8 operand as a TMA map: dims innermost first (K, rows[, groups]), boxes of
// 128 K-bytes x `box_rows` rows with 128-byte swizzle (what the wgmma descriptors expect).
// Out-of-bounds rows and columns read as zero.
absl::StatusOr<CUtensorMap> MakeOperandMap(const Tensor& t, absl::string_view field, int box_rows) {
  const EncodeTiledFn encode = EncodeTiled();
  if (encode == nullptr) {
    return absl::InternalError("cuTensorMapEncodeTiled is not available from the CUDA driver");
  }
  const int rank = t.rank;
  cuuint64_t dims[3], strides[2];
  cuuint32_t box[3] = {static_cast<cuuint32_t>(cuda_gemm::kBlockK),
                       static_cast<cuuint32_t>(box_rows), 1};
  cuuint32_t elem_strides[3] = {1, 1, 1};
  for (int i = 0; i < rank; ++i) dims[i] = static_cast<cuuint64_t>(t.shape[rank - 1 - i]);
  for (int i = 0; i + 1 < rank; ++i) strides[i] = static_cast<cuuint64_t>(t.strides[rank - 2 - i]);
  CUtensorMap map;
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, rank, t.data, dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return Invalid(field, ": cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(r),
                   ") for shape ", t.ShapeString());
  }
  return map;
}

// Whether `t`, a 1x128 scale tensor (rows, K/128), is K-block-major: the (K/128, rows) tensor
// Quantize writes with SCALE_LAYOUT_K_BLOCK_MAJOR, named with strides (1, ld). (One K block is
// read as row-major with row stride 1.)
bool KBlockMajor(const Tensor& t) { return t.rank == 2 && t.shape[1] > 1 && t.strides[1] != 1; }

// Whether TMA can read scale tensor `t` (f32): its base and the byte strides of its outer
// dimensions (for K-block-major scales, of its K blocks) multiples of 16.
bool TmaReadableScales(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  if (KBlockMajor(t)) return t.strides[1] * static_cast<int64_t>(sizeof(float)) % 16 == 0;
  for (int i = 0; i + 1 < t.rank; ++i) {
    if (t.strides[i] * static_cast<int64_t>(sizeof(float)) % 16 != 0) return false;
  }
  return true;
}

// A scale tensor (rows, K/128) as a TMA map: fp32, boxes of kScaleBoxCols columns x `box_rows`
// rows (K-block-major: `box_rows` rows x kScaleBoxCols K blocks, rows innermost), no swizzle,
// out-of-bounds cells zero. False when the driver refuses it (the kernel then copies the scales
// with cp.async).
bool MakeScaleMap(const Tensor& t, int box_rows, CUtensorMap* map) {
  const EncodeTiledFn encode = EncodeTiled();
  if (encode == nullptr || !TmaReadableScales(t) || t.rank != 2) return false;
  constexpr int rank = 2;
  const bool k_block_major = KBlockMajor(t);
  const int inner = k_block_major ? 0 : 1;  // the dimension contiguous in memory
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(t.shape[inner]),
                              static_cast<cuuint64_t>(t.shape[1 - inner])};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(t.strides[1 - inner]) * sizeof(float)};
  const cuuint32_t box[2] = {
      static_cast<cuuint32_t>(k_block_major ? box_rows : cuda_gemm::kScaleBoxCols),
      static_cast<cuuint32_t>(k_block_major ? cuda_gemm::kScaleBoxCols : box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, t.data, dims, strides, box,
                elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Whether TMA can write D: bf16 (rows, N) with its base and row stride multiples of 16 bytes.
bool TmaWritableOutput(const Tensor& d) {
  return d.rank == 2 && d.dtype == DType::kBF16 && reinterpret_cast<uintptr_t>(d.data) % 16 == 0 &&
         d.strides[0] * static_cast<int64_t>(sizeof(uint16_t)) % 16 == 0;
}

// D (rows, N) bf16 as a TMA map for the epilogue's bulk stores: boxes of kOutBoxCols x
// kOutBoxRows with 128-byte swizzle (the layout of the kernel's epilogue buffers). False when D
// is not TmaWritableOutput or the driver refuses it; the kernel then stores with 16-byte
// accesses.
bool MakeOutputMap(const Tensor& d, CUtensorMap* map) {
  const EncodeTiledFn encode = EncodeTiled();
  if (encode == nullptr || !TmaWritableOutput(d)) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(d.shape[1]),
                              static_cast<cuuint64_t>(d.shape[0])};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(d.strides[0]) * sizeof(uint16_t)};
  const cuuint32_t box[2] = {cuda_gemm::kOutBoxCols, cuda_gemm::kOutBoxRows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, d.data, dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The most tiles a launch of an m x n problem runs (M-grouped: each of its `groups` may add a
// part-filled tile, and in a cluster its partner; K-grouped: one set of tiles per group).
int64_t MaxTiles(KernelMode mode, int64_t m, int64_t n, int64_t groups, int cluster,
                 const GemmConfig& config) {
  const int64_t num_n = CeilDiv(n, config.block_n);
  int64_t tiles = CeilDiv(m, config.block_m) * num_n;
  if (mode == KernelMode::kMGrouped) tiles += groups * num_n * cluster;
  if (mode == KernelMode::kKGrouped) tiles *= groups;
  return tiles;
}

absl::Status CheckTmaOperand(const Tensor& t, absl::string_view field) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) {
    return Invalid(field, " starts at an address that is not a multiple of 16 bytes (TMA)");
  }
  for (int i = 0; i + 1 < t.rank; ++i) {
    if (t.strides[i] % 16 != 0) {
      return Invalid(field, ".strides[", i, "]=", t.strides[i],
                     " bytes is not a multiple of 16 (TMA)");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckInt32(int64_t v, absl::string_view what) {
  if (v > INT32_MAX) return Invalid(what, "=", v, " exceeds the kernel's 32-bit index range");
  return absl::OkStatus();
}

}  // namespace

GemmConfig DefaultGemmConfig(const GemmArgs& args, const cudaDeviceProp& device) {
  return DefaultGemmConfig(args, device.multiProcessorCount);
}

GemmConfig DefaultGemmConfig(const GemmArgs& args, int sm_count) {
  int64_t rows = args.a.shape[0], cols = args.b.shape[0], groups = 1;
  // M-grouped B is (groups, N, K); NN's B is W itself, (K, N).
  if (args.variant == GemmVariant::kMGroupedNT || args.variant == GemmVariant::kNN) {
    cols = args.b.shape[1];
  }
  if (args.variant == GemmVariant::kKGroupedTN) groups = args.d.shape[0];
  const bool nt = args.variant == GemmVariant::kNT || args.variant == GemmVariant::kNN;
  const int64_t m_groups = args.variant == GemmVariant::kMGroupedNT ? args.b.shape[0] : 0;
  return HeuristicGemmConfig(rows, cols, args.a.shape[1], groups, sm_count, nt, m_groups);
}

absl::Status CudaSupportsGemmFp8(const GemmArgs& args) {
  if (args.a.dtype != DType::kE4M3FN || args.b.dtype != DType::kE4M3FN) {
    return absl::UnimplementedError(
        absl::StrCat("the cuda gemm takes e4m3fn operands, not a=", DTypeName(args.a.dtype),
                     " b=", DTypeName(args.b.dtype)));
  }
  return absl::OkStatus();
}

int GemmFp8ResidentCtas(const GemmConfig& config) {
  if (!CheckGemmConfig(config).ok()) return 0;
  return cuda_gemm::GemmFp8ResidentCtas(config.block_m, config.block_n, config.stages,
                                        config.cluster);
}

bool GemmFp8StoresByTma(const GemmArgs& args, const GemmConfig& config) {
  const bool grouped = args.variant == GemmVariant::kMGroupedNT;
  const bool dense = args.variant == GemmVariant::kNT || args.variant == GemmVariant::kNN ||
                     args.variant == GemmVariant::kTN;
  if (!(dense || grouped) || args.accumulate || !TmaWritableOutput(args.d) ||
      !CheckGemmConfig(config).ok() || !cuda_gemm::TileStoresByTma(config.block_n)) {
    return false;
  }
  // Tiles as the launch counts them; NN runs as NT with bᵀ, so its columns are b's.
  const int64_t n = grouped || args.variant == GemmVariant::kNN ? args.b.shape[1] : args.b.shape[0];
  const int64_t groups = args.group_ends.present() ? args.group_ends.shape[0] : 1;
  const int64_t tiles = MaxTiles(grouped ? KernelMode::kMGrouped : KernelMode::kDense,
                                 args.a.shape[0], n, groups, config.cluster, config);
  const int resident = GemmFp8ResidentCtas(config);
  const int64_t ctas = config.num_ctas > 0 ? std::min(config.num_ctas, resident) : resident;
  return tiles > ctas;
}

namespace {

// Whether `v` takes 1x128 b_scales (per row of B), which may be K-block-major like a_scales.
bool PerRowBScales(GemmVariant v) { return v == GemmVariant::kTN || v == GemmVariant::kKGroupedTN; }

uint64_t RoundUp256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

// Bytes of a row-major copy of 1x128 scale tensor `t` (rows, K/128).
uint64_t ScaleCopyBytesOf(const Tensor& t) {
  return RoundUp256(static_cast<uint64_t>(t.shape[0]) * t.shape[1] * sizeof(float));
}

// Whether TMA can load `args`' scales (NT args; the TMA-scale tile in clusters of 2): where a
// K-block-major a_scales is not TMA-readable, the launch loads its row-major copy (contiguous and
// 256-byte aligned in scratch) instead.
bool TmaLoadsScalesOf(const GemmArgs& nt, const GemmConfig& config) {
  const bool a_ok = TmaReadableScales(nt.a_scales) ||
                    (KBlockMajor(nt.a_scales) &&
                     nt.a_scales.shape[1] * static_cast<int64_t>(sizeof(float)) % 16 == 0);
  return nt.variant == GemmVariant::kNT && config.cluster == 2 && CheckGemmConfig(config).ok() &&
         cuda_gemm::GemmFp8TmaScales(config.block_m, config.block_n, config.stages) && a_ok &&
         TmaReadableScales(nt.b_scales);
}

}  // namespace

bool GemmFp8LoadsScalesByTma(const GemmArgs& args, const GemmConfig& config) {
  return TmaLoadsScalesOf(
      args.variant == GemmVariant::kNN ? NnAsNtArgs(args, nullptr, nullptr) : args, config);
}

namespace {

// Row-major copies of the K-block-major 1x128 scales of `args` (NT, TN or grouped args: NN's are
// its NT problem's), each 256-byte aligned, a_scales' first: the room a launch may need to give its
// cp.async scale copies the layout they read. Reserved whether or not the launch reads them
// natively, so that the scratch layout depends on the shapes alone.
uint64_t ScaleCopyBytes(const GemmArgs& args) {
  uint64_t bytes = 0;
  if (KBlockMajor(args.a_scales)) bytes += ScaleCopyBytesOf(args.a_scales);
  if (PerRowBScales(args.variant) && KBlockMajor(args.b_scales)) {
    bytes += ScaleCopyBytesOf(args.b_scales);
  }
  return bytes;
}

// Where bᵀ's scales start in NN's scratch: after bᵀ, on a 256-byte boundary.
uint64_t NnScalesOffset(const GemmArgs& args) {
  const uint64_t bt_bytes = static_cast<uint64_t>(args.b.shape[0]) * args.b.shape[1];
  return (bt_bytes + 255) / 256 * 256;
}

// Where the scratch of the NT problem NN runs as starts in NN's scratch: after bᵀ's scales.
uint64_t NnRestOffset(const GemmArgs& args) {
  const uint64_t scale_cells = static_cast<uint64_t>(CeilDiv(args.b.shape[1], kQuantBlock)) *
                               (args.b.shape[0] / kQuantBlock);
  return (NnScalesOffset(args) + scale_cells * sizeof(float) + 255) / 256 * 256;
}

// NN (dgrad) as NT: W (R,N) is transposed into scratch as Wᵀ (N,R), its scale grid (R/128,
// ceil(N/128)) as (ceil(N/128), R/128), and the NT kernel runs on them, all on `stream`.
// NOTE: the transpose reads and writes N*R bytes on every call: on an H100 at dX 8192x7168 from
// dY 8192x2048, W 2048x7168, 12 µs (2.4 TB/s) of a 365 µs NN against 355 µs for NT on a
// ready Wᵀ (GemmCudaTest.NnEqualsNtOnTransposedWeightBitForBit prints these). W changes only
// once per optimizer step, so a Wᵀ kept across the calls of a step would save it
// (docs/decisions/0009-gemm-nn-via-transpose.md).
absl::Status LaunchNnAsNt(const GemmArgs& args, const GemmConfig& config, cudaStream_t stream,
                          void* scratch) {
  KD_RETURN_IF_ERROR(CudaSupportsGemmFp8(args));
  KD_RETURN_IF_ERROR(CheckGemmConfig(config));
  KD_RETURN_IF_ERROR(CheckTmaOperand(args.a, "a"));
  if (reinterpret_cast<uintptr_t>(args.b.data) % 16 != 0) {
    return Invalid(
        "b starts at an address that is not a multiple of 16 bytes (nn: the "
        "transpose of b reads 16-byte chunks)");
  }
  if (args.b.strides[0] % 16 != 0) {
    return Invalid("b.strides[0]=", args.b.strides[0],
                   " bytes is not a multiple of 16 (nn: the transpose of b reads 16-byte chunks)");
  }
  KD_RETURN_IF_ERROR(CheckInt32(args.b.shape[0], "b.shape[0]"));
  KD_RETURN_IF_ERROR(CheckInt32(args.b.shape[1], "b.shape[1]"));
  ScratchBuffer owned(stream);
  if (scratch == nullptr) {
    KD_RETURN_IF_ERROR(owned.Allocate(GemmFp8ScratchBytes(args), "nn's bᵀ"));
    scratch = owned.get();
  }
  uint8_t* bt = static_cast<uint8_t*>(scratch);
  float* bt_scales = reinterpret_cast<float*>(bt + NnScalesOffset(args));
  cuda::TransposeFp8Params t;
  t.src = args.b.as<const uint8_t>();
  t.src_stride = args.b.strides[0];
  t.rows = args.b.shape[0];
  t.cols = args.b.shape[1];
  t.dst = bt;
  t.src_scales = args.b_scales.as<const float>();
  t.src_scales_stride = args.b_scales.strides[0];
  t.dst_scales = bt_scales;
  // The NT kernel splits its tail only in a caller's scratch (as for NT itself).
  void* rest = owned.get() == nullptr ? static_cast<char*>(scratch) + NnRestOffset(args) : nullptr;
  const cudaError_t err = cuda::LaunchTransposeFp8(t, stream);
  absl::Status status = err == cudaSuccess
                            ? LaunchGemmFp8(NnAsNtArgs(args, bt, bt_scales), config, stream, rest)
                            : absl::InternalError(absl::StrCat("gemm nn: transpose of b launch: ",
                                                               cudaGetErrorString(err)));
  return status;
}

}  // namespace

uint64_t GemmFp8SplitScratchBytes() {
  int sms = 0;
  if (cuda::CurrentSmCount(&sms) != cudaSuccess) {
    cudaGetLastError();
    return 0;  // the kernel then runs unsplit
  }
  return cuda_gemm::GemmFp8SplitWorkspaceBytes(sms);
}

absl::Status WarmGemmFp8() {
  // NOTE: each is a driver round trip (the entry point's lookup once per process, the attribute
  // and occupancy query once per kernel and device) that a request's first launch would pay.
  (void)EncodeTiled();
  int sms = 0;
  cudaError_t err = cuda::CurrentSmCount(&sms);
  if (err == cudaSuccess) err = cuda_gemm::WarmGemmFp8Kernels();
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("gemm fp8 warm-up: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
}

uint64_t GemmFp8ScratchBytes(const GemmArgs& args) {
  switch (args.variant) {
    case GemmVariant::kNT:
    case GemmVariant::kTN:
      return ScaleCopyBytes(args) + GemmFp8SplitScratchBytes();
    case GemmVariant::kNN:
      return NnRestOffset(args) + ScaleCopyBytes(NnAsNtArgs(args, nullptr, nullptr)) +
             GemmFp8SplitScratchBytes();
    default:
      return ScaleCopyBytes(args);
  }
}

GemmArgs NnAsNtArgs(const GemmArgs& args, void* bt, float* bt_scales) {
  const int64_t r = args.b.shape[0], n = args.b.shape[1];
  GemmArgs nt = args;
  nt.variant = GemmVariant::kNT;
  nt.b.data = bt;
  nt.b.shape[0] = n;
  nt.b.shape[1] = r;
  nt.b.strides[0] = r;
  nt.b.strides[1] = 1;
  nt.b_scales.data = bt_scales;
  nt.b_scales.shape[0] = CeilDiv(n, kQuantBlock);
  nt.b_scales.shape[1] = r / kQuantBlock;
  nt.b_scales.strides[0] = r / kQuantBlock;
  nt.b_scales.strides[1] = 1;
  return nt;
}

absl::Status LaunchGemmFp8(const GemmArgs& args, const GemmConfig& config, cudaStream_t stream,
                           void* scratch) {
  if (args.variant == GemmVariant::kNN) return LaunchNnAsNt(args, config, stream, scratch);
  KD_RETURN_IF_ERROR(CudaSupportsGemmFp8(args));
  KD_RETURN_IF_ERROR(CheckGemmConfig(config));
  KD_RETURN_IF_ERROR(CheckTmaOperand(args.a, "a"));
  KD_RETURN_IF_ERROR(CheckTmaOperand(args.b, "b"));

  KernelParams p;
  p.d = args.d.data;
  p.d_f32 = args.d.dtype == DType::kF32;
  p.accumulate = args.accumulate;
  p.raster_group = config.raster_group;
  const int esize = p.d_f32 ? 4 : 2;
  switch (args.variant) {
    case GemmVariant::kNT:
    case GemmVariant::kTN:
      p.mode = KernelMode::kDense;
      p.m = static_cast<int>(args.a.shape[0]);
      p.n = static_cast<int>(args.b.shape[0]);
      p.k = static_cast<int>(args.a.shape[1]);
      p.b_scale_per_row = args.variant == GemmVariant::kTN;
      p.d_row = args.d.strides[0];
      break;
    case GemmVariant::kMGroupedNT:
      p.mode = KernelMode::kMGrouped;
      p.m = static_cast<int>(args.a.shape[0]);
      p.n = static_cast<int>(args.b.shape[1]);
      p.k = static_cast<int>(args.a.shape[1]);
      p.d_row = args.d.strides[0];
      if (args.b.shape[0] > cuda_gemm::kMaxGroups) {
        return Invalid("b.shape[0]=", args.b.shape[0], " groups exceed the cuda kernel's ",
                       cuda_gemm::kMaxGroups);
      }
      break;
    case GemmVariant::kKGroupedTN:
      p.mode = KernelMode::kKGrouped;
      p.m = static_cast<int>(args.a.shape[0]);
      p.n = static_cast<int>(args.b.shape[0]);
      p.k = static_cast<int>(args.a.shape[1]);
      p.b_scale_per_row = 1;
      p.d_group = args.d.strides[0];
      p.d_row = args.d.strides[1];
      if (args.d.shape[0] > cuda_gemm::kMaxGroups) {
        return Invalid("d.shape[0]=", args.d.shape[0], " groups exceed the cuda kernel's ",
                       cuda_gemm::kMaxGroups);
      }
      break;
    default:
      return CudaSupportsGemmFp8(args);
  }
  KD_RETURN_IF_ERROR(CheckInt32(args.a.shape[0], "a.shape[0]"));
  KD_RETURN_IF_ERROR(CheckInt32(args.a.shape[1], "a.shape[1]"));
  KD_RETURN_IF_ERROR(CheckInt32(args.b.shape[args.b.rank - 2], "b rows"));
  if (args.group_ends.present()) {
    p.group_ends = args.group_ends.data;
    p.group_ends_i64 = args.group_ends.dtype == DType::kI64;
    p.num_groups = static_cast<int>(args.group_ends.shape[0]);
  }
  const int vec = 16 / esize;  // elements per 16-byte store
  p.d_vec_aligned =
      reinterpret_cast<uintptr_t>(p.d) % 16 == 0 && p.d_row % vec == 0 && p.d_group % vec == 0;

  KD_ASSIGN_OR_RETURN(const CUtensorMap map_a, MakeOperandMap(args.a, "a", config.block_m));
  // Clusters pair M-adjacent tiles of a dense problem or of one M group (sharing its expert's B
  // tile). K-grouped (wgrad) runs unpaired: its scheduler pairs nothing, and TN, the same loop
  // with per-row B scales, is 3% slower in clusters of 2 (HeuristicGemmConfig).
  const int cluster = p.mode == KernelMode::kKGrouped ? 1 : config.cluster;
  KD_ASSIGN_OR_RETURN(const CUtensorMap map_b,
                      MakeOperandMap(args.b, "b", config.block_n / cluster));

  const int64_t tiles = MaxTiles(p.mode, p.m, p.n, p.num_groups, cluster, config);
  const int max_useful =
      static_cast<int>(std::max<int64_t>(cluster, std::min<int64_t>(tiles, 1 << 20)));

  // The scales. By TMA where GemmFp8LoadsScalesByTma says so (the rule lives there alone; NN
  // arrives here as its NT problem), else by cp.async (KernelParams::scale_tma). K-block-major
  // 1x128 scales: the TMA-scale tile loads A's natively; every other path reads row-major copies
  // that the launch makes in scratch first (one small transpose each). `g` is `args` with those
  // copies in place of the originals.
  const bool tma_scales = TmaLoadsScalesOf(args, config);
  CUtensorMap map_sa{}, map_sb{};
  if (tma_scales && KBlockMajor(args.a_scales) && TmaReadableScales(args.a_scales) &&
      MakeScaleMap(args.a_scales, config.block_m, &map_sa) &&
      MakeScaleMap(args.b_scales, config.block_n > 128 ? 2 : 1, &map_sb)) {
    p.scale_tma = cuda_gemm::kScalesByTmaAKBlockMajor;
  }
  const bool copy_a = KBlockMajor(args.a_scales) && p.scale_tma == cuda_gemm::kScalesByCpAsync;
  const bool copy_b = PerRowBScales(args.variant) && KBlockMajor(args.b_scales);
  const uint64_t copy_bytes = ScaleCopyBytes(args);
  ScratchBuffer owned(stream);
  char* copies = static_cast<char*>(scratch);
  if ((copy_a || copy_b) && scratch == nullptr) {
    KD_RETURN_IF_ERROR(owned.Allocate(copy_bytes, "row-major scale copies"));
    copies = static_cast<char*>(owned.get());
  }
  GemmArgs g = args;
  auto row_major_copy = [](Tensor& t, char* at) {
    t.data = at;
    t.strides[0] = t.shape[1];
    t.strides[1] = 1;
  };
  if (copy_a) row_major_copy(g.a_scales, copies);
  if (copy_b) {
    row_major_copy(g.b_scales,
                   copies + (KBlockMajor(args.a_scales) ? ScaleCopyBytesOf(args.a_scales) : 0));
  }
  if (tma_scales && p.scale_tma == cuda_gemm::kScalesByCpAsync &&
      MakeScaleMap(g.a_scales, config.block_m, &map_sa) &&
      MakeScaleMap(g.b_scales, config.block_n > 128 ? 2 : 1, &map_sb)) {
    p.scale_tma = cuda_gemm::kScalesByTma;
  }
  p.a_scales = g.a_scales.as<const float>();
  p.sa_row = g.a_scales.strides[0];
  p.b_scales = g.b_scales.as<const float>();
  if (p.mode == KernelMode::kMGrouped) {
    p.sb_group = g.b_scales.strides[0];
    p.sb_row = g.b_scales.strides[1];
  } else {
    p.sb_row = g.b_scales.strides[0];
  }
  // The epilogue's bulk stores where GemmFp8StoresByTma says so (else 16-byte stores).
  CUtensorMap map_d{};
  if (GemmFp8StoresByTma(args, config)) p.d_tma = MakeOutputMap(args.d, &map_d);
  // Dense scratch holds the split-tail workspace (GemmFp8ScratchBytes) after the scale copies;
  // without scratch, no split.
  const bool split = scratch != nullptr && p.mode == KernelMode::kDense;

  cudaError_t err = cudaSuccess;
  if (copy_a) {
    err = cuda::LaunchTransposeScales(args.a_scales.as<const float>(), args.a_scales.strides[1],
                                      args.a_scales.shape[0], args.a_scales.shape[1],
                                      g.a_scales.as<float>(), stream);
  }
  if (copy_b && err == cudaSuccess) {
    err = cuda::LaunchTransposeScales(args.b_scales.as<const float>(), args.b_scales.strides[1],
                                      args.b_scales.shape[0], args.b_scales.shape[1],
                                      g.b_scales.as<float>(), stream);
  }
  if (err == cudaSuccess) {
    err = cuda_gemm::LaunchGemmFp8Kernel(p, map_a, map_b, map_sa, map_sb, map_d, config.block_m,
                                         config.block_n, config.stages, cluster, config.num_ctas,
                                         max_useful, split ? copies + copy_bytes : nullptr,
                                         split ? GemmFp8SplitScratchBytes() : 0, stream);
  }
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("gemm fp8 launch (", GemmConfigToString(config),
                                            "): ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
}

}  // namespace kd
