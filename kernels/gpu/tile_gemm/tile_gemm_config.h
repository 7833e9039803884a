// The portable tile GEMM's configurations, per architecture: the shapes each one runs (its
// autotune space), the default, and the heuristic that picks one for a problem. Host-only, no
// vendor runtime: shared by the launcher, the autotune space and the tests.
//
// Architectures are named as the backends report them: "sm_89", "sm_90" (any sm_XY with XY >= 89
// runs the NVIDIA kernels: mma.sync FP8 exists from sm_89 on), "gfx940", "gfx941", "gfx942",
// "gfx950". Each family's space is its own and holds only shapes its build instantiates: an
// architecture's space is never widened by another's, and its default is always in it.
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_CONFIG_H_
#define KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/gemm_config.h"
#include "kernels/gpu/tile_gemm/tile_gemm_params.h"

namespace kd {
namespace tile_gemm {

// The tile GEMM's kernel family of an architecture, derived from the FP8 matrix-core table
// (kernels/gpu/device_caps.h): NVIDIA parts whose matrix cores take the OCP formats (and any
// later sm_XY the table does not list yet), gfx targets taking e4m3fnuz (gfx94x) or the OCP
// formats (gfx950). An architecture name with a feature suffix ("gfx942:xnack-") is kNone.
enum class ArchFamily : uint8_t {
  kNone = 0,  // no FP8 matrix instructions the tile GEMM uses (sm_80, gfx90a, unknown)
  kNvidia,    // sm_89 and later: mma.sync FP8, OCP e4m3fn / e5m2
  kGfx94x,    // gfx940, gfx941, gfx942: MFMA FP8 reading e4m3fnuz / e5m2fnuz
  kGfx950,    // MFMA FP8 reading OCP e4m3fn / e5m2
};
ArchFamily FamilyOf(absl::string_view arch);

// "128x128s3" for {128, 128, 3}.
std::string TileShapeToString(const TileShape& shape);
// The inverse; INVALID_ARGUMENT naming the text for anything else.
absl::StatusOr<TileShape> ParseTileShape(absl::string_view text);

// The shapes `arch` runs, its default first; empty for an architecture of ArchFamily kNone.
std::vector<TileShape> TileGemmSpace(absl::string_view arch);

// The shape the heuristic picks for an output of `rows` x `cols` (M-grouped: all groups' rows;
// K-grouped: one group's D, `groups` of them) on `arch` with `units` SMs or CUs. Always a member
// of TileGemmSpace(arch); {0, 0, 0} for an architecture without one.
TileShape HeuristicTileShape(absl::string_view arch, int64_t rows, int64_t cols, int64_t groups,
                             int units);

// ---- The typed config (TileGemmConfig, gemm_config.h) that the autotune spaces and the tune
// ---- cache hold, and a GemmArgs carries to a backend.
TileGemmConfig ToTileGemmConfig(const TileShape& shape);
TileShape ToTileShape(const TileGemmConfig& config);
// "tm128.tn128.ts3" for {128, 128, 3}: the autotune spaces' field syntax (autotune_space.h).
std::string TileGemmConfigToString(const TileGemmConfig& config);
// The inverse, canonical form only, of a shape some architecture's space holds (a pin may name
// one its device does not run: the backend then runs the heuristic's shape). INVALID_ARGUMENT
// naming the config and the field otherwise.
absl::StatusOr<TileGemmConfig> ParseTileGemmConfig(absl::string_view text);
// Whether a device of `arch` runs `config`: a member of TileGemmSpace(arch).
bool TileGemmRuns(absl::string_view arch, const TileGemmConfig& config);

}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_CONFIG_H_
