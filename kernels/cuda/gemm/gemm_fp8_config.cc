#include "kerneld/kernels/gemm_fp8_config.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kd {
namespace {

template <typename... Parts>
absl::Status Invalid(Parts&&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(std::forward<Parts>(parts)...));
}

}  // namespace

std::string GemmConfigToString(const GemmConfig& c) {
  return absl::StrCat("bm", c.block_m, ".bn", c.block_n, ".s", c.stages, ".c", c.cluster, ".r",
                      c.raster_group, ".p", c.num_ctas);
}

absl::Status CheckGemmConfig(const GemmConfig& c) {
  if (c.block_m != 64 && c.block_m != 128 && c.block_m != 192) {
    return Invalid("config.block_m=", c.block_m, " must be 64, 128 or 192");
  }
  if (c.block_n != 32 && c.block_n != 64 && c.block_n != 128 && c.block_n != 192) {
    return Invalid("config.block_n=", c.block_n, " must be 32, 64, 128 or 192");
  }
  if (c.block_m == 64 && c.block_n != 32 && c.block_n != 64) {
    return Invalid("config.block_n=", c.block_n, " is not built with block_m=64 (only 32 or 64)");
  }
  if (c.block_n == 32 && c.block_m != 64) {
    return Invalid("config.block_n=32 is not built with block_m=", c.block_m, " (only 64)");
  }
  if (c.block_m == 192 && c.block_n != 128) {
    return Invalid("config.block_n=", c.block_n, " is not built with block_m=192 (only 128)");
  }
  if (c.cluster != 1 && c.cluster != 2) {
    return Invalid("config.cluster=", c.cluster, " must be 1 or 2");
  }
  if (c.block_m == 64 && c.cluster != 1) {
    return Invalid("config.cluster=", c.cluster, " is not built with block_m=64 (only 1)");
  }
  bool stages_ok;
  if (c.block_n == 192 || c.block_m == 192)
    stages_ok = c.stages == 4;
  else if (c.block_n == 32)
    stages_ok = c.stages == 16;
  else if (c.block_m == 64)
    stages_ok = c.stages == 8;
  else if (c.block_n == 128)
    stages_ok = c.stages >= (c.cluster == 2 ? 5 : 4) && c.stages <= 6;
  else
    stages_ok = c.stages == 8 || (c.cluster == 1 && c.stages == 6);
  if (!stages_ok) {
    return Invalid("config.stages=", c.stages, " is not built for a ", c.block_m, "x", c.block_n,
                   " tile with cluster ", c.cluster,
                   " (128x128: 4..6, 5..6 in clusters of 2; 128x192 and 192x128: 4; 128x64: 6 or 8,"
                   " 8 in clusters of 2; 64x64: 8; 64x32: 16)");
  }
  if (c.raster_group < 1 || c.raster_group > kMaxGemmRasterGroup) {
    return Invalid("config.raster_group=", c.raster_group, " must be in 1..", kMaxGemmRasterGroup);
  }
  if (c.num_ctas < 0 || c.num_ctas > 65535) {
    return Invalid("config.num_ctas=", c.num_ctas, " must be in 0..65535");
  }
  return absl::OkStatus();
}

absl::StatusOr<GemmConfig> ParseGemmConfig(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  if (parts.size() != 6) {
    return Invalid("config \"", text, "\" must have 6 fields like bm128.bn128.s6.c1.r8.p0");
  }
  static constexpr absl::string_view kPrefix[] = {"bm", "bn", "s", "c", "r", "p"};
  int values[6];
  for (int i = 0; i < 6; ++i) {
    absl::string_view field = parts[i];
    if (!absl::ConsumePrefix(&field, kPrefix[i]) || !absl::SimpleAtoi(field, &values[i])) {
      return Invalid("config \"", text, "\": field ", i, " must be ", kPrefix[i], "<integer>");
    }
  }
  GemmConfig c;
  c.block_m = values[0];
  c.block_n = values[1];
  c.stages = values[2];
  c.cluster = values[3];
  c.raster_group = values[4];
  c.num_ctas = values[5];
  const absl::Status s = CheckGemmConfig(c);
  if (!s.ok()) return s;
  // Only the canonical spelling (no sign, no leading zero), so that equal strings are equal
  // configs and a cache never holds two spellings of one config.
  if (GemmConfigToString(c) != text) {
    return Invalid("config \"", text, "\" is not in canonical form \"", GemmConfigToString(c),
                   "\"");
  }
  return c;
}

std::string CublasLtGemmConfigToString(const CublasLtGemmConfig& c) {
  return absl::StrCat("lt", c.algo);
}

absl::StatusOr<CublasLtGemmConfig> ParseCublasLtGemmConfig(absl::string_view text) {
  absl::string_view digits = text;
  CublasLtGemmConfig c;
  if (!absl::ConsumePrefix(&digits, "lt") || !absl::SimpleAtoi(digits, &c.algo)) {
    return Invalid("config \"", text, "\" must be lt<integer>");
  }
  if (c.algo < 0 || c.algo >= kCublasLtGemmAlgos) {
    return Invalid("config.algo=", c.algo, " must be in 0..", kCublasLtGemmAlgos - 1);
  }
  if (CublasLtGemmConfigToString(c) != text) {
    return Invalid("config \"", text, "\" is not in canonical form \"",
                   CublasLtGemmConfigToString(c), "\"");
  }
  return c;
}

std::vector<GemmConfig> BuiltGemmTiles(int raster_group) {
  std::vector<GemmConfig> out;
  for (int block_m : {128, 192, 64}) {
    for (int block_n : {128, 192, 64, 32}) {
      for (int cluster : {1, 2}) {
        for (int stages = 1; stages <= 16; ++stages) {
          GemmConfig c;
          c.block_m = block_m;
          c.block_n = block_n;
          c.stages = stages;
          c.cluster = cluster;
          c.raster_group = raster_group;
          if (CheckGemmConfig(c).ok()) out.push_back(c);
        }
      }
    }
  }
  return out;
}

}  // namespace kd
