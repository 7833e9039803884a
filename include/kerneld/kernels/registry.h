// Which backends exist in this process: the CPU backend always, CUDA/HIP when compiled in and a
// device is present. The registry library (kerneld_registry) is the one place that knows which
// backends were compiled in; everything above it asks it.
#ifndef KERNELD_KERNELS_REGISTRY_H_
#define KERNELD_KERNELS_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/backend.h"

namespace kd {

struct RegistryOptions {
  // "auto" (a GPU backend when one is found, else CPU), "cpu", "cuda", "hip".
  std::string preferred = "auto";
  int cpu_threads = 0;                 // 0: one per core
  uint64_t device_pool_cap_bytes = 0;  // 0: no cap beyond the device
};

class BackendRegistry {
 public:
  // Probes what was compiled in. FAILED_PRECONDITION when `preferred` names a backend that is not
  // compiled in or has no device (the message says which, with the runtime's reason).
  static absl::StatusOr<std::unique_ptr<BackendRegistry>> Create(const RegistryOptions& options);
  // A registry of exactly `backends` (the first is the default), for embedding kerneld's server
  // with backends of one's own and for fault-injection tests.
  static std::unique_ptr<BackendRegistry> FromBackends(
      std::vector<std::unique_ptr<Backend>> backends);

  // The backend new buffers go to when a request names none.
  Backend* Default() const { return default_; }
  // nullptr when that backend is not present.
  Backend* Get(BackendKind kind) const;
  Backend* GetByName(absl::string_view name) const;
  // GPU backends first, the CPU backend last.
  std::vector<Backend*> All() const;
  // Why each GPU backend that was compiled in and probed is absent ("the hip backend found no
  // device (hipErrorNoDevice: ...); it needs ..."), for the daemon's start-up log.
  const std::vector<std::string>& Unavailable() const { return unavailable_; }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::string> unavailable_;
  Backend* default_ = nullptr;
};

// Whether the `kind` backend was compiled into this binary (it may still find no device at run
// time); the CPU backend always is.
bool BackendCompiledIn(BackendKind kind);

}  // namespace kd

#endif  // KERNELD_KERNELS_REGISTRY_H_
