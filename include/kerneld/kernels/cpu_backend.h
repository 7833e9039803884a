// The CPU backend (kerneld_cpu): memory is POSIX shared memory, ops run on a thread pool, and
// it runs every valid op. It is always built and is the reference every other backend is tested
// against.
#ifndef KERNELD_KERNELS_CPU_BACKEND_H_
#define KERNELD_KERNELS_CPU_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/backend.h"

namespace kd {

// A CPU backend whose ops run on `threads` threads (0: one per core).
std::unique_ptr<Backend> CreateCpuBackend(int threads);

// The CPU GEMM's config, what its autotune space (gemm/nt/cpu) enumerates and the tune cache
// stores: "tn<W>", W in {16, 32, 64, 128, 256}, the columns of D computed per tile so that a tile
// of B stays in cache. Default "tn64". Parse accepts exactly what Format writes, for those W;
// INVALID_ARGUMENT naming the field otherwise.
absl::StatusOr<int64_t> ParseCpuGemmConfig(absl::string_view config);
std::string FormatCpuGemmConfig(int64_t tile_n);

}  // namespace kd

#endif  // KERNELD_KERNELS_CPU_BACKEND_H_
