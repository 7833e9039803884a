#include "kerneld/kernels/gemm_fp8_config.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

// K (reduction) up to which NT problems that get wide tiles take the 192x128 tile.
constexpr int64_t kShortK = 1536;

// Mean rows per M group from which M-grouped NT pairs its 128x192 tiles in clusters of 2.
constexpr int64_t kClusterGroupRows = 4096;

GemmConfig HeuristicGemmConfig(int64_t rows, int64_t cols, int64_t k, int64_t groups, int sm_count,
                               bool nt, int64_t m_groups) {
  GemmConfig c;
  const int64_t sms = std::max(1, sm_count);
  // NOTE: with at most 64 output rows a 128-row tile loads twice the A rows it uses; the 64x64
  // tile (one consumer warpgroup) loads half as much A per K block. Where 32-column tiles fit the
  // SMs in one wave, the 64x32 tile with 16 stages keeps more of B in flight per SM and needs no
  // split along K: on an H100 it beat 64x64 by 1-28% at five such shapes (64x4096x7168 +10%) and
  // lost 15-20% at two with more than one wave of them (bench/RESULTS.md, session 15).
  if (rows <= 64) {
    c.block_m = 64;
    c.block_n = 64;
    c.stages = 8;
    if (groups * ((cols + 31) / 32) <= sms) {
      c.block_n = 32;
      c.stages = 16;
    }
    return c;
  }
  const int64_t m_tiles = groups * ((rows + 127) / 128);
  const int64_t tiles128 = m_tiles * ((cols + 127) / 128);
  // NOTE: with fewer 128-wide tiles than about 3/4 of the SMs, most of the chip would idle;
  // 64-wide tiles double the count at a lower per-tile efficiency.
  if (tiles128 * 4 < sms * 3) {
    c.block_n = 64;
    c.stages = 8;
    return c;
  }
  // NOTE: a 128x192 tile reads fewer shared-memory and L2 bytes per FLOP than a 128x128 one: on
  // an H100 it did 1.5x the work in 1.32x the time (8192^3, per busy SM). But the waves of
  // persistent CTAs quantize differently: take the tile whose waves are estimated to cost
  // least. Dense NT pairs its tiles in clusters of 2 (sharing the B tile) whatever the waves:
  // there its TMA thread also loads the scales, and on an H100 that made 128x192 c2 4-8% faster
  // while unclustered 128x192 (which keeps the cp.async scale copies) was 3-18% slower than c2
  // at 3 to 42 cluster waves (4096x2112x7168, 4096^3, 8192^3, 16384x8192x5120; bench/RESULTS.md,
  // session 7). Before that, c2 was 1-2% slower with 3 or 6 waves: its pairs quantize the last
  // wave more coarsely. TN (wgrad, 16640x5120x8192) was 3% slower in clusters.
  const int64_t n192 = (cols + 191) / 192;
  const int64_t waves192 = (m_tiles * n192 + sms - 1) / sms;
  if (static_cast<double>(waves192) * 1.32 < static_cast<double>((tiles128 + sms - 1) / sms)) {
    c.block_n = 192;
    c.stages = 4;
    const int64_t clusters = std::max<int64_t>(1, sms / 2);
    const int64_t cluster_waves = ((m_tiles + 1) / 2 * n192 + clusters - 1) / clusters;
    if (nt && m_tiles >= 2) c.cluster = 2;
    // NOTE: M-grouped NT pairs two M tiles of one group (its expert's B tile multicast). On an
    // H100, 8 groups of 4096 rows (32 tiles each), one process: 4.9% faster than unclustered at
    // 4096x7168 per expert and 1.7% at 7168x2048 (bench/RESULTS.md, branch gemm10), where
    // 192x128 in clusters of 2 was 3-5% slower than this. A group with an odd tile count leaves
    // its last pair's second tile idle (up to 1 in t + 1 tiles for a group of t), which groups
    // far smaller than the measured ones would pay for more than the multicast gains: the host
    // cannot see the group sizes (they are on the device), so the rule is on the mean.
    if (m_groups > 0 && rows / m_groups >= kClusterGroupRows && cluster_waves >= 8) {
      c.cluster = 2;
    }
    // NOTE: where K is short, the 192x128 tile (three consumer warpgroups) in clusters of 2 is
    // faster than 128x192 on an H100: with 128x192's TMA scale loads (session 7, two processes,
    // candidates in one loop; bench/RESULTS.md), 192x128 led by 1.7-1.9% at 8192x7168x2048 and
    // 0.8% at 4096x24576x1536 (K 2048 and 1536), and by 0.4-0.8% at 16384x8192x5120 (K 5120),
    // while 128x192 led by 2.6-4.7% at 4096^3 and 1.0-1.7% at 4096x2112x7168 (K 4096, 7168) and
    // by 4-14% with longer K (8192^3, 4096x7168x16384; session 5). Under a sustained load at the
    // power cap (gpu_gemm_bench --power) the order was the same. The cut was at K 2048; the
    // 5120 case, within 1% either way, goes to 128x192. Before the TMA scale loads, 192x128
    // also led at K 4096-7168, hence the earlier cut at 7168. Session 9's scheduler change took
    // more off 128x192's tile boundary than off 192x128's, and in session 10 (two processes,
    // candidates in one loop) 128x192 c2 led by 3.1% at 8192x7168x2048 in both, while
    // 4096x24576x1536 was a tie (-0.9% and +1.8%): the cut is now at K 1536.
    if (nt && groups == 1 && k <= kShortK && (rows + 191) / 192 >= 2) {
      c.block_m = 192;
      c.block_n = 128;
      c.cluster = 2;
    }
  }
  // Clusters of 2 with 128x128 tiles stay off by default: on an H100 they were no faster
  // (bench/RESULTS.md); the autotuner may still pick them.
  return c;
}

}  // namespace kd
