#include <algorithm>
#include <initializer_list>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kerneld/kernels/autotune_space.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/gemm_fp8_config.h"
#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"

namespace kd {
namespace {

// ---- CPU GEMM -------------------------------------------------------------------------------

constexpr int32_t kCpuGemmVersion = 1;

ConfigSpace CpuGemmSpace() {
  ConfigSpace s;
  s.op = "gemm";
  s.variant = "nt";
  s.arch_family = "cpu";
  s.kernel_version = kCpuGemmVersion;
  for (int64_t w : {16, 32, 64, 128, 256}) s.configs.push_back(FormatCpuGemmConfig(w));
  s.heuristic = [](const TuneKey&) { return FormatCpuGemmConfig(64); };
  s.resolve = [](absl::string_view c) -> absl::StatusOr<GemmKernelConfig> {
    absl::StatusOr<int64_t> tile_n = ParseCpuGemmConfig(c);
    if (!tile_n.ok()) return tile_n.status();
    CpuGemmConfig config;
    config.tile_n = *tile_n;
    return config;
  };
  // A tile wider than N only repeats the narrower one's work: skip it, but keep the default.
  s.applies = [](const TuneKey& key, absl::string_view c) {
    auto w = ParseCpuGemmConfig(c);
    return w.ok() && (*w <= 64 || *w / 2 < key.n);
  };
  return s;
}

// ---- sm_90 GEMM -----------------------------------------------------------------------------

// Bumped whenever a change to the kernel or its heuristic moves its timings (git log of this
// line says which), so that entries tuned by an older build are not served.
constexpr int32_t kSm90GemmVersion = 18;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Separate outputs of the key's problem, as DefaultGemmConfig counts them.
int64_t Sm90Groups(const TuneKey& key) { return key.variant == "k_grouped_tn" ? key.groups : 1; }

bool IsCublasLtConfig(absl::string_view text) { return absl::StartsWith(text, "lt"); }

ConfigSpace Sm90GemmSpace(absl::string_view variant) {
  ConfigSpace s;
  s.op = "gemm";
  s.variant = std::string(variant);
  s.arch_family = "sm_90";
  s.kernel_version = kSm90GemmVersion;
  // K-grouped runs unclustered (LaunchGemmFp8 says why): its cluster configs would repeat c1.
  const bool clusters = variant != "k_grouped_tn";
  for (int raster : kSm90RasterGroups) {
    for (const GemmConfig& c : BuiltGemmTiles(raster)) {
      if (c.cluster == 1 || clusters) s.configs.push_back(GemmConfigToString(c));
    }
  }
  // TN through cuBLASLt: each of the algorithms its heuristic ranks first.
  const bool cublaslt = variant == "tn";
  if (cublaslt) {
    for (int algo = 0; algo < kCublasLtGemmAlgos; ++algo) {
      s.configs.push_back(CublasLtGemmConfigToString({algo}));
    }
  }
  s.heuristic = [cublaslt](const TuneKey& key) {
    if (cublaslt && TnDefaultsToCublasLt(key.m, key.n)) return CublasLtGemmConfigToString({0});
    return Sm90KernelHeuristic(key);
  };
  s.resolve = [cublaslt](absl::string_view c) -> absl::StatusOr<GemmKernelConfig> {
    if (cublaslt && IsCublasLtConfig(c)) {
      absl::StatusOr<CublasLtGemmConfig> config = ParseCublasLtGemmConfig(c);
      if (!config.ok()) return config.status();
      return *config;
    }
    absl::StatusOr<GemmConfig> config = ParseGemmConfig(c);
    if (!config.ok()) return config.status();
    return *config;
  };
  // A cluster pairs two M tiles: pointless with one. A raster band of more M tiles than the
  // problem has orders the tiles as the 8-tile band does. cuBLASLt's configs apply where this
  // process has loaded it and the family takes the shape.
  s.applies = [](const TuneKey& key, absl::string_view text) {
    if (IsCublasLtConfig(text)) {
      return ParseCublasLtGemmConfig(text).ok() && CublasLtGemmLoaded() &&
             CublasLtGemmTakesShape(key.m, key.n);
    }
    auto c = ParseGemmConfig(text);
    if (!c.ok()) return false;
    const int64_t m_tiles = CeilDiv(key.m, c->block_m);
    if (c->cluster > 1 && m_tiles < 2) return false;
    return c->raster_group <= 8 || c->raster_group < m_tiles;
  };
  return s;
}

// ---- The portable tile GEMM (sm_89, gfx94x, gfx950) ---------------------------------------

// Bumped whenever a change to the kernel or its heuristic moves its timings.
constexpr int32_t kTileGemmVersion = 1;

bool IsTileGemmConfig(absl::string_view text) { return absl::StartsWith(text, "tm"); }

absl::StatusOr<GemmKernelConfig> ResolveTileGemmConfig(absl::string_view c) {
  absl::StatusOr<TileGemmConfig> config = tile_gemm::ParseTileGemmConfig(c);
  if (!config.ok()) return config.status();
  return *config;
}

// Whether the key's operands are the FP8 formats the family's matrix instructions read: e4m3fnuz
// on gfx94x, the OCP formats elsewhere (tile_gemm_args.h).
bool TileGemmTakesDTypes(absl::string_view family, absl::string_view dtypes) {
  const absl::string_view inputs = dtypes.substr(0, dtypes.find('>'));
  const std::vector<absl::string_view> operands = absl::StrSplit(inputs, '.');
  for (absl::string_view operand : operands) {
    if ((operand == "e4m3fnuz") != (family == "gfx94x")) return false;
  }
  return operands.size() == 2;
}

// Separate outputs of the key's problem, as the tile GEMM's launcher counts them.
int64_t TileGroups(const TuneKey& key) { return key.variant == "k_grouped_tn" ? key.groups : 1; }

ConfigSpace TileGemmConfigSpace(absl::string_view variant, absl::string_view family) {
  ConfigSpace s;
  s.op = "gemm";
  s.variant = std::string(variant);
  s.arch_family = std::string(family);
  s.kernel_version = kTileGemmVersion;
  const std::string arch = TileGemmSpaceArch(family);
  for (const tile_gemm::TileShape& shape : tile_gemm::TileGemmSpace(arch)) {
    s.configs.push_back(tile_gemm::TileGemmConfigToString(tile_gemm::ToTileGemmConfig(shape)));
  }
  s.heuristic = [arch](const TuneKey& key) {
    const tile_gemm::TileShape shape = tile_gemm::HeuristicTileShape(
        arch, key.m, key.n, TileGroups(key), TileGemmUnits(key.arch, key.device));
    return tile_gemm::TileGemmConfigToString(tile_gemm::ToTileGemmConfig(shape));
  };
  s.resolve = ResolveTileGemmConfig;
  // A 128-row tile on at most 64 rows computes half zeros; a format the family's matrix cores do
  // not read cannot run at all.
  s.applies = [family = s.arch_family](const TuneKey& key, absl::string_view text) {
    absl::StatusOr<TileGemmConfig> c = tile_gemm::ParseTileGemmConfig(text);
    if (!c.ok() || !TileGemmTakesDTypes(family, key.dtypes)) return false;
    return c->block_m <= 64 || key.m > 64;
  };
  return s;
}

// sm_90 runs the tile GEMM only when a config names it (a pinned entry): its configs resolve, but
// the space's candidates and its default stay the wgmma kernel's.
ConfigSpace WithPinnableTileGemm(ConfigSpace s) {
  s.resolve = [own = std::move(s.resolve)](absl::string_view c) {
    return IsTileGemmConfig(c) ? ResolveTileGemmConfig(c) : own(c);
  };
  return s;
}

}  // namespace

std::string Sm90KernelHeuristic(const TuneKey& key) {
  return GemmConfigToString(HeuristicGemmConfig(key.m, key.n, key.k, Sm90Groups(key),
                                                Sm90SmCount(key.device), key.variant == "nt",
                                                key.variant == "m_grouped_nt" ? key.groups : 0));
}

const ConfigSpaceRegistry& ConfigSpaceRegistry::Builtin() {
  static const ConfigSpaceRegistry* const kRegistry = [] {
    auto* r = new ConfigSpaceRegistry();
    const absl::Status s = RegisterBuiltinSpaces(*r);
    (void)s;  // the built-in spaces are checked by autotune_space_test
    return r;
  }();
  return *kRegistry;
}

absl::Status ConfigSpaceRegistry::Register(ConfigSpace space) {
  const std::string name = absl::StrCat(space.op, "/", space.variant, "/", space.arch_family);
  if (space.op.empty() || space.variant.empty() || space.arch_family.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("space ", name, " needs op, variant and arch"));
  }
  if (space.configs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("space ", name, " declares no config"));
  }
  if (!space.heuristic || !space.resolve) {
    return absl::InvalidArgumentError(
        absl::StrCat("space ", name, " needs a heuristic and a resolve"));
  }
  for (const std::string& c : space.configs) {
    const absl::Status s = space.resolve(c).status();
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("space ", name, ": ", s.message()));
    }
  }
  for (const auto& existing : spaces_) {
    if (existing->op == space.op && existing->variant == space.variant &&
        existing->arch_family == space.arch_family) {
      return absl::AlreadyExistsError(absl::StrCat("space ", name, " is already registered"));
    }
  }
  spaces_.push_back(std::make_unique<ConfigSpace>(std::move(space)));
  return absl::OkStatus();
}

const ConfigSpace* ConfigSpaceRegistry::Find(absl::string_view op, absl::string_view variant,
                                             absl::string_view arch) const {
  const std::string family = ArchFamily(arch);
  for (const auto& s : spaces_) {
    if (s->op == op && s->variant == variant && s->arch_family == family) return s.get();
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::string>> ConfigSpaceRegistry::Candidates(const TuneKey& key) const {
  const ConfigSpace* space = Find(key);
  if (space == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no config space for ", key.op, " ", key.variant, " on ", key.arch));
  }
  std::vector<std::string> out;
  for (const std::string& c : space->configs) {
    if (!space->applies || space->applies(key, c)) out.push_back(c);
  }
  return out;
}

absl::StatusOr<std::string> ConfigSpaceRegistry::Default(const TuneKey& key) const {
  const ConfigSpace* space = Find(key);
  if (space == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no config space for ", key.op, " ", key.variant, " on ", key.arch));
  }
  return space->heuristic(key);
}

absl::StatusOr<GemmKernelConfig> ConfigSpaceRegistry::DefaultConfig(const TuneKey& key) const {
  const ConfigSpace* space = Find(key);
  if (space == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no config space for ", key.op, " ", key.variant, " on ", key.arch));
  }
  return space->resolve(space->heuristic(key));
}

absl::Status ConfigSpaceRegistry::CheckEntry(const TuneKey& key, absl::string_view config) const {
  return Resolve(key, config).status();
}

absl::StatusOr<GemmKernelConfig> ConfigSpaceRegistry::Resolve(const TuneKey& key,
                                                              absl::string_view config) const {
  const ConfigSpace* space = Find(key);
  if (space == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no config space for ", key.op, " ", key.variant, " on ", key.arch));
  }
  if (space->kernel_version != key.kernel_version) {
    return absl::FailedPreconditionError(absl::StrCat("key was tuned for kernel version ",
                                                      key.kernel_version, "; this build has ",
                                                      space->kernel_version));
  }
  return space->resolve(config);
}

std::vector<const ConfigSpace*> ConfigSpaceRegistry::All() const {
  std::vector<const ConfigSpace*> out;
  for (const auto& s : spaces_) out.push_back(s.get());
  return out;
}

absl::Status RegisterBuiltinSpaces(ConfigSpaceRegistry& registry) {
  absl::Status status = registry.Register(CpuGemmSpace());
  for (const char* variant : {"nt", "tn", "m_grouped_nt", "k_grouped_tn"}) {
    status.Update(registry.Register(WithPinnableTileGemm(Sm90GemmSpace(variant))));
  }
  // gfx90a has no FP8 matrix instructions: no GEMM space (the backend answers UNIMPLEMENTED).
  for (const char* family : kTileGemmFamilies) {
    for (const char* variant : {"nt", "nn", "tn", "m_grouped_nt", "k_grouped_tn"}) {
      status.Update(registry.Register(TileGemmConfigSpace(variant, family)));
    }
  }
  return status;
}

int Sm90SmCount(absl::string_view device_name) {
  return absl::StrContains(device_name, "PCIe") ? 114 : 132;
}

std::string TileGemmSpaceArch(absl::string_view family) {
  return family == "gfx94x" ? "gfx942" : std::string(family);
}

int TileGemmUnits(absl::string_view arch, absl::string_view device_name) {
  struct Part {
    const char* name;
    int units;
  };
  // NOTE: more specific names first ("L40S" before "L40", "MI300X" before "MI300").
  static constexpr Part kParts[] = {{"L40S", 142},         {"L40", 142},      {"L4", 58},
                                    {"RTX 6000 Ada", 142}, {"RTX 4090", 128}, {"MI325X", 304},
                                    {"MI300X", 304},       {"MI300A", 228},   {"MI308X", 80},
                                    {"MI355X", 256},       {"MI350X", 256}};
  for (const Part& p : kParts) {
    if (absl::StrContains(device_name, p.name)) return p.units;
  }
  if (ArchFamily(arch) == "sm_90") return Sm90SmCount(device_name);
  if (ArchFamily(arch) == "gfx94x") return 304;
  if (arch == "gfx950") return 256;
  return 128;
}

}  // namespace kd
