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

namespace kd {
namespace {

bool OneOf(int64_t v, std::initializer_list<int64_t> allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

absl::Status OutOfRange(absl::string_view config, absl::string_view field, int64_t v,
                        absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("config \"", config, "\" ", field, "=", v, " must be ", rule));
}

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

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

// ---- HIP GEMM -------------------------------------------------------------------------------

constexpr int32_t kHipGemmVersion = 1;

ConfigSpace HipGemmSpace(absl::string_view variant, absl::string_view family) {
  ConfigSpace s;
  s.op = "gemm";
  s.variant = std::string(variant);
  s.arch_family = std::string(family);
  s.kernel_version = kHipGemmVersion;
  for (int bm : {64, 128, 256}) {
    for (int bn : {64, 128, 256}) {
      if (bm * bn > 256 * 128) continue;
      for (int bk : {64, 128}) {
        for (int nw : {4, 8}) s.configs.push_back(FormatHipGemmConfig({bm, bn, bk, nw, 2}));
      }
    }
  }
  // NOTE: MI300's 64-lane wavefronts and larger register file favour 256-wide N tiles with a
  // 64-deep K tile on gfx94x; gfx90a (no FP8 units, emulated) keeps the square tile.
  const bool gfx94x = family == "gfx94x";
  s.heuristic = [gfx94x](const TuneKey& key) {
    if (gfx94x && key.n >= 256 && key.m > 64) return FormatHipGemmConfig({128, 256, 64, 8, 2});
    return FormatHipGemmConfig({key.m <= 64 ? 64 : 128, 128, 128, 4, 2});
  };
  s.resolve = [](absl::string_view c) -> absl::StatusOr<GemmKernelConfig> {
    absl::StatusOr<HipGemmConfig> config = ParseHipGemmConfig(c);
    if (!config.ok()) return config.status();
    return *config;
  };
  s.applies = [](const TuneKey& key, absl::string_view c) {
    auto cfg = ParseHipGemmConfig(c);
    if (!cfg.ok()) return false;
    return cfg->bm <= std::max<int64_t>(64, RoundUp(key.m, 64)) &&
           cfg->bn <= std::max<int64_t>(64, RoundUp(key.n, 64));
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
    status.Update(registry.Register(Sm90GemmSpace(variant)));
  }
  for (const char* variant : {"nt", "nn", "tn", "m_grouped_nt", "k_grouped_tn"}) {
    status.Update(registry.Register(HipGemmSpace(variant, "gfx90a")));
    status.Update(registry.Register(HipGemmSpace(variant, "gfx94x")));
  }
  return status;
}

int Sm90SmCount(absl::string_view device_name) {
  return absl::StrContains(device_name, "PCIe") ? 114 : 132;
}

absl::StatusOr<HipGemmConfig> ParseHipGemmConfig(absl::string_view config) {
  auto v = ParseConfigFieldValues(config, {"bm", "bn", "bk", "nw", "st"});
  if (!v.ok()) return v.status();
  const std::vector<int64_t>& f = *v;
  if (!OneOf(f[0], {64, 128, 256})) return OutOfRange(config, "bm", f[0], "64, 128 or 256");
  if (!OneOf(f[1], {64, 128, 256})) return OutOfRange(config, "bn", f[1], "64, 128 or 256");
  if (f[0] * f[1] > 256 * 128) {
    return OutOfRange(config, "bm*bn", f[0] * f[1], "<= 32768 (256x128 accumulators)");
  }
  if (!OneOf(f[2], {64, 128})) return OutOfRange(config, "bk", f[2], "64 or 128");
  if (!OneOf(f[3], {4, 8})) return OutOfRange(config, "nw", f[3], "4 or 8");
  if (!OneOf(f[4], {1, 2})) return OutOfRange(config, "st", f[4], "1 or 2");
  HipGemmConfig c;
  c.bm = static_cast<int>(f[0]);
  c.bn = static_cast<int>(f[1]);
  c.bk = static_cast<int>(f[2]);
  c.nw = static_cast<int>(f[3]);
  c.st = static_cast<int>(f[4]);
  return c;
}

std::string FormatHipGemmConfig(const HipGemmConfig& c) {
  return absl::StrCat("bm", c.bm, ".bn", c.bn, ".bk", c.bk, ".nw", c.nw, ".st", c.st);
}

}  // namespace kd
