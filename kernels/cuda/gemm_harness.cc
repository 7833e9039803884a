// The CUDA backend's tuning harness for its FP8 GEMMs (see gemm_harness.h).
#include "kernels/cuda/gemm_harness.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kerneld/kernels/gemm_fp8_config.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/cuda/gemm/cublaslt_gemm.h"
#include "kernels/cuda/gemm/gemm_fp8.h"
#include "kernels/cuda/gemm/gemm_launch.h"
#include "kernels/cuda/gemm_harness_kernels.h"
#include "kernels/gpu/gpu_check.h"
#include "kernels/gpu/tile_gemm/tile_gemm.h"
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"

namespace kd {
namespace {

// NOTE: configs differ only in tiling and order of tiles, not in the per-element arithmetic, so
// outputs should agree to rounding; 2^-6 relative (two bf16 ulps) plus 2^-10 of the largest
// magnitude (cancellation) separates rounding from a wrong result by orders of magnitude.
constexpr float kRelTolerance = 1.0f / 64;
constexpr float kAbsToleranceOfMax = 1.0f / 1024;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Owns one cudaMalloc allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  ~DeviceBuffer() { Free(); }
  void Free() {
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  absl::Status Allocate(size_t bytes) {
    KD_GPU_RETURN_IF_ERROR(cudaMalloc(&p_, std::max<size_t>(bytes, 16)));
    bytes_ = bytes;
    return absl::OkStatus();
  }
  void* get() const { return p_; }
  uint8_t* as_bytes() const { return static_cast<uint8_t*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

struct Dims {
  GemmVariant variant = GemmVariant::kInvalid;
  int64_t m = 0, n = 0, k = 0, groups = 1;
  DType d_dtype = DType::kBF16;
  int64_t b_rows() const { return variant == GemmVariant::kMGroupedNT ? groups * n : n; }
  int64_t b_scale_rows() const {
    switch (variant) {
      case GemmVariant::kNT:
        return CeilDiv(n, 128);
      case GemmVariant::kMGroupedNT:
        return groups * CeilDiv(n, 128);
      default:
        return n;
    }
  }
  int64_t d_elems() const { return (variant == GemmVariant::kKGroupedTN ? groups : 1) * m * n; }
  bool grouped() const {
    return variant == GemmVariant::kMGroupedNT || variant == GemmVariant::kKGroupedTN;
  }
  uint64_t input_bytes() const {
    return static_cast<uint64_t>((m + b_rows()) * k + 4 * (m + b_scale_rows()) * (k / 128));
  }
};

Tensor MakeTensor(void* data, DType dtype, std::initializer_list<int64_t> shape, int device) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t stride = 1;
  for (int j = t.rank - 1; j >= 0; --j) {
    t.strides[j] = stride;
    stride *= t.shape[j];
  }
  t.loc = {BackendKind::kCuda, device};
  return t;
}

struct InputSet {
  DeviceBuffer a, b, a_scales, b_scales;
  DeviceBuffer reference;  // the default config's output; allocated when first needed
  bool has_reference = false;
  float ref_absmax = 0;
};

class CudaGemmHarness : public TuneHarness {
 public:
  CudaGemmHarness(const Dims& dims, std::string default_config,
                  std::function<absl::StatusOr<GemmKernelConfig>(absl::string_view)> resolve,
                  const CudaGemmHarnessOptions& options)
      : dims_(dims),
        default_config_(std::move(default_config)),
        resolve_(std::move(resolve)),
        options_(options) {}

  ~CudaGemmHarness() override {
    cudaSetDevice(options_.device);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (end_ != nullptr) cudaEventDestroy(end_);
    if (record_ != nullptr) cudaFree(record_);
    sets_.clear();
    output_.Free();
    scratch_.Free();
    ends_.Free();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    KD_GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    KD_GPU_RETURN_IF_ERROR(cudaEventCreate(&start_));
    KD_GPU_RETURN_IF_ERROR(cudaEventCreate(&end_));
    KD_GPU_RETURN_IF_ERROR(cudaMalloc(&record_, sizeof(cuda::CompareRecord)));
    KD_GPU_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop_, options_.device));

    const uint64_t d_bytes = static_cast<uint64_t>(dims_.d_elems()) * DTypeSize(dims_.d_dtype);
    const uint64_t set_bytes = dims_.input_bytes();
    uint64_t want = options_.rotate_bytes;
    if (want == 0) want = 2 * static_cast<uint64_t>(std::max(prop_.l2CacheSize, 1 << 20));
    int sets =
        static_cast<int>(std::clamp<uint64_t>(CeilDiv(want, set_bytes), 1, kMaxCudaInputSets));
    size_t free_bytes = 0, total_bytes = 0;
    KD_GPU_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    // Each set holds its inputs and, once checked against, the default's output; keep a quarter
    // of the free memory for the daemon's own work.
    const uint64_t per_set = set_bytes + d_bytes;
    const uint64_t usable = free_bytes / 4 * 3;
    if (per_set + d_bytes > usable) {
      return absl::ResourceExhaustedError(
          absl::StrCat("tuning ", dims_.m, "x", dims_.n, "x", dims_.k, " needs ", per_set + d_bytes,
                       " bytes of device memory; ", free_bytes, " are free"));
    }
    sets = static_cast<int>(std::min<uint64_t>(sets, (usable - d_bytes) / per_set));

    KD_RETURN_IF_ERROR(output_.Allocate(d_bytes));
    for (int i = 0; i < sets; ++i) {
      InputSet s;
      KD_RETURN_IF_ERROR(s.a.Allocate(dims_.m * dims_.k));
      KD_RETURN_IF_ERROR(s.b.Allocate(dims_.b_rows() * dims_.k));
      KD_RETURN_IF_ERROR(s.a_scales.Allocate(4 * dims_.m * (dims_.k / 128)));
      KD_RETURN_IF_ERROR(s.b_scales.Allocate(4 * dims_.b_scale_rows() * (dims_.k / 128)));
      const uint64_t seed = options_.seed * 0x100000001b3ull + static_cast<uint64_t>(i) * 4;
      KD_GPU_RETURN_IF_ERROR(
          cuda::LaunchFillRandomE4M3(s.a.as_bytes(), s.a.bytes(), seed, stream_));
      KD_GPU_RETURN_IF_ERROR(
          cuda::LaunchFillRandomE4M3(s.b.as_bytes(), s.b.bytes(), seed + 1, stream_));
      KD_GPU_RETURN_IF_ERROR(cuda::LaunchFillRandomScales(
          static_cast<float*>(s.a_scales.get()), s.a_scales.bytes() / 4, seed + 2, stream_));
      KD_GPU_RETURN_IF_ERROR(cuda::LaunchFillRandomScales(
          static_cast<float*>(s.b_scales.get()), s.b_scales.bytes() / 4, seed + 3, stream_));
      sets_.push_back(std::move(s));
    }
    if (dims_.grouped()) {
      // Groups of equal size; K-grouped ends fall on 128-blocks (the kernel's reduction block).
      std::vector<int32_t> ends(dims_.groups);
      const int64_t total = dims_.variant == GemmVariant::kMGroupedNT ? dims_.m : dims_.k;
      const int64_t unit = dims_.variant == GemmVariant::kMGroupedNT ? 1 : 128;
      for (int64_t g = 0; g < dims_.groups; ++g) {
        ends[g] = static_cast<int32_t>((total / unit) * (g + 1) / dims_.groups * unit);
      }
      KD_RETURN_IF_ERROR(ends_.Allocate(ends.size() * sizeof(int32_t)));
      KD_GPU_RETURN_IF_ERROR(cudaMemcpyAsync(ends_.get(), ends.data(),
                                             ends.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                             stream_));
    }
    KD_GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  absl::Status Run(absl::string_view config) override {
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    KD_RETURN_IF_ERROR(Launch(config, output_.get()));
    last_seconds_.reset();
    float ms = 0;
    KD_GPU_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, end_));
    last_seconds_ = static_cast<double>(ms) * 1e-3;
    if (options_.after_run) options_.after_run(config, output_.get(), output_.bytes());
    return absl::OkStatus();
  }

  absl::Status CheckOutput() override {
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    InputSet& set = sets_[current_];
    const bool f32 = dims_.d_dtype == DType::kF32;
    const size_t n = static_cast<size_t>(dims_.d_elems());
    if (!set.has_reference) {
      KD_RETURN_IF_ERROR(set.reference.Allocate(output_.bytes()));
      const absl::Status s = Launch(default_config_, set.reference.get());
      if (!s.ok()) {
        return absl::InternalError(
            absl::StrCat("the default config ", default_config_,
                         " failed, nothing to check against: ", s.message()));
      }
      KD_ASSIGN_OR_RETURN(cuda::CompareRecord r, Compare([&](cuda::CompareRecord* rec) {
                            return cuda::LaunchRefStats(set.reference.get(), f32, n, rec, stream_);
                          }));
      std::memcpy(&set.ref_absmax, &r.ref_absmax_bits, sizeof(float));
      if (r.nonfinite_ref != 0 || set.ref_absmax == 0) {
        return absl::InternalError(absl::StrCat("the default config ", default_config_, " wrote ",
                                                r.nonfinite_ref, " non-finite elements (max |d| ",
                                                set.ref_absmax, ") on finite random inputs"));
      }
      set.has_reference = true;
    }
    const float abs_tol = kAbsToleranceOfMax * set.ref_absmax;
    KD_ASSIGN_OR_RETURN(cuda::CompareRecord r, Compare([&](cuda::CompareRecord* rec) {
                          return cuda::LaunchCompareOutputs(output_.get(), set.reference.get(), f32,
                                                            n, kRelTolerance, abs_tol, rec,
                                                            stream_);
                        }));
    if (r.mismatches == 0) return absl::OkStatus();
    const int64_t e = static_cast<int64_t>(r.first_mismatch);
    const int64_t per_group = dims_.m * dims_.n;
    return absl::InternalError(absl::StrCat(
        r.mismatches,
        " elements differ from the default config's output by more than 2^-6 "
        "relative + 2^-10 of max |d|; the first is d[",
        dims_.variant == GemmVariant::kKGroupedTN ? absl::StrCat(e / per_group, "][") : "",
        (e % per_group) / dims_.n, "][", e % dims_.n, "]"));
  }

  void EvictCaches() override { current_ = (current_ + 1) % sets_.size(); }

  std::optional<double> DeviceSeconds() const override { return last_seconds_; }

 private:
  // Launches `config` on the current set into `d` between the timing events and waits.
  absl::Status Launch(absl::string_view config, void* d) {
    KD_ASSIGN_OR_RETURN(const GemmKernelConfig c, resolve_(config));
    InputSet& s = sets_[current_];
    const int dev = options_.device;
    const int64_t kb = dims_.k / 128;
    GemmArgs args;
    args.variant = dims_.variant;
    args.a = MakeTensor(s.a.get(), DType::kE4M3FN, {dims_.m, dims_.k}, dev);
    args.a_scales = MakeTensor(s.a_scales.get(), DType::kF32, {dims_.m, kb}, dev);
    switch (dims_.variant) {
      case GemmVariant::kMGroupedNT:
        args.b = MakeTensor(s.b.get(), DType::kE4M3FN, {dims_.groups, dims_.n, dims_.k}, dev);
        args.b_scales = MakeTensor(s.b_scales.get(), DType::kF32,
                                   {dims_.groups, CeilDiv(dims_.n, 128), kb}, dev);
        args.d = MakeTensor(d, dims_.d_dtype, {dims_.m, dims_.n}, dev);
        break;
      case GemmVariant::kKGroupedTN:
        args.b = MakeTensor(s.b.get(), DType::kE4M3FN, {dims_.n, dims_.k}, dev);
        args.b_scales = MakeTensor(s.b_scales.get(), DType::kF32, {dims_.n, kb}, dev);
        args.d = MakeTensor(d, dims_.d_dtype, {dims_.groups, dims_.m, dims_.n}, dev);
        break;
      case GemmVariant::kNN:  // b (K, N) and its 128x128 scales (K/128, N/128): fewer bytes
        args.b = MakeTensor(s.b.get(), DType::kE4M3FN, {dims_.k, dims_.n}, dev);
        args.b_scales = MakeTensor(s.b_scales.get(), DType::kF32, {kb, CeilDiv(dims_.n, 128)}, dev);
        args.d = MakeTensor(d, dims_.d_dtype, {dims_.m, dims_.n}, dev);
        break;
      default:
        args.b = MakeTensor(s.b.get(), DType::kE4M3FN, {dims_.n, dims_.k}, dev);
        args.b_scales = MakeTensor(s.b_scales.get(), DType::kF32, {dims_.b_scale_rows(), kb}, dev);
        args.d = MakeTensor(d, dims_.d_dtype, {dims_.m, dims_.n}, dev);
        break;
    }
    if (dims_.grouped()) {
      args.group_ends = MakeTensor(ends_.get(), DType::kI32, {dims_.groups}, dev);
    }
    KD_RETURN_IF_ERROR(Validate(args).status());
    // cuBLASLt's workspace and scale copies come from scratch held across runs (as the backend's
    // stream holds it), allocated before the timed span; the kernel runs without, as it always
    // has here.
    void* scratch = nullptr;
    if (std::holds_alternative<CublasLtGemmConfig>(c)) {
      const uint64_t bytes = CublasLtGemmScratchBytes(args);
      if (scratch_.bytes() < bytes) {
        scratch_.Free();
        KD_RETURN_IF_ERROR(scratch_.Allocate(bytes));
      }
      scratch = scratch_.get();
    }
    KD_GPU_RETURN_IF_ERROR(cudaEventRecord(start_, stream_));
    if (const auto* tile = std::get_if<TileGemmConfig>(&c)) {
      // Exactly this tile, no fallback: a tile the device cannot run fails its candidate.
      KD_RETURN_IF_ERROR(tile_gemm::LaunchTileGemm(args, tile_gemm::ToTileShape(*tile), stream_));
    } else {
      KD_RETURN_IF_ERROR(LaunchGemmConfig(args, c, stream_, scratch));
    }
    KD_GPU_RETURN_IF_ERROR(cudaEventRecord(end_, stream_));
    KD_GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  template <typename LaunchFn>
  absl::StatusOr<cuda::CompareRecord> Compare(LaunchFn launch) {
    cuda::CompareRecord r{};
    r.first_mismatch = ~0ull;
    KD_GPU_RETURN_IF_ERROR(
        cudaMemcpyAsync(record_, &r, sizeof(r), cudaMemcpyHostToDevice, stream_));
    KD_GPU_RETURN_IF_ERROR(launch(record_));
    KD_GPU_RETURN_IF_ERROR(
        cudaMemcpyAsync(&r, record_, sizeof(r), cudaMemcpyDeviceToHost, stream_));
    KD_GPU_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return r;
  }

  const Dims dims_;
  const std::string default_config_;
  const std::function<absl::StatusOr<GemmKernelConfig>(absl::string_view)> resolve_;
  const CudaGemmHarnessOptions options_;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  cuda::CompareRecord* record_ = nullptr;
  std::vector<InputSet> sets_;
  DeviceBuffer output_, ends_, scratch_;
  size_t current_ = 0;
  std::optional<double> last_seconds_;
};

// A config of the sm_90 space: cuBLASLt's ("lt<algo>") or the sm_90a kernel's.
absl::StatusOr<GemmKernelConfig> ResolveSm90GemmConfig(absl::string_view text) {
  if (absl::StartsWith(text, "lt")) {
    absl::StatusOr<CublasLtGemmConfig> config = ParseCublasLtGemmConfig(text);
    if (!config.ok()) return config.status();
    return GemmKernelConfig(*config);
  }
  absl::StatusOr<GemmConfig> config = ParseGemmConfig(text);
  if (!config.ok()) return config.status();
  return GemmKernelConfig(*config);
}

// A config of a tile GEMM space (sm_89 and the other NVIDIA families without the wgmma kernel).
absl::StatusOr<GemmKernelConfig> ResolveTileConfig(absl::string_view text) {
  absl::StatusOr<TileGemmConfig> config = tile_gemm::ParseTileGemmConfig(text);
  if (!config.ok()) return config.status();
  return GemmKernelConfig(*config);
}

absl::Status Invalid(const TuneKey& key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("key ", key.ToString(), " cannot be tuned on cuda: ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TuneHarness>> CreateCudaGemmHarness(
    const TuneKey& key, const CudaGemmHarnessOptions& options) {
  // sm_90 keys tune the wgmma kernel (and cuBLASLt); keys of the other NVIDIA architectures with
  // FP8 mma.sync (sm_89 on) tune the tile GEMM, NN included.
  const bool sm90 = ArchFamily(key.arch) == "sm_90";
  const bool tile = !sm90 && tile_gemm::FamilyOf(key.arch) == tile_gemm::ArchFamily::kNvidia;
  if (key.op != "gemm" || (!sm90 && !tile)) {
    return Invalid(key, "not a gemm key of an NVIDIA architecture with FP8 matrix instructions");
  }
  Dims dims;
  if (key.variant == "nt")
    dims.variant = GemmVariant::kNT;
  else if (key.variant == "nn" && tile)
    dims.variant = GemmVariant::kNN;
  else if (key.variant == "tn")
    dims.variant = GemmVariant::kTN;
  else if (key.variant == "m_grouped_nt")
    dims.variant = GemmVariant::kMGroupedNT;
  else if (key.variant == "k_grouped_tn")
    dims.variant = GemmVariant::kKGroupedTN;
  else
    return Invalid(key, tile ? "variant must be nt, nn, tn, m_grouped_nt or k_grouped_tn"
                             : "variant must be nt, tn, m_grouped_nt or k_grouped_tn");
  if (key.dtypes == "e4m3fn.e4m3fn>bf16")
    dims.d_dtype = DType::kBF16;
  else if (key.dtypes == "e4m3fn.e4m3fn>f32")
    dims.d_dtype = DType::kF32;
  else
    return Invalid(key, "dtypes must be e4m3fn.e4m3fn>bf16 or e4m3fn.e4m3fn>f32");
  if (key.m < 1 || key.n < 1 || key.k < 128 || key.k % 128 != 0 || key.groups < 1) {
    return Invalid(key, "k must be a positive multiple of 128, m, n and groups positive");
  }
  if (!dims.grouped() && key.groups != 1) return Invalid(key, "a dense variant has 1 group");
  if (dims.variant == GemmVariant::kKGroupedTN && key.k / 128 < key.groups) {
    return Invalid(key, "k_grouped_tn needs at least one 128-block of k per group");
  }
  dims.m = key.m;
  dims.n = key.n;
  dims.k = key.k;
  dims.groups = key.groups;
  if (options.reference_config.empty()) return Invalid(key, "reference_config is required");
  const auto resolve = tile ? &ResolveTileConfig : &ResolveSm90GemmConfig;
  KD_RETURN_IF_ERROR(resolve(options.reference_config).status());
  // Outputs are checked against the reference the tuner passes (the space's default: the sm_90a
  // kernel's heuristic config, or cuBLASLt's for a tn key that defaults to it).
  auto harness =
      std::make_unique<CudaGemmHarness>(dims, options.reference_config, resolve, options);
  KD_RETURN_IF_ERROR(harness->Init());
  return std::unique_ptr<TuneHarness>(std::move(harness));
}

}  // namespace kd
