#include "kerneld/kernels/registry.h"

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/client_string.h"
#include "kerneld/kernels/cpu_backend.h"
#if defined(KD_REGISTRY_WITH_CUDA)
#include "kerneld/kernels/cuda_backend.h"
#endif
#if defined(KD_REGISTRY_WITH_HIP)
#include "kerneld/kernels/hip_backend.h"
#endif

namespace kd {

absl::StatusOr<std::unique_ptr<BackendRegistry>> BackendRegistry::Create(
    const RegistryOptions& options) {
  auto registry = std::unique_ptr<BackendRegistry>(new BackendRegistry());
  const std::string& want = options.preferred;
  if (want != "auto" && want != "cpu" && want != "cuda" && want != "hip") {
    return absl::InvalidArgumentError(absl::StrCat("backend=\"", EchoClientString(want),
                                                   "\" must be one of auto, cpu, cuda, hip"));
  }
  // Each GPU backend compiled in probes for its devices: on "auto" every one does (a node has
  // NVIDIA or AMD GPUs; the first found is the default), otherwise only the one asked for.
  const auto probe = [&](absl::string_view name, auto open) {
    if (want != "auto" && want != name) return;
    absl::StatusOr<std::unique_ptr<Backend>> backend = open(options.device_pool_cap_bytes);
    if (backend.ok()) {
      registry->backends_.push_back(std::move(*backend));
    } else {
      registry->unavailable_.push_back(std::string(backend.status().message()));
    }
  };
#if defined(KD_REGISTRY_WITH_CUDA)
  probe("cuda", OpenCudaBackend);
#endif
#if defined(KD_REGISTRY_WITH_HIP)
  probe("hip", OpenHipBackend);
#endif
  if (want != "auto" && want != "cpu" && registry->backends_.empty()) {
    const BackendKind kind = want == "cuda" ? BackendKind::kCuda : BackendKind::kHip;
    if (!BackendCompiledIn(kind)) {
      return absl::FailedPreconditionError(
          absl::StrCat("backend=", want, " was asked for but this kerneld was built without it (",
                       want == "cuda" ? "KD_CUDA" : "KD_HIP", ")"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "backend=", want, " was asked for but is unavailable: ", registry->unavailable_.back()));
  }
  // The CPU backend is always there, registered last: it is the reference.
  registry->backends_.push_back(CreateCpuBackend(options.cpu_threads));
  registry->default_ =
      want == "cpu" ? registry->backends_.back().get() : registry->backends_.front().get();
  return registry;
}

std::unique_ptr<BackendRegistry> BackendRegistry::FromBackends(
    std::vector<std::unique_ptr<Backend>> backends) {
  auto registry = std::unique_ptr<BackendRegistry>(new BackendRegistry());
  registry->backends_ = std::move(backends);
  registry->default_ = registry->backends_.empty() ? nullptr : registry->backends_.front().get();
  return registry;
}

bool BackendCompiledIn(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return true;
    case BackendKind::kCuda:
#if defined(KD_REGISTRY_WITH_CUDA)
      return true;
#else
      return false;
#endif
    case BackendKind::kHip:
#if defined(KD_REGISTRY_WITH_HIP)
      return true;
#else
      return false;
#endif
  }
  return false;
}

Backend* BackendRegistry::Get(BackendKind kind) const {
  for (const auto& b : backends_) {
    if (b->kind() == kind) return b.get();
  }
  return nullptr;
}

Backend* BackendRegistry::GetByName(absl::string_view name) const {
  for (const auto& b : backends_) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

std::vector<Backend*> BackendRegistry::All() const {
  std::vector<Backend*> out;
  for (const auto& b : backends_) out.push_back(b.get());
  return out;
}

}  // namespace kd
