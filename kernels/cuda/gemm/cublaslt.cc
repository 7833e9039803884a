#include "kernels/cuda/gemm/cublaslt.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kerneld/kernels/gemm_fp8_config.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"

namespace kd {
namespace cuda_gemm {
namespace {

// cuBLASLt's first version with block-scaled FP8 (VEC128 and BLK128x128 scale modes).
constexpr size_t kMinVersion = 120900;
// Plans kept at once; past it the cache starts over (a training job uses a few dozen shapes).
constexpr size_t kMaxPlans = 256;
constexpr int kMaxDevices = 64;

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return *fn != nullptr;
}

constexpr const char* kLibraryNames[] = {"libcublasLt.so.13", "libcublasLt.so.12"};

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<CublasLtApi> Open() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KERNELD_CUBLASLT"); env != nullptr && *env != '\0') {
    if (IsDirectory(env)) {
      for (const char* name : kLibraryNames) candidates.push_back(absl::StrCat(env, "/", name));
    } else {
      candidates.push_back(env);
    }
  }
  for (const char* name : kLibraryNames) candidates.push_back(name);
  for (const char* name : kLibraryNames) {
    candidates.push_back(absl::StrCat("/usr/local/cuda/lib64/", name));
  }
  std::vector<std::string> why;
  for (const std::string& path : candidates) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* err = dlerror();
      why.push_back(err != nullptr ? err : path);
      continue;
    }
    CublasLtApi api;
    api.path = path;
    decltype(&cublasLtGetVersion) get_version = nullptr;
    const bool all = Resolve(lib, "cublasLtGetVersion", &get_version) &&
                     Resolve(lib, "cublasLtCreate", &api.create) &&
                     Resolve(lib, "cublasLtMatmul", &api.matmul) &&
                     Resolve(lib, "cublasLtMatmulDescCreate", &api.desc_create) &&
                     Resolve(lib, "cublasLtMatmulDescDestroy", &api.desc_destroy) &&
                     Resolve(lib, "cublasLtMatmulDescSetAttribute", &api.desc_set) &&
                     Resolve(lib, "cublasLtMatrixLayoutCreate", &api.layout_create) &&
                     Resolve(lib, "cublasLtMatrixLayoutDestroy", &api.layout_destroy) &&
                     Resolve(lib, "cublasLtMatmulPreferenceCreate", &api.pref_create) &&
                     Resolve(lib, "cublasLtMatmulPreferenceDestroy", &api.pref_destroy) &&
                     Resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &api.pref_set) &&
                     Resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &api.heuristic);
    Resolve(lib, "cublasLtGetStatusName", &api.status_name);
    if (!all) {
      why.push_back(absl::StrCat(path, ": an entry point is missing"));
      dlclose(lib);
      continue;
    }
    api.version = get_version();
    if (api.version < kMinVersion) {
      why.push_back(
          absl::StrCat(path, ": version ", api.version, " predates block-scaled FP8 (120900)"));
      dlclose(lib);
      continue;
    }
    // The library stays loaded for the life of the process (its handles and plans do too).
    return api;
  }
  return absl::UnimplementedError(absl::StrCat(
      "cuBLASLt is not available (set KERNELD_CUBLASLT to libcublasLt.so.13 or the folder "
      "holding it, such as a pip wheel's nvidia/cu13/lib): ",
      absl::StrJoin(why, "; ")));
}

std::string StatusName(const CublasLtApi& api, cublasStatus_t s) {
  const char* name = api.status_name != nullptr ? api.status_name(s) : nullptr;
  return name != nullptr ? std::string(name) : absl::StrCat("cublasStatus_t ", static_cast<int>(s));
}

// The process's handle for the current device, created once. Handles live as long as the
// process: destroying one at exit could run after the CUDA runtime has gone.
absl::StatusOr<cublasLtHandle_t> HandleForCurrentDevice(const CublasLtApi& api) {
  static absl::Mutex mu;
  static cublasLtHandle_t handles[kMaxDevices] = {};  // guarded by mu
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("cublaslt: cudaGetDevice: ", cudaGetErrorString(err)));
  }
  if (device < 0 || device >= kMaxDevices) {
    return absl::UnimplementedError(
        absl::StrCat("cublaslt: device ", device, " is past ", kMaxDevices - 1));
  }
  absl::MutexLock lock(&mu);
  if (handles[device] == nullptr) {
    cublasLtHandle_t h = nullptr;
    const cublasStatus_t s = api.create(&h);
    if (s != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat("cublasLtCreate: ", StatusName(api, s)));
    }
    handles[device] = h;
  }
  return handles[device];
}

#define KD_LT_RETURN_IF_ERROR(api, expr)                                                     \
  do {                                                                                       \
    const cublasStatus_t kd_lt_status_ = (expr);                                             \
    if (kd_lt_status_ != CUBLAS_STATUS_SUCCESS) {                                            \
      return absl::InternalError(absl::StrCat(#expr, ": ", StatusName(api, kd_lt_status_))); \
    }                                                                                        \
  } while (0)

absl::Status CheckProblem(const BlockScaledProblem& p) {
  if (p.m < 1 || p.n < 1 || p.k < 128 || p.k % 128 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cublaslt: problem ", p.m, "x", p.n, "x", p.k,
                                                   " needs m, n >= 1 and k a multiple of 128"));
  }
  if (p.lda < p.k || p.ldb < p.k || p.lda % 16 != 0 || p.ldb % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cublaslt: lda=", p.lda, " ldb=", p.ldb,
                                                   " must be >= k=", p.k, " and multiples of 16"));
  }
  if (p.d_dtype != DType::kBF16 && p.d_dtype != DType::kF32) {
    return absl::InvalidArgumentError("cublaslt: d must be bf16 or f32");
  }
  if (p.accumulate && p.d_dtype != DType::kF32) {
    return absl::InvalidArgumentError("cublaslt: accumulate needs an f32 d");
  }
  if (p.ldd < (p.d_transposed ? p.m : p.n)) {
    return absl::InvalidArgumentError(absl::StrCat("cublaslt: ldd=", p.ldd, " is below a row"));
  }
  return absl::OkStatus();
}

}  // namespace

bool BlockScaledProblem::operator==(const BlockScaledProblem& o) const {
  return m == o.m && n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && ldd == o.ldd &&
         b_tiles == o.b_tiles && d_dtype == o.d_dtype && accumulate == o.accumulate &&
         d_transposed == o.d_transposed && align_a == o.align_a && align_b == o.align_b &&
         align_d == o.align_d;
}

int AddressAlignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

absl::StatusOr<const CublasLtApi*> LoadCublasLt() {
  static const absl::StatusOr<CublasLtApi>* const loaded = [] {
    auto* api = new absl::StatusOr<CublasLtApi>(Open());
    if (api->ok()) SetCublasLtGemmLoaded(true);
    return api;
  }();
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

absl::Status OpenCublasLtHandle() {
  const absl::StatusOr<const CublasLtApi*> api = LoadCublasLt();
  if (!api.ok()) return absl::OkStatus();
  return HandleForCurrentDevice(**api).status();
}

CublasLtPlan::~CublasLtPlan() {
  if (api_ == nullptr) return;
  if (desc_ != nullptr) api_->desc_destroy(desc_);
  if (lt_a_ != nullptr) api_->layout_destroy(lt_a_);
  if (lt_b_ != nullptr) api_->layout_destroy(lt_b_);
  if (lt_d_ != nullptr) api_->layout_destroy(lt_d_);
}

absl::Status CublasLtPlan::Build(const CublasLtApi& api, cublasLtHandle_t handle,
                                 const BlockScaledProblem& p) {
  api_ = &api;
  handle_ = handle;
  problem_ = p;
  absl::MutexLock lock(&mu_);
  // cuBLASLt is column-major and its FP8 matmul takes op(A) = Aᵀ, op(B) = B, both stored K-major:
  // its (k x rows) column-major matrices are kerneld's row-major (rows, k) operands. Its first
  // operand gives the rows of its column-major output: kerneld's A for Dᵀ, kerneld's B for D.
  const bool swap = !p.d_transposed;
  const int64_t lt_m = swap ? p.n : p.m, lt_n = swap ? p.m : p.n;
  const int64_t ld_first = swap ? p.ldb : p.lda, ld_second = swap ? p.lda : p.ldb;
  const int align_first = swap ? p.align_b : p.align_a, align_second = swap ? p.align_a : p.align_b;
  const cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const cublasLtMatmulMatrixScale_t b_mode = p.b_tiles ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                                                       : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const cublasLtMatmulMatrixScale_t first_mode = swap ? b_mode : a_mode;
  const cublasLtMatmulMatrixScale_t second_mode = swap ? a_mode : b_mode;
  const cudaDataType_t d_type = p.d_dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;

  KD_LT_RETURN_IF_ERROR(api, api.desc_create(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  KD_LT_RETURN_IF_ERROR(api, api.desc_set(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  KD_LT_RETURN_IF_ERROR(api, api.desc_set(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  KD_LT_RETURN_IF_ERROR(
      api, api.desc_set(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &first_mode, sizeof(first_mode)));
  KD_LT_RETURN_IF_ERROR(api, api.desc_set(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &second_mode,
                                          sizeof(second_mode)));
  // The heuristic sees scale pointers of the alignment every run guarantees (16 bytes).
  const void* placeholder = reinterpret_cast<const void*>(uintptr_t{256});
  KD_LT_RETURN_IF_ERROR(api, api.desc_set(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder,
                                          sizeof(placeholder)));
  KD_LT_RETURN_IF_ERROR(api, api.desc_set(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder,
                                          sizeof(placeholder)));
  KD_LT_RETURN_IF_ERROR(api, api.layout_create(&lt_a_, CUDA_R_8F_E4M3, p.k, lt_m, ld_first));
  KD_LT_RETURN_IF_ERROR(api, api.layout_create(&lt_b_, CUDA_R_8F_E4M3, p.k, lt_n, ld_second));
  KD_LT_RETURN_IF_ERROR(api, api.layout_create(&lt_d_, d_type, lt_m, lt_n, p.ldd));

  cublasLtMatmulPreference_t pref = nullptr;
  KD_LT_RETURN_IF_ERROR(api, api.pref_create(&pref));
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
    return api.pref_set(pref, attr, &value, sizeof(value));
  };
  const uint64_t workspace = kCublasLtWorkspaceBytes;
  const uint32_t first_align = static_cast<uint32_t>(align_first);
  const uint32_t second_align = static_cast<uint32_t>(align_second);
  const uint32_t d_align = static_cast<uint32_t>(p.align_d);
  cublasStatus_t s = set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, first_align);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, second_align);
  if (s == CUBLAS_STATUS_SUCCESS) s = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, d_align);
  if (s == CUBLAS_STATUS_SUCCESS) s = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d_align);
  if (s != CUBLAS_STATUS_SUCCESS) {
    api.pref_destroy(pref);
    return absl::InternalError(absl::StrCat("cublaslt: preference: ", StatusName(api, s)));
  }
  // A heuristic that refuses the problem (NOT_SUPPORTED, or INVALID_VALUE for a combination this
  // version does not run) offers no algorithm: the family does not take the problem.
  cublasLtMatmulHeuristicResult_t results[kCublasLtGemmAlgos] = {};
  int found = 0;
  s = api.heuristic(handle, desc_, lt_a_, lt_b_, lt_d_, lt_d_, pref, kCublasLtGemmAlgos, results,
                    &found);
  api.pref_destroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) found = 0;
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS &&
        results[i].workspaceSize <= kCublasLtWorkspaceBytes) {
      algos_.push_back(results[i].algo);
    }
  }
  if (algos_.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("cuBLASLt ", api.version, " has no block-scaled FP8 algorithm for ", p.m, "x",
                     p.n, "x", p.k, " with ", p.b_tiles ? "1x128 x 128x128" : "1x128 x 1x128",
                     " scales, ", DTypeName(p.d_dtype), " d", p.accumulate ? " (accumulate)" : "",
                     " (", StatusName(api, s), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<CublasLtPlan>> CublasLtPlan::Get(const BlockScaledProblem& p) {
  KD_ASSIGN_OR_RETURN(const CublasLtApi* api, LoadCublasLt());
  if (const absl::Status s = CheckProblem(p); !s.ok()) return s;
  KD_ASSIGN_OR_RETURN(cublasLtHandle_t handle, HandleForCurrentDevice(*api));
  struct Entry {
    cublasLtHandle_t handle;
    BlockScaledProblem problem;
    std::shared_ptr<CublasLtPlan> plan;
  };
  static absl::Mutex mu;
  static std::vector<Entry>* const plans = new std::vector<Entry>();  // guarded by mu
  {
    absl::MutexLock lock(&mu);
    for (const Entry& e : *plans) {
      if (e.handle == handle && e.problem == p) return e.plan;
    }
  }
  // Built outside the lock: the heuristic query takes milliseconds the first time.
  std::shared_ptr<CublasLtPlan> plan(new CublasLtPlan());
  if (const absl::Status s = plan->Build(*api, handle, p); !s.ok()) return s;
  absl::MutexLock lock(&mu);
  for (const Entry& e : *plans) {
    if (e.handle == handle && e.problem == p) return e.plan;  // another thread built it first
  }
  if (plans->size() >= kMaxPlans) plans->clear();
  plans->push_back({handle, p, plan});
  return plan;
}

absl::Status CublasLtPlan::Run(int algo, const void* a, const float* a_scales, const void* b,
                               const float* b_scales, void* d, void* workspace,
                               cudaStream_t stream) {
  if (algo < 0 || algo >= algos()) {
    return absl::InvalidArgumentError(absl::StrCat("cublaslt: algo ", algo, " is not one of the ",
                                                   algos(), " the heuristic returned"));
  }
  const BlockScaledProblem& p = problem_;
  const bool swap = !p.d_transposed;
  const void* first = swap ? b : a;
  const void* second = swap ? a : b;
  const float* first_scales = swap ? b_scales : a_scales;
  const float* second_scales = swap ? a_scales : b_scales;
  const float alpha = 1.0f, beta = p.accumulate ? 1.0f : 0.0f;
  absl::MutexLock lock(&mu_);
  KD_LT_RETURN_IF_ERROR(*api_, api_->desc_set(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                              &first_scales, sizeof(first_scales)));
  KD_LT_RETURN_IF_ERROR(*api_, api_->desc_set(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                              &second_scales, sizeof(second_scales)));
  KD_LT_RETURN_IF_ERROR(
      *api_, api_->matmul(handle_, desc_, &alpha, first, lt_a_, second, lt_b_, &beta, d, lt_d_, d,
                          lt_d_, &algos_[algo], workspace, kCublasLtWorkspaceBytes, stream));
  return absl::OkStatus();
}

}  // namespace cuda_gemm
}  // namespace kd
