// Config spaces: what each tunable kernel may be run with, per architecture, and the heuristic
// default it runs with before (or without) tuning.
//
// A config is an opaque string to the cache and the tuner. Every built-in space writes it as
// '.'-separated fields, each a lower-case name followed by a decimal integer, in a fixed order
// ("bm128.bn128.s6.c1.r8.p0"); the kernel that owns the space parses it with its own typed
// parser, which accepts exactly the canonical form (so string equality is config equality). The
// space resolves a string into the typed GemmKernelConfig (gemm_config.h) that a launch receives.
//
// Spaces are looked up by (op, variant, architecture family); see ArchFamily() (autotune_key.h).
// The config syntax is ParseConfigFields (tune_harness.h).
#ifndef KERNELD_KERNELS_AUTOTUNE_SPACE_H_
#define KERNELD_KERNELS_AUTOTUNE_SPACE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/autotune_key.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/tune_harness.h"

namespace kd {

struct ConfigSpace {
  std::string op;           // "gemm"
  std::string variant;      // "nt", "m_grouped_nt"...
  std::string arch_family;  // "sm_90", "sm_89", "gfx94x", "gfx950", "cpu"
  // Bumped whenever the kernel changes so that old timings no longer hold; part of every key,
  // so entries tuned for another version are never served (and are refused on import).
  int32_t kernel_version = 1;
  // Every candidate, in the order the tuner tries them. The order is part of the determinism
  // contract: same inputs, same measurements → same choice.
  std::vector<std::string> configs;
  // The config a key runs with before tuning; needs no measurement. Returns a member of
  // `configs`; the tuner measures it first (it is the incumbent to beat) even where `applies`
  // would skip it.
  std::function<std::string(const TuneKey&)> heuristic;
  // The parse contract: the typed config of a well-formed config string of this kernel (it need
  // not be in `configs`: a pin may name any config the kernel accepts), else INVALID_ARGUMENT
  // saying why.
  std::function<absl::StatusOr<GemmKernelConfig>(absl::string_view config)> resolve;
  // Optional: false for a candidate that cannot or should not run on the key's shape (a tile
  // far larger than the problem). Empty: every candidate applies.
  std::function<bool(const TuneKey&, absl::string_view config)> applies;
};

// A set of spaces. Register before use; lookups are thread-safe once registration is done.
class ConfigSpaceRegistry {
 public:
  ConfigSpaceRegistry() = default;
  ConfigSpaceRegistry(const ConfigSpaceRegistry&) = delete;
  ConfigSpaceRegistry& operator=(const ConfigSpaceRegistry&) = delete;

  // The spaces kerneld's kernels declare (see RegisterBuiltinSpaces), built once.
  static const ConfigSpaceRegistry& Builtin();

  // ALREADY_EXISTS for a second space with the same (op, variant, arch_family); INVALID_ARGUMENT
  // for an empty space, a missing heuristic or resolve, or a config that fails `resolve`.
  absl::Status Register(ConfigSpace space);

  // nullptr when no space is declared for that op, variant and (exact) arch.
  const ConfigSpace* Find(absl::string_view op, absl::string_view variant,
                          absl::string_view arch) const;
  const ConfigSpace* Find(const TuneKey& key) const { return Find(key.op, key.variant, key.arch); }

  // The candidates that apply to `key`, in declared order. NOT_FOUND without a space.
  absl::StatusOr<std::vector<std::string>> Candidates(const TuneKey& key) const;
  // The heuristic default for `key`. NOT_FOUND without a space.
  absl::StatusOr<std::string> Default(const TuneKey& key) const;
  // The heuristic default for `key`, resolved. NOT_FOUND without a space.
  absl::StatusOr<GemmKernelConfig> DefaultConfig(const TuneKey& key) const;
  // The typed config when `config` may be served for `key`: a space exists (NOT_FOUND), its
  // kernel_version is the key's (FAILED_PRECONDITION: tuned for another build) and the config
  // passes its parse contract (INVALID_ARGUMENT).
  absl::StatusOr<GemmKernelConfig> Resolve(const TuneKey& key, absl::string_view config) const;
  // Resolve's status.
  absl::Status CheckEntry(const TuneKey& key, absl::string_view config) const;

  std::vector<const ConfigSpace*> All() const;

 private:
  std::vector<std::unique_ptr<ConfigSpace>> spaces_;
};

// Adds the spaces of kerneld's kernels to `registry`: the CPU GEMM (cpu), the sm_90a wgmma GEMM
// (sm_90) and the portable tile GEMM (sm_89, gfx94x, gfx950), see below.
absl::Status RegisterBuiltinSpaces(ConfigSpaceRegistry& registry);

// ---- Parse contracts of the built-in spaces. Each accepts exactly the canonical form written
// ---- by its Format function: the fields in this order, each once, values in range.

// CPU GEMM: ParseCpuGemmConfig and FormatCpuGemmConfig of kerneld/kernels/cpu_backend.h
// ("tn64").

// sm_90 GEMM (kernels/cuda/gemm/): the kernel's own format and parser, GemmConfigToString and
// ParseGemmConfig of kerneld/kernels/gemm_fp8_config.h ("bm128.bn128.s6.c1.r8.p0"). The space
// holds every tile, stage and cluster combination CheckGemmConfig accepts (BuiltGemmTiles), each
// with raster groups kSm90RasterGroups and num_ctas 0; clusters of 2 for all but k_grouped_tn
// (which runs unclustered). Variants nt, tn, m_grouped_nt, k_grouped_tn (nn has no space: it
// runs its default). tn also holds cuBLASLt's algorithms "lt0".."lt3" (CublasLtGemmConfig,
// ParseCublasLtGemmConfig), which apply only where the process has loaded cuBLASLt and the
// family takes the shape (CublasLtGemmLoaded, CublasLtGemmTakesShape). Its heuristic is
// HeuristicGemmConfig (kernels/cuda/gemm/gemm_fp8_heuristic.h) with Sm90SmCount(key.device) SMs
// (Sm90KernelHeuristic), or "lt0" for tn where TnDefaultsToCublasLt: the same default the CUDA
// backend runs when a GEMM comes without a config.
constexpr int kSm90RasterGroups[] = {8, 4, 16};
// SMs of an sm_90 device by its name: 114 for an H100 PCIe, else 132 (H100 SXM, H800, H200).
int Sm90SmCount(absl::string_view device_name);
// The sm_90a kernel's own heuristic config for an sm_90 gemm key (never cuBLASLt's).
std::string Sm90KernelHeuristic(const TuneKey& key);

// The portable tile GEMM (kernels/gpu/tile_gemm/; TileGemmConfig, gemm_config.h), the GEMM of
// the devices without the wgmma kernel: one space per family, variants nt, nn, tn, m_grouped_nt
// and k_grouped_tn, each holding exactly tile_gemm::TileGemmSpace of the family's architecture
// (TileGemmSpaceArch), never another family's shapes. Configs "tm128.tn128.ts3"
// (tile_gemm::TileGemmConfigToString / ParseTileGemmConfig). The heuristic is
// tile_gemm::HeuristicTileShape with TileGemmUnits(key.arch, key.device) SMs or CUs, the default
// the backend runs without a config on the devices TileGemmUnits names. A candidate applies only to
// keys whose operands the family's matrix cores read (e4m3fnuz on gfx94x, e4m3fn / e5m2 elsewhere),
// and a 128-row tile only above 64 rows. gfx90a (no FP8 matrix instructions) has no GEMM space.
// The sm_90 spaces resolve these configs too (a pin may run the tile GEMM on sm_90), but hold none.
constexpr const char* kTileGemmFamilies[] = {"sm_89", "gfx94x", "gfx950"};
// The architecture whose tile space and heuristic a family uses: gfx942 for gfx94x.
std::string TileGemmSpaceArch(absl::string_view family);
// SMs (CUs) of a device by its name where the table knows it (L4, L40, L40S, RTX 4090, RTX 6000
// Ada, MI300X, MI300A, MI308X, MI325X, MI350X, MI355X), else a typical count of its architecture.
int TileGemmUnits(absl::string_view arch, absl::string_view device_name);

}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_SPACE_H_
