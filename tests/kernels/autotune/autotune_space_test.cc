#include "kerneld/kernels/autotune_space.h"

#include <algorithm>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/gemm_fp8_config.h"
#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"

namespace kd {
namespace {

TuneKey Key(absl::string_view arch, absl::string_view variant, int64_t m, int64_t n, int64_t k,
            int32_t version = 1) {
  TuneKey key;
  key.op = "gemm";
  key.variant = std::string(variant);
  key.dtypes = "e4m3fn.e4m3fn>bf16";
  key.m = m;
  key.n = n;
  key.k = k;
  key.arch = std::string(arch);
  key.device = "dev";
  key.kernel_version = version;
  return key;
}

TEST(ConfigSpaceTest, BuiltinSpacesRegisterCleanly) {
  ConfigSpaceRegistry registry;
  ASSERT_TRUE(RegisterBuiltinSpaces(registry).ok());
  EXPECT_EQ(registry.All().size(), ConfigSpaceRegistry::Builtin().All().size());
  EXPECT_EQ(RegisterBuiltinSpaces(registry).code(), absl::StatusCode::kAlreadyExists);
}

TEST(ConfigSpaceTest, EverySpaceHasDistinctCanonicalConfigsAndADefaultAmongThem) {
  for (const ConfigSpace* space : ConfigSpaceRegistry::Builtin().All()) {
    SCOPED_TRACE(space->op + "/" + space->variant + "/" + space->arch_family);
    std::set<std::string> seen(space->configs.begin(), space->configs.end());
    EXPECT_EQ(seen.size(), space->configs.size());
    for (int64_t m : {1, 64, 65, 4096}) {
      const TuneKey key = Key(space->arch_family == "cpu" ? "x86_64" : space->arch_family,
                              space->variant, m, 4096, 4096);
      EXPECT_EQ(seen.count(space->heuristic(key)), 1u) << space->heuristic(key);
    }
  }
}

TEST(ConfigSpaceTest, ArchFamiliesGroupCompatibleArchitectures) {
  EXPECT_EQ(ArchFamily("sm_90a"), "sm_90");
  EXPECT_EQ(ArchFamily("gfx942"), "gfx94x");
  EXPECT_EQ(ArchFamily("gfx90a"), "gfx90a");
  EXPECT_EQ(ArchFamily("gfx950"), "gfx950");
  EXPECT_EQ(ArchFamily("sm_89"), "sm_89");
  EXPECT_EQ(ArchFamily("x86_64"), "cpu");
  EXPECT_EQ(ArchFamily("sm_100"), "sm_100");
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  EXPECT_NE(r.Find("gemm", "nt", "gfx940"), nullptr);
  EXPECT_EQ(r.Find("gemm", "nt", "gfx940"), r.Find("gemm", "nt", "gfx942"));
  EXPECT_NE(r.Find("gemm", "m_grouped_nt", "sm_90a"), nullptr);
  EXPECT_EQ(r.Find("gemm", "nt", "sm_100"), nullptr);
  EXPECT_EQ(r.Candidates(Key("sm_100", "nt", 1, 1, 128)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ConfigSpaceTest, Sm90SpaceUsesTheKernelsOwnFormatAndParser) {
  const ConfigSpace* space = ConfigSpaceRegistry::Builtin().Find("gemm", "nt", "sm_90");
  ASSERT_NE(space, nullptr);
  for (const std::string& c : space->configs) {
    absl::StatusOr<GemmConfig> parsed = ParseGemmConfig(c);
    ASSERT_TRUE(parsed.ok()) << c << ": " << parsed.status();
    EXPECT_EQ(GemmConfigToString(*parsed), c);
    absl::StatusOr<GemmKernelConfig> resolved = space->resolve(c);
    ASSERT_TRUE(resolved.ok()) << c << ": " << resolved.status();
    ASSERT_TRUE(std::holds_alternative<GemmConfig>(*resolved)) << c;
    EXPECT_EQ(std::get<GemmConfig>(*resolved), *parsed) << c;
  }
  EXPECT_EQ(space->resolve("bm128.bn128.st4.cl1.rs0").status().code(),
            absl::StatusCode::kInvalidArgument);
  // A pin may name any built config.
  EXPECT_TRUE(space->resolve("bm128.bn64.s6.c1.r3.p100").ok());
}

TEST(ConfigSpaceTest, ResolveGivesEachKernelItsOwnTypedConfig) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  const int32_t cpu = r.Find("gemm", "nt", "x86_64")->kernel_version;
  absl::StatusOr<GemmKernelConfig> c = r.Resolve(Key("x86_64", "nt", 64, 64, 128, cpu), "tn32");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(std::holds_alternative<CpuGemmConfig>(*c));
  EXPECT_EQ(std::get<CpuGemmConfig>(*c).tile_n, 32);
  const int32_t sm90 = r.Find("gemm", "nt", "sm_90")->kernel_version;
  c = r.Resolve(Key("sm_90", "nt", 4096, 4096, 4096, sm90), "bm192.bn128.s4.c2.r16.p0");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(std::holds_alternative<GemmConfig>(*c));
  const GemmConfig& g = std::get<GemmConfig>(*c);
  EXPECT_EQ(g.block_m, 192);
  EXPECT_EQ(g.block_n, 128);
  EXPECT_EQ(g.stages, 4);
  EXPECT_EQ(g.cluster, 2);
  EXPECT_EQ(g.raster_group, 16);
  EXPECT_EQ(g.num_ctas, 0);
  const int32_t tile = r.Find("gemm", "nt", "gfx942")->kernel_version;
  c = r.Resolve(Key("gfx942", "nt", 4096, 4096, 4096, tile), "tm64.tn128.ts2");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(std::holds_alternative<TileGemmConfig>(*c));
  EXPECT_EQ(std::get<TileGemmConfig>(*c), (TileGemmConfig{64, 128, 2}));
  // The default, resolved, is the heuristic's typed config.
  const TuneKey key = Key("sm_90", "nt", 4096, 7168, 8192, sm90);
  c = r.DefaultConfig(key);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, GemmKernelConfig(*ParseGemmConfig(*r.Default(key))));
  EXPECT_EQ(r.Resolve(key, "tn32").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.DefaultConfig(Key("sm_100", "nt", 1, 1, 128)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ConfigSpaceTest, Sm90ParserAcceptsOnlyTheCanonicalFormOfBuiltConfigs) {
  absl::StatusOr<GemmConfig> c = ParseGemmConfig("bm128.bn64.s8.c2.r16.p0");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->block_n, 64);
  EXPECT_EQ(c->stages, 8);
  EXPECT_EQ(c->cluster, 2);
  EXPECT_EQ(c->raster_group, 16);
  const char* bad[] = {"",
                       "bn128.bm128.s6.c1.r8.p0",  // order
                       "bm128.bn128.s6.c1.r8",     // missing field
                       "bm128.bn128.s6.c1.r8.p0.x1",
                       "bm64.bn128.s6.c1.r8.p0",    // block_m not built
                       "bm128.bn96.s6.c1.r8.p0",    // block_n not built
                       "bm128.bn128.s7.c1.r8.p0",   // stages not built for the tile
                       "bm128.bn64.s6.c2.r8.p0",    // not built in a cluster
                       "bm128.bn128.s06.c1.r8.p0",  // leading zero: not canonical
                       "bm128.bn128.s+6.c1.r8.p0",  // sign: not canonical
                       "bm128.bn128.s6.c1.r0.p0",
                       "BM128.bn128.s6.c1.r8.p0"};
  for (const char* text : bad) {
    EXPECT_EQ(ParseGemmConfig(text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// Every tile, stage and cluster combination the kernel accepts is a candidate (clusters for
// all but K-grouped, which runs unclustered), and nothing it rejects is.
TEST(ConfigSpaceTest, Sm90SpaceHoldsExactlyTheTilesTheKernelBuilds) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  for (const char* variant : {"nt", "tn", "m_grouped_nt", "k_grouped_tn"}) {
    SCOPED_TRACE(variant);
    const ConfigSpace* space = r.Find("gemm", variant, "sm_90");
    ASSERT_NE(space, nullptr);
    const bool clusters = std::string(variant) != "k_grouped_tn";
    std::set<std::string> configs(space->configs.begin(), space->configs.end());
    size_t expected = 0;
    for (int raster : kSm90RasterGroups) {
      for (int block_m : {64, 128, 192, 256}) {
        for (int block_n : {32, 64, 96, 128, 192, 256}) {
          for (int cluster : {1, 2, 4}) {
            for (int stages = 1; stages <= 16; ++stages) {
              GemmConfig c;
              c.block_m = block_m;
              c.block_n = block_n;
              c.stages = stages;
              c.cluster = cluster;
              c.raster_group = raster;
              const bool built = CheckGemmConfig(c).ok() && (clusters || cluster == 1);
              expected += built ? 1 : 0;
              EXPECT_EQ(configs.count(GemmConfigToString(c)), built ? 1u : 0u)
                  << GemmConfigToString(c);
            }
          }
        }
      }
    }
    // tn also holds cuBLASLt's first kCublasLtGemmAlgos algorithms.
    const bool cublaslt = std::string(variant) == "tn";
    for (int algo = 0; algo < 8; ++algo) {
      const std::string lt = CublasLtGemmConfigToString({algo});
      const bool held = cublaslt && algo < kCublasLtGemmAlgos;
      expected += held ? 1 : 0;
      EXPECT_EQ(configs.count(lt), held ? 1u : 0u) << lt;
    }
    EXPECT_EQ(configs.size(), expected);
  }
  EXPECT_EQ(r.Find("gemm", "nn", "sm_90"), nullptr);  // the kernel does not run nn
}

TEST(ConfigSpaceTest, CublasLtConfigsResolveForTnAndRoundTrip) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  const int32_t v = r.Find("gemm", "tn", "sm_90")->kernel_version;
  absl::StatusOr<GemmKernelConfig> c = r.Resolve(Key("sm_90", "tn", 4096, 4096, 8192, v), "lt2");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(std::holds_alternative<CublasLtGemmConfig>(*c));
  EXPECT_EQ(std::get<CublasLtGemmConfig>(*c).algo, 2);
  // Only tn runs through cuBLASLt.
  EXPECT_EQ(r.Resolve(Key("sm_90", "nt", 4096, 4096, 8192, v), "lt0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Resolve(Key("sm_90", "k_grouped_tn", 4096, 4096, 8192, v), "lt0").status().code(),
            absl::StatusCode::kInvalidArgument);
  for (int algo = 0; algo < kCublasLtGemmAlgos; ++algo) {
    const std::string text = CublasLtGemmConfigToString({algo});
    absl::StatusOr<CublasLtGemmConfig> parsed = ParseCublasLtGemmConfig(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->algo, algo);
  }
  for (const char* bad : {"lt4", "lt-1", "lt01", "lt", "lt0.bm128", "LT0", "bm128"}) {
    EXPECT_EQ(ParseCublasLtGemmConfig(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_NE(std::string(ParseCublasLtGemmConfig("lt4").status().message()).find("config.algo=4"),
            std::string::npos);
}

// cuBLASLt's configs are candidates only where the process has loaded the library (the CUDA
// backend does at start) and the family takes the shape (M and N multiples of 16); the default
// stays the kernel's unless kTnDefaultsToCublasLt.
TEST(ConfigSpaceTest, CublasLtCandidatesNeedTheLibraryAndAShapeItTakes) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  const int32_t v = r.Find("gemm", "tn", "sm_90")->kernel_version;
  const TuneKey key = Key("sm_90", "tn", 4096, 14336, 8192, v);
  const TuneKey odd = Key("sm_90", "tn", 4100, 14336, 8192, v);
  auto lt_count = [&](const TuneKey& k) {
    absl::StatusOr<std::vector<std::string>> c = r.Candidates(k);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::count_if(c->begin(), c->end(),
                         [](const std::string& s) { return s.rfind("lt", 0) == 0; });
  };
  const bool was = CublasLtGemmLoaded();
  SetCublasLtGemmLoaded(false);
  EXPECT_EQ(lt_count(key), 0);
  EXPECT_EQ(*r.Default(key), Sm90KernelHeuristic(key));
  SetCublasLtGemmLoaded(true);
  EXPECT_EQ(lt_count(key), kCublasLtGemmAlgos);
  EXPECT_EQ(lt_count(odd), 0);
  EXPECT_EQ(*r.Default(key), kTnDefaultsToCublasLt ? "lt0" : Sm90KernelHeuristic(key));
  EXPECT_EQ(*r.Default(odd), Sm90KernelHeuristic(odd));
  SetCublasLtGemmLoaded(was);
}

TEST(ConfigSpaceTest, Sm90DefaultIsTheKernelsHeuristic) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  const int32_t v = r.Find("gemm", "nt", "sm_90")->kernel_version;
  // 32x56 = 1792 tiles of 128x128 (14 waves on 132 SMs) or 16x38 = 608 pairs of 128x192 tiles
  // (10 waves on 66 clusters).
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 7168, 8192, v)),
            GemmConfigToString(HeuristicGemmConfig(4096, 7168, 8192, 1, 132, true, 0)));
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 7168, 8192, v)), "bm128.bn192.s4.c2.r8.p0");
  // With K up to 1536, NT takes 192x128 tiles in clusters of 2 instead, whatever the waves.
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 7168, 1536, v)),
            GemmConfigToString(HeuristicGemmConfig(4096, 7168, 1536, 1, 132, true, 0)));
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 7168, 1536, v)), "bm192.bn128.s4.c2.r8.p0");
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 7168, 1024, v)), "bm192.bn128.s4.c2.r8.p0");
  // Above it 128x192, also in clusters of 2 (which load its scales by TMA) with few waves
  // (4096x2112: 3 waves of 66 pairs; 4096^3: 6).
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 7168, 2048, v)), "bm128.bn192.s4.c2.r8.p0");
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 7168, 1664, v)), "bm128.bn192.s4.c2.r8.p0");
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 2112, 7168, v)), "bm128.bn192.s4.c2.r8.p0");
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 4096, 4096, v)), "bm128.bn192.s4.c2.r8.p0");
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 4096, 2112, 8192, v)), "bm128.bn192.s4.c2.r8.p0");
  // M-grouped keeps 128x192 and pairs its tiles in clusters of 2 (two tiles of one group) when
  // its groups have 4096 rows or more on average, as in the MoE shapes of the benchmark (8
  // experts of 4096 rows); smaller groups would leave more pairs half idle.
  TuneKey mg = Key("sm_90", "m_grouped_nt", 8 * 4096, 7168, 2048, v);
  mg.groups = 8;
  EXPECT_EQ(*r.Default(mg), "bm128.bn192.s4.c2.r8.p0");
  EXPECT_EQ(*r.Default(mg),
            GemmConfigToString(HeuristicGemmConfig(8 * 4096, 7168, 2048, 1, 132, false, 8)));
  mg.n = 4096;
  mg.k = 7168;
  EXPECT_EQ(*r.Default(mg), "bm128.bn192.s4.c2.r8.p0");
  mg.groups = 16;  // 2048 rows per group
  EXPECT_EQ(*r.Default(mg), "bm128.bn192.s4.c1.r8.p0");
  // One group of 4096 rows (the key's groups default to 1) is such a group too.
  EXPECT_EQ(*r.Default(Key("sm_90", "m_grouped_nt", 4096, 7168, 2048, v)),
            "bm128.bn192.s4.c2.r8.p0");
  // TN runs it unclustered (3% slower in clusters; its scales are always copied).
  EXPECT_EQ(*r.Default(Key("sm_90", "tn", 4096, 7168, 2048, v)), "bm128.bn192.s4.c1.r8.p0");
  // 1x56 tiles leave most of 132 SMs idle: 64-column tiles.
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 128, 7168, 2048, v)), "bm128.bn64.s8.c1.r8.p0");
  // At most 64 rows: 64-row tiles, 32 columns wide where 128 such tiles fit 132 SMs in one
  // wave, else 64 (224 32-column tiles).
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 64, 4096, 7168, v)), "bm64.bn32.s16.c1.r8.p0");
  EXPECT_EQ(*r.Default(Key("sm_90", "nt", 64, 7168, 2048, v)), "bm64.bn64.s8.c1.r8.p0");
  // K-grouped: each group has its own output, so tiles count over groups.
  TuneKey kg = Key("sm_90", "k_grouped_tn", 512, 1024, 8192, v);
  EXPECT_EQ(*r.Default(kg), "bm128.bn64.s8.c1.r8.p0");
  kg.groups = 8;
  EXPECT_EQ(*r.Default(kg), "bm128.bn128.s6.c1.r8.p0");
  // The SM count comes from the device name: 98 tiles are enough for 114 SMs, not for 132.
  TuneKey pcie = Key("sm_90", "nt", 128 * 7, 128 * 14, 1024, v);
  EXPECT_EQ(*r.Default(pcie), "bm128.bn64.s8.c1.r8.p0");
  pcie.device = "NVIDIA H100 PCIe";
  EXPECT_EQ(*r.Default(pcie), "bm128.bn128.s6.c1.r8.p0");
  EXPECT_EQ(Sm90SmCount("NVIDIA H100 80GB HBM3"), 132);
  EXPECT_EQ(Sm90SmCount("NVIDIA H100 PCIe"), 114);
}

TEST(ConfigSpaceTest, Sm90CandidatesSkipClustersAndRasterBandsAProblemCannotUse) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  absl::StatusOr<std::vector<std::string>> small = r.Candidates(Key("sm_90", "nt", 64, 4096, 512));
  absl::StatusOr<std::vector<std::string>> large =
      r.Candidates(Key("sm_90", "nt", 8192, 8192, 4096));
  ASSERT_TRUE(small.ok() && large.ok());
  EXPECT_LT(small->size(), large->size());
  for (const std::string& c : *small) {
    const GemmConfig cfg = *ParseGemmConfig(c);
    EXPECT_EQ(cfg.cluster, 1) << c;
    EXPECT_LE(cfg.raster_group, 8) << c;
  }
  EXPECT_EQ(large->size(), r.Find("gemm", "nt", "sm_90")->configs.size());
}

TEST(ConfigSpaceTest, EveryTileAndCpuConfigRoundTripsThroughItsParser) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  for (const char* family : kTileGemmFamilies) {
    for (const std::string& c : r.Find("gemm", "nt", TileGemmSpaceArch(family))->configs) {
      EXPECT_EQ(tile_gemm::TileGemmConfigToString(*tile_gemm::ParseTileGemmConfig(c)), c);
    }
  }
  for (const std::string& c : r.Find("gemm", "nt", "x86_64")->configs) {
    EXPECT_EQ(FormatCpuGemmConfig(*ParseCpuGemmConfig(c)), c);
  }
  // Not canonical, or a tile no build of the kernel has.
  for (const char* bad : {"tm128.tn128", "tm0128.tn128.ts2", "tn128.tm128.ts2", "tm256.tn128.ts2",
                          "tm128.tn128.ts4", "tm64.tn64.ts3", "128x128s2"}) {
    EXPECT_EQ(tile_gemm::ParseTileGemmConfig(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(ParseCpuGemmConfig("tn48").status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- One space per architecture, never widened by another's ------------------------------------

constexpr const char* kGemmVariants[] = {"nt", "nn", "tn", "m_grouped_nt", "k_grouped_tn"};

// Which kernel a config string belongs to, by the space that declares it.
enum class Family { kCpu, kWgmma, kCublasLt, kTile, kOther };
Family FamilyOfConfig(absl::string_view c) {
  if (ParseGemmConfig(c).ok()) return Family::kWgmma;
  if (ParseCublasLtGemmConfig(c).ok()) return Family::kCublasLt;
  if (tile_gemm::ParseTileGemmConfig(c).ok()) return Family::kTile;
  if (ParseCpuGemmConfig(c).ok()) return Family::kCpu;
  return Family::kOther;
}

TEST(ConfigSpaceTest, EachArchitectureHoldsOnlyItsOwnKernelsConfigs) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  struct Arch {
    const char* arch;
    Family family;
  };
  for (const Arch& a : {Arch{"sm_90", Family::kWgmma}, Arch{"sm_89", Family::kTile},
                        Arch{"gfx942", Family::kTile}, Arch{"gfx950", Family::kTile}}) {
    for (const char* variant : kGemmVariants) {
      SCOPED_TRACE(std::string(a.arch) + "/" + variant);
      const ConfigSpace* space = r.Find("gemm", variant, a.arch);
      if (space == nullptr) {
        EXPECT_TRUE(a.family == Family::kWgmma && std::string(variant) == "nn");
        continue;
      }
      for (const std::string& c : space->configs) {
        const Family f = FamilyOfConfig(c);
        // sm_90's TN also holds cuBLASLt's algorithms, an NVIDIA-only family of its own space.
        const bool cublaslt_tn =
            a.family == Family::kWgmma && std::string(variant) == "tn" && f == Family::kCublasLt;
        EXPECT_TRUE(f == a.family || cublaslt_tn) << c;
      }
      // The default of every shape is one of the space's own candidates.
      for (int64_t m : {1, 64, 65, 128, 4096, 65536}) {
        for (int64_t n : {128, 7168}) {
          TuneKey key = Key(a.arch, variant, m, n, 2048);
          if (std::string(a.arch) == "gfx942") key.dtypes = "e4m3fnuz.e4m3fnuz>bf16";
          const std::string def = space->heuristic(key);
          EXPECT_EQ(std::count(space->configs.begin(), space->configs.end(), def), 1) << def;
          absl::StatusOr<std::vector<std::string>> candidates = r.Candidates(key);
          ASSERT_TRUE(candidates.ok()) << candidates.status();
        }
      }
    }
  }
}

TEST(ConfigSpaceTest, TileSpacesAreTheKernelsSpaceOfTheirArchitecture) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  for (const char* arch : {"sm_89", "gfx942", "gfx950"}) {
    std::vector<std::string> want;
    for (const tile_gemm::TileShape& s : tile_gemm::TileGemmSpace(arch)) {
      want.push_back(tile_gemm::TileGemmConfigToString(tile_gemm::ToTileGemmConfig(s)));
    }
    for (const char* variant : kGemmVariants) {
      EXPECT_EQ(r.Find("gemm", variant, arch)->configs, want) << arch << "/" << variant;
    }
  }
  // sm_89's shapes fit its 99 KB of shared memory per block: Hopper's 3-stage 128x128 is not
  // among them.
  EXPECT_EQ(r.Find("gemm", "nt", "sm_89")->configs,
            (std::vector<std::string>{"tm128.tn128.ts2", "tm64.tn128.ts3", "tm128.tn64.ts3"}));
  EXPECT_EQ(r.Find("gemm", "nt", "gfx942")->configs,
            (std::vector<std::string>{"tm128.tn64.ts2", "tm64.tn128.ts2", "tm64.tn64.ts2"}));
}

TEST(ConfigSpaceTest, TileDefaultIsTheKernelsHeuristic) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  struct Case {
    const char* arch;
    const char* device;
    int units;
  };
  for (const Case& c :
       {Case{"sm_89", "NVIDIA L40S", 142}, Case{"sm_89", "NVIDIA L4", 58},
        Case{"sm_89", "NVIDIA GeForce RTX 4090", 128}, Case{"gfx942", "AMD Instinct MI300X", 304},
        Case{"gfx950", "AMD Instinct MI355X", 256}}) {
    EXPECT_EQ(TileGemmUnits(c.arch, c.device), c.units) << c.device;
    for (const char* variant : kGemmVariants) {
      for (int64_t m : {64, 512, 4096}) {
        TuneKey key = Key(c.arch, variant, m, 4096, 4096);
        key.device = c.device;
        key.groups = 4;
        const tile_gemm::TileShape want = tile_gemm::HeuristicTileShape(
            c.arch, m, 4096, std::string(variant) == "k_grouped_tn" ? 4 : 1, c.units);
        EXPECT_EQ(*r.Default(key),
                  tile_gemm::TileGemmConfigToString(tile_gemm::ToTileGemmConfig(want)))
            << c.device << " " << variant << " m=" << m;
      }
    }
  }
  // 4096x4096 is 1024 tiles of 128x64 on 304 CUs, 256 of 128x128 on an L4's 58 SMs: each keeps
  // its space's first shape; 512x512 has fewer tiles than an L40S has SMs: narrower tiles.
  EXPECT_EQ(*r.Default(Key("sm_89", "nt", 4096, 4096, 4096)), "tm128.tn128.ts2");
  EXPECT_EQ(*r.Default(Key("gfx942", "nt", 4096, 4096, 4096)), "tm128.tn64.ts2");
  TuneKey small = Key("sm_89", "nt", 512, 512, 4096);
  small.device = "NVIDIA L40S";
  EXPECT_EQ(*r.Default(small), "tm128.tn64.ts3");
  EXPECT_EQ(*r.Default(Key("sm_89", "nt", 64, 4096, 4096)), "tm64.tn128.ts3");
}

TEST(ConfigSpaceTest, TileCandidatesApplyOnlyToFormatsTheMatrixCoresRead) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  TuneKey fnuz = Key("gfx942", "nt", 4096, 4096, 4096);
  fnuz.dtypes = "e4m3fnuz.e4m3fnuz>bf16";
  EXPECT_EQ(r.Candidates(fnuz)->size(), 3u);
  // MI300's MFMA reads e4m3fnuz: an OCP key has nothing to measure there.
  EXPECT_TRUE(r.Candidates(Key("gfx942", "nt", 4096, 4096, 4096))->empty());
  // gfx950 and NVIDIA read the OCP formats, never e4m3fnuz.
  EXPECT_EQ(r.Candidates(Key("gfx950", "nt", 4096, 4096, 4096))->size(), 3u);
  TuneKey fnuz950 = fnuz;
  fnuz950.arch = "gfx950";
  EXPECT_TRUE(r.Candidates(fnuz950)->empty());
  TuneKey fnuz89 = fnuz;
  fnuz89.arch = "sm_89";
  EXPECT_TRUE(r.Candidates(fnuz89)->empty());
  TuneKey e5m2 = Key("sm_89", "tn", 4096, 4096, 4096);
  e5m2.dtypes = "e4m3fn.e5m2>f32";
  EXPECT_EQ(r.Candidates(e5m2)->size(), 3u);
  // At most 64 rows: no 128-row tile.
  EXPECT_EQ(*r.Candidates(Key("sm_89", "nt", 64, 4096, 4096)),
            (std::vector<std::string>{"tm64.tn128.ts3"}));
}

TEST(ConfigSpaceTest, Gfx90aHasNoGemmSpace) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  for (const char* variant : kGemmVariants) {
    EXPECT_EQ(r.Find("gemm", variant, "gfx90a"), nullptr) << variant;
    EXPECT_EQ(r.Candidates(Key("gfx90a", variant, 4096, 4096, 4096)).status().code(),
              absl::StatusCode::kNotFound);
  }
  // Nor sm_80 or sm_86 (no FP8 matrix instructions).
  EXPECT_EQ(r.Find("gemm", "nt", "sm_80"), nullptr);
  EXPECT_EQ(r.Find("gemm", "nt", "sm_86"), nullptr);
}

// FNV-1a of the configs in order, '\n'-separated: a change of any candidate or of their order
// changes it.
uint64_t Digest(const std::vector<std::string>& configs) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string& c : configs) {
    for (const char ch : c + "\n") h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  }
  return h;
}

// sm_90's candidates are the wgmma kernel's (and cuBLASLt's for TN), listed by size and digest:
// another family's configs never widen them (a tile config resolves there only for a pin). A
// deliberate change to the sm_90 space updates these numbers; its kernel version moves freely.
TEST(ConfigSpaceTest, Sm90SpaceIsPinned) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  struct Pinned {
    const char* variant;
    size_t size;
    uint64_t digest;
  };
  for (const Pinned& p :
       {Pinned{"nt", 42, 11506671945750427217ull}, Pinned{"tn", 46, 13378365049310814377ull},
        Pinned{"m_grouped_nt", 42, 11506671945750427217ull},
        Pinned{"k_grouped_tn", 27, 7593726371243740311ull}}) {
    const ConfigSpace* space = r.Find("gemm", p.variant, "sm_90");
    ASSERT_NE(space, nullptr) << p.variant;
    EXPECT_EQ(space->configs.size(), p.size) << p.variant;
    EXPECT_EQ(Digest(space->configs), p.digest) << p.variant;
  }
  EXPECT_EQ(r.Find("gemm", "nn", "sm_90"), nullptr);
}

TEST(ConfigSpaceTest, Sm90ResolvesATileConfigForAPinButNeverOffersOne) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  const int32_t v = r.Find("gemm", "nt", "sm_90")->kernel_version;
  const TuneKey key = Key("sm_90", "nt", 4096, 4096, 4096, v);
  absl::StatusOr<GemmKernelConfig> c = r.Resolve(key, "tm128.tn128.ts3");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(std::get<TileGemmConfig>(*c), (TileGemmConfig{128, 128, 3}));
  EXPECT_EQ(r.Resolve(key, "tm96.tn128.ts3").status().code(), absl::StatusCode::kInvalidArgument);
  const absl::StatusOr<std::vector<std::string>> candidates = r.Candidates(key);
  ASSERT_TRUE(candidates.ok()) << candidates.status();
  for (const std::string& cand : *candidates) {
    EXPECT_FALSE(tile_gemm::ParseTileGemmConfig(cand).ok()) << cand;
  }
  EXPECT_TRUE(std::holds_alternative<GemmConfig>(*r.DefaultConfig(key)));
  // sm_89 takes no wgmma config: the kernel does not run there.
  const int32_t tile = r.Find("gemm", "nt", "sm_89")->kernel_version;
  EXPECT_EQ(r.Resolve(Key("sm_89", "nt", 4096, 4096, 4096, tile), "bm128.bn128.s6.c1.r8.p0")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConfigSpaceTest, CheckEntryNamesWhyAnEntryCannotBeServed) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  const int32_t v = r.Find("gemm", "nt", "x86_64")->kernel_version;
  EXPECT_TRUE(r.CheckEntry(Key("x86_64", "nt", 64, 64, 128, v), "tn32").ok());
  EXPECT_EQ(r.CheckEntry(Key("x86_64", "nt", 64, 64, 128, v + 1), "tn32").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.CheckEntry(Key("x86_64", "nt", 64, 64, 128, v), "bm128").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.CheckEntry(Key("x86_64", "nn", 64, 64, 128, v), "tn32").code(),
            absl::StatusCode::kNotFound);
}

TEST(ConfigSpaceTest, RegisterRefusesSpacesWithoutHeuristicOrWithUnparsableConfigs) {
  ConfigSpaceRegistry registry;
  ConfigSpace s;
  s.op = "pad";
  s.variant = "a128";
  s.arch_family = "cpu";
  s.configs = {"rows8"};
  s.resolve = [](absl::string_view c) -> absl::StatusOr<GemmKernelConfig> {
    if (c != "rows8") return absl::InvalidArgumentError("no");
    return GemmKernelConfig();
  };
  EXPECT_EQ(registry.Register(s).code(), absl::StatusCode::kInvalidArgument);  // no heuristic
  s.heuristic = [](const TuneKey&) { return std::string("rows8"); };
  s.configs.push_back("rows9");
  EXPECT_EQ(registry.Register(s).code(), absl::StatusCode::kInvalidArgument);
  s.configs.pop_back();
  EXPECT_TRUE(registry.Register(s).ok());
  EXPECT_NE(registry.Find("pad", "a128", "aarch64"), nullptr);
}

}  // namespace
}  // namespace kd
