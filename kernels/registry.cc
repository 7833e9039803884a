#include "kerneld/kernels/registry.h"

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/client_string.h"
#include "kerneld/kernels/cpu_backend.h"
#if defined(KD_REGISTRY_WITH_CUDA)
#include "kerneld/kernels/cuda_backend.h"
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
#if defined(KD_REGISTRY_WITH_CUDA)
  if (want == "auto" || want == "cuda") {
    if (auto cuda = CreateCudaBackend(options.device_pool_cap_bytes)) {
      registry->backends_.push_back(std::move(cuda));
    }
  }
#endif
  if (want != "auto" && want != "cpu" && registry->backends_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("backend=", want, " was asked for but is not compiled in or found no device"));
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
      break;
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
