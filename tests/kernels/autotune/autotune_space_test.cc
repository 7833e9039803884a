#include "kerneld/kernels/autotune_space.h"

#include <set>

#include "gtest/gtest.h"

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
  EXPECT_EQ(ArchFamily("x86_64"), "cpu");
  EXPECT_EQ(ArchFamily("sm_100"), "sm_100");
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  EXPECT_NE(r.Find("gemm", "nt", "gfx940"), nullptr);
  EXPECT_NE(r.Find("gemm", "m_grouped_nt", "sm_90a"), nullptr);
  EXPECT_EQ(r.Find("gemm", "nt", "sm_100"), nullptr);
  EXPECT_EQ(r.Candidates(Key("sm_100", "nt", 1, 1, 128)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ConfigSpaceTest, Sm90ParseContractAcceptsOnlyTheCanonicalForm) {
  absl::StatusOr<Sm90GemmConfig> c = ParseSm90GemmConfig("bm128.bn256.st3.cl2.rs1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->bm, 128);
  EXPECT_EQ(c->bn, 256);
  EXPECT_EQ(c->st, 3);
  EXPECT_EQ(c->cl, 2);
  EXPECT_EQ(c->rs, 1);
  EXPECT_EQ(FormatSm90GemmConfig(*c), "bm128.bn256.st3.cl2.rs1");
  const char* bad[] = {"",
                       "bn128.bm128.st4.cl1.rs0",   // order
                       "bm128.bn128.st4.cl1",       // missing field
                       "bm128.bn128.st4.cl1.rs0.x1",
                       "bm96.bn128.st4.cl1.rs0",    // bm not allowed
                       "bm256.bn256.st2.cl1.rs0",   // too many accumulators
                       "bm128.bn128.st9.cl1.rs0",
                       "bm128.bn128.st04.cl1.rs0",  // leading zero: not canonical
                       "BM128.bn128.st4.cl1.rs0",
                       "bm128.bn128.st4.cl3.rs0"};
  for (const char* text : bad) {
    EXPECT_EQ(ParseSm90GemmConfig(text).status().code(), absl::StatusCode::kInvalidArgument)
        << text;
  }
}

TEST(ConfigSpaceTest, EveryDeclaredConfigRoundTripsThroughItsParser) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  for (const std::string& c : r.Find("gemm", "nt", "sm_90")->configs) {
    EXPECT_EQ(FormatSm90GemmConfig(*ParseSm90GemmConfig(c)), c);
  }
  for (const std::string& c : r.Find("gemm", "nt", "gfx942")->configs) {
    EXPECT_EQ(FormatHipGemmConfig(*ParseHipGemmConfig(c)), c);
  }
  for (const std::string& c : r.Find("gemm", "nt", "x86_64")->configs) {
    EXPECT_EQ(FormatCpuGemmConfig(*ParseCpuGemmConfig(c)), c);
  }
  EXPECT_EQ(ParseHipGemmConfig("bm128.bn128.bk32.nw4.st2").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCpuGemmConfig("tn48").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigSpaceTest, Sm90StagesFitSharedMemory) {
  for (const std::string& c : ConfigSpaceRegistry::Builtin().Find("gemm", "nt", "sm_90")->configs) {
    const Sm90GemmConfig cfg = *ParseSm90GemmConfig(c);
    const int64_t smem = int64_t{cfg.st} * (cfg.bm + cfg.bn) * 128 + int64_t{cfg.bm} * cfg.bn * 2;
    EXPECT_LE(smem, 227 * 1024) << c;
    EXPECT_GE(cfg.st, 2) << c;
  }
}

TEST(ConfigSpaceTest, CandidatesSkipTilesFarLargerThanTheProblem) {
  const ConfigSpaceRegistry& r = ConfigSpaceRegistry::Builtin();
  absl::StatusOr<std::vector<std::string>> small = r.Candidates(Key("sm_90", "nt", 32, 64, 512));
  absl::StatusOr<std::vector<std::string>> large =
      r.Candidates(Key("sm_90", "nt", 8192, 8192, 4096));
  ASSERT_TRUE(small.ok() && large.ok());
  EXPECT_LT(small->size(), large->size());
  for (const std::string& c : *small) {
    const Sm90GemmConfig cfg = *ParseSm90GemmConfig(c);
    EXPECT_EQ(cfg.bm, 64) << c;
    EXPECT_EQ(cfg.bn, 64) << c;
    EXPECT_EQ(cfg.cl, 1) << c;
  }
  EXPECT_EQ(large->size(), r.Find("gemm", "nt", "sm_90")->configs.size());
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
  s.check = [](absl::string_view c) {
    return c == "rows8" ? absl::OkStatus() : absl::InvalidArgumentError("no");
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
