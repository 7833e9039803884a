#include "kernels/gpu/tile_gemm/tile_gemm_config.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kerneld/kernels/tune_harness.h"
#include "kernels/gpu/device_caps.h"

namespace kd {
namespace tile_gemm {
namespace {

// NVIDIA (tile_gemm_kernels.cu): 128x128 with three stages needs 113.6 KB of shared memory, past
// sm_89's 99 KB per block, so it is Hopper's alone; the others fit every sm_89+ part.
const std::vector<TileShape>& HopperSpace() {
  static const std::vector<TileShape> kSpace = {
      {128, 128, 3}, {128, 128, 2}, {64, 128, 3}, {128, 64, 3}};
  return kSpace;
}
const std::vector<TileShape>& NvidiaSpace() {
  static const std::vector<TileShape> kSpace = {{128, 128, 2}, {64, 128, 3}, {128, 64, 3}};
  return kSpace;
}
// AMD: two stages of at most 192 tile rows fit gfx942's 64 KB of LDS per workgroup.
const std::vector<TileShape>& AmdSpace() {
  static const std::vector<TileShape> kSpace = {{128, 64, 2}, {64, 128, 2}, {64, 64, 2}};
  return kSpace;
}

bool IsHopper(absl::string_view arch) { return arch == "sm_90" || arch == "sm_90a"; }

int64_t Tiles(int64_t rows, int64_t cols, int64_t groups, const TileShape& s) {
  return (rows + s.block_m - 1) / s.block_m * ((cols + s.block_n - 1) / s.block_n) * groups;
}

}  // namespace

ArchFamily FamilyOf(absl::string_view arch) {
  // NVIDIA: the table's sm_XY, or the newest entry below it (the compute_89 PTX runs on every
  // later part); "sm_90a" is sm_90.
  if (absl::ConsumePrefix(&arch, "sm_")) {
    if (!arch.empty() && arch.back() == 'a') arch.remove_suffix(1);
    int version = 0;
    if (!absl::SimpleAtoi(arch, &version)) return ArchFamily::kNone;
    int nearest = -1;
    Fp8MatrixFormats formats = Fp8MatrixFormats::kNone;
    for (const GpuArchCaps& caps : GpuArchTable()) {
      absl::string_view name = caps.arch;
      int listed = 0;
      if (absl::ConsumePrefix(&name, "sm_") && absl::SimpleAtoi(name, &listed) &&
          listed <= version && listed > nearest) {
        nearest = listed;
        formats = caps.fp8;
      }
    }
    return formats == Fp8MatrixFormats::kOcp ? ArchFamily::kNvidia : ArchFamily::kNone;
  }
  // AMD: the table's entry of exactly that gfx target; its FP8 encoding names the MFMA family.
  const GpuArchCaps* caps = FindGpuArch(arch);
  if (caps == nullptr || caps->arch != arch) return ArchFamily::kNone;
  switch (caps->fp8) {
    case Fp8MatrixFormats::kFnuz:
      return ArchFamily::kGfx94x;
    case Fp8MatrixFormats::kOcp:
      return ArchFamily::kGfx950;
    case Fp8MatrixFormats::kNone:
      break;
  }
  return ArchFamily::kNone;
}

std::string TileShapeToString(const TileShape& s) {
  return absl::StrCat(s.block_m, "x", s.block_n, "s", s.stages);
}

absl::StatusOr<TileShape> ParseTileShape(absl::string_view text) {
  const std::vector<absl::string_view> mn = absl::StrSplit(text, 'x');
  TileShape s;
  if (mn.size() == 2) {
    const std::vector<absl::string_view> ns = absl::StrSplit(mn[1], 's');
    if (ns.size() == 2 && absl::SimpleAtoi(mn[0], &s.block_m) &&
        absl::SimpleAtoi(ns[0], &s.block_n) && absl::SimpleAtoi(ns[1], &s.stages) &&
        TileShapeToString(s) == text) {
      return s;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tile gemm config \"", text, "\" is not <block_m>x<block_n>s<stages>"));
}

std::vector<TileShape> TileGemmSpace(absl::string_view arch) {
  switch (FamilyOf(arch)) {
    case ArchFamily::kNvidia:
      return IsHopper(arch) ? HopperSpace() : NvidiaSpace();
    case ArchFamily::kGfx94x:
    case ArchFamily::kGfx950:
      return AmdSpace();
    default:
      return {};
  }
}

TileShape HeuristicTileShape(absl::string_view arch, int64_t rows, int64_t cols, int64_t groups,
                             int units) {
  const ArchFamily family = FamilyOf(arch);
  if (family == ArchFamily::kNone) return TileShape{};
  const bool nvidia = family == ArchFamily::kNvidia;
  const TileShape fallback = TileGemmSpace(arch)[0];
  // At most 64 rows: a 128-row tile would compute half zeros.
  if (rows <= 64) return nvidia ? TileShape{64, 128, 3} : TileShape{64, 128, 2};
  // Fewer tiles than SMs (CUs) leaves some idle: halve the tile's columns.
  if (Tiles(rows, cols, groups, fallback) < units) {
    return nvidia ? TileShape{128, 64, 3} : TileShape{64, 64, 2};
  }
  return fallback;
}

TileGemmConfig ToTileGemmConfig(const TileShape& shape) {
  TileGemmConfig c;
  c.block_m = shape.block_m;
  c.block_n = shape.block_n;
  c.stages = shape.stages;
  return c;
}

TileShape ToTileShape(const TileGemmConfig& config) {
  return TileShape{config.block_m, config.block_n, config.stages};
}

std::string TileGemmConfigToString(const TileGemmConfig& c) {
  return absl::StrCat("tm", c.block_m, ".tn", c.block_n, ".ts", c.stages);
}

absl::StatusOr<TileGemmConfig> ParseTileGemmConfig(absl::string_view text) {
  absl::StatusOr<std::vector<int64_t>> v = ParseConfigFieldValues(text, {"tm", "tn", "ts"});
  if (!v.ok()) return v.status();
  TileGemmConfig c;
  c.block_m = static_cast<int>((*v)[0]);
  c.block_n = static_cast<int>((*v)[1]);
  c.stages = static_cast<int>((*v)[2]);
  if ((*v)[0] != c.block_m || (*v)[1] != c.block_n || (*v)[2] != c.stages ||
      TileGemmConfigToString(c) != text) {
    return absl::InvalidArgumentError(
        absl::StrCat("config \"", text, "\" is not in canonical form tm<M>.tn<N>.ts<S>"));
  }
  for (const char* arch : {"sm_90", "sm_89", "gfx942"}) {
    if (TileGemmRuns(arch, c)) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("config \"", text, "\" tm, tn, ts: no build of the tile gemm has a ", c.block_m,
                   "x", c.block_n, " tile with ", c.stages, " stages"));
}

bool TileGemmRuns(absl::string_view arch, const TileGemmConfig& config) {
  const TileShape shape = ToTileShape(config);
  for (const TileShape& s : TileGemmSpace(arch)) {
    if (s == shape) return true;
  }
  return false;
}

}  // namespace tile_gemm
}  // namespace kd
