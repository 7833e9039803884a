// What a backend provides to have one of its kernels tuned (Backend::CreateTuneHarness), and the
// config syntax every built-in config space writes. Part of the core library, so that a backend
// can implement a harness without the tuner: the autotune library (autotune_tuner.h) measures
// harnesses, the backends make them.
#ifndef KERNELD_KERNELS_TUNE_HARNESS_H_
#define KERNELD_KERNELS_TUNE_HARNESS_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/autotune_key.h"

namespace kd {

// Inputs of one key's shape, a way to run a config on them, a reference result, and cache
// eviction. Not thread-safe; one tuner uses it at a time.
class TuneHarness {
 public:
  virtual ~TuneHarness() = default;
  // Runs the kernel once with `config` on the current input set and waits for it. A config the
  // kernel cannot parse is INVALID_ARGUMENT; a failed launch keeps its backend's code.
  virtual absl::Status Run(absl::string_view config) = 0;
  // Compares the output of the last Run with the reference result for the same inputs. OK when
  // equal within the op's tolerance; otherwise INTERNAL naming the first differing element.
  virtual absl::Status CheckOutput() = 0;
  // Called before every timed run: makes the next Run read inputs that are not cache-hot.
  virtual void EvictCaches() = 0;
  // Seconds the last Run's kernel took on the device, for a harness that times its kernels
  // itself (device events around the launch alone, so launch and synchronisation costs on the
  // host stay out); the tuner then takes this instead of the Timer's measurement of Run.
  // nullopt (the default) for a harness whose runs the Timer measures.
  virtual std::optional<double> DeviceSeconds() const { return std::nullopt; }
};

// The generic config syntax: '.'-separated "<lower-case name><decimal integer>" fields
// ("bm128.bn128.s6.c1.r8.p0"). Returns (name, value) pairs in order; INVALID_ARGUMENT for
// anything else.
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ParseConfigFields(
    absl::string_view config);
// The values of a config that holds exactly the fields `names`, in that order. INVALID_ARGUMENT
// naming the config and the fields it should have otherwise.
absl::StatusOr<std::vector<int64_t>> ParseConfigFieldValues(
    absl::string_view config, std::initializer_list<const char*> names);

}  // namespace kd

#endif  // KERNELD_KERNELS_TUNE_HARNESS_H_
