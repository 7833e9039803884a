#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"

#include <algorithm>
#include <atomic>

namespace kd {
namespace {

// K (reduction) up to which NT problems that get wide tiles take the 192x128 tile: its three
// consumer warpgroups hide each block's promotion under two other blocks, which pays where few K
// blocks per tile leave little to amortise a tile boundary over.
constexpr int64_t kShortK = 1536;

// Mean rows per M group from which M-grouped NT pairs its 128x192 tiles in clusters of 2: a group
// with an odd tile count leaves its last pair's second tile idle, which small groups pay for more
// than the multicast of the expert's B tile gains (the group sizes are on the device: the rule is
// on the mean).
constexpr int64_t kClusterGroupRows = 4096;

// Work per busy SM of a 128x192 tile against a 128x128 one: 1.5x the FLOPs in 1.32x the time on
// an H100 (8192^3), from fewer shared-memory and L2 bytes per FLOP.
constexpr double kWideTileTime = 1.32;

}  // namespace

GemmConfig HeuristicGemmConfig(int64_t rows, int64_t cols, int64_t k, int64_t groups, int sm_count,
                               bool nt, int64_t m_groups) {
  GemmConfig c;
  const int64_t sms = std::max(1, sm_count);
  // NOTE: with at most 64 output rows a 128-row tile loads twice the A rows it uses; the 64x64
  // tile (one consumer warpgroup) loads half as much A per K block. Where 32-column tiles fit the
  // SMs in one wave, 64x32 with 16 stages keeps more of B in flight per SM and needs no split
  // along K (64x4096x7168: +10% on an H100); with more than one wave of them it loses 15-20%
  // (docs/decisions/0007-gemm-64x32-tile.md).
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
  // NOTE: the waves of persistent CTAs quantize the two tiles differently: take the one whose
  // waves are estimated to cost least (docs/decisions/0001-gemm-wide-tile.md).
  const int64_t n192 = (cols + 191) / 192;
  const int64_t waves192 = (m_tiles * n192 + sms - 1) / sms;
  if (static_cast<double>(waves192) * kWideTileTime <
      static_cast<double>((tiles128 + sms - 1) / sms)) {
    c.block_n = 192;
    c.stages = 4;
    const int64_t clusters = std::max<int64_t>(1, sms / 2);
    const int64_t cluster_waves = ((m_tiles + 1) / 2 * n192 + clusters - 1) / clusters;
    // NOTE: dense NT pairs its tiles in clusters of 2 whatever the waves: the pair shares its B
    // tile and its TMA thread loads the scales (4-8% faster than unclustered on an H100;
    // docs/decisions/0002-gemm-tma-scale-loads.md). TN (per-row B scales, cp.async) runs 3%
    // slower in clusters.
    if (nt && m_tiles >= 2) c.cluster = 2;
    // NOTE: M-grouped NT pairs two M tiles of one group, its expert's B tile multicast: 2-5%
    // faster than unclustered at 4096 rows per group.
    if (m_groups > 0 && rows / m_groups >= kClusterGroupRows && cluster_waves >= 8) {
      c.cluster = 2;
    }
    // NOTE: where K is short, the 192x128 tile in clusters of 2 runs level with or ahead of
    // 128x192 (K 1024-1536); from K 2048 up 128x192 with TMA scale loads leads
    // (docs/decisions/0006-gemm-short-k-cut.md).
    if (nt && groups == 1 && k <= kShortK && (rows + 191) / 192 >= 2) {
      c.block_m = 192;
      c.block_n = 128;
      c.cluster = 2;
    }
  }
  // Clusters of 2 with 128x128 tiles stay off by default (no faster on an H100); the autotuner may
  // still pick them.
  return c;
}

namespace {
std::atomic<bool> cublaslt_loaded{false};
}  // namespace

bool CublasLtGemmLoaded() { return cublaslt_loaded.load(std::memory_order_acquire); }

void SetCublasLtGemmLoaded(bool loaded) {
  cublaslt_loaded.store(loaded, std::memory_order_release);
}

bool CublasLtGemmTakesShape(int64_t rows, int64_t cols) {
  return rows > 0 && cols > 0 && rows % 16 == 0 && cols % 16 == 0;
}

bool TnDefaultsToCublasLt(int64_t rows, int64_t cols) {
  return kTnDefaultsToCublasLt && CublasLtGemmLoaded() && CublasLtGemmTakesShape(rows, cols);
}

}  // namespace kd
