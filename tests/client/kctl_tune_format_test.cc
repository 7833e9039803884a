#include <sstream>

#include "client/kctl/commands.h"
#include "client/kctl/tune_format.h"
#include "gtest/gtest.h"

namespace kd {
namespace kctl {
namespace {

namespace v1 = ::kerneld::v1;

TEST(TuneShapeTest, ParsesVariantDimsGroupsAndDtype) {
  absl::StatusOr<v1::TuneShape> s = ParseTuneShape("m_grouped_nt:16384x4096x7168:g8:f32");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->op(), "gemm");
  EXPECT_EQ(s->variant(), v1::GEMM_M_GROUPED_NT);
  EXPECT_EQ(s->m(), 16384);
  EXPECT_EQ(s->n(), 4096);
  EXPECT_EQ(s->k(), 7168);
  EXPECT_EQ(s->groups(), 8);
  EXPECT_EQ(s->out_dtype(), v1::DTYPE_F32);
  EXPECT_EQ(FormatTuneShape(*s), "m_grouped_nt:16384x4096x7168:g8:f32");
  s = ParseTuneShape("nt:4096x7168x2048");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->groups(), 1);
  EXPECT_EQ(s->out_dtype(), v1::DTYPE_BF16);
  EXPECT_EQ(FormatTuneShape(*s), "nt:4096x7168x2048");
}

TEST(TuneShapeTest, MalformedShapesAreInvalidArgumentNamingThePart) {
  for (const char* bad : {"", "nt", "xx:1x1x128", "nt:1x1", "nt:0x1x128", "nt:1x1x128:g0",
                          "nt:1x1x128:e4m3fn", "nt:1x1x128:g2:f32:extra", "nt:axbxc"}) {
    EXPECT_EQ(ParseTuneShape(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseTuneShape("xx:1x1x128").status().message().find("\"xx\""), std::string::npos);
}

TEST(TuneShapeTest, FilesSkipCommentsAndBlankLinesAndNameTheBadLine) {
  absl::StatusOr<std::vector<v1::TuneShape>> shapes =
      ParseTuneShapes("# llama shapes\nnt:4096x4096x4096\n\n  tn:4096x4096x8192  # wgrad\n");
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  ASSERT_EQ(shapes->size(), 2u);
  EXPECT_EQ((*shapes)[1].variant(), v1::GEMM_TN);
  const absl::Status bad = ParseTuneShapes("nt:1x1x128\nnt:1x1\n").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("line 2"), std::string::npos) << bad;
}

TEST(TuneFormatTest, ProgressLineShowsBarCountShapeAndEta) {
  v1::TuneProgress p;
  p.set_index(2);
  p.set_total(4);
  *p.mutable_shape() = *ParseTuneShape("nt:128x256x512");
  p.set_eta_seconds(80);
  EXPECT_EQ(ProgressLine(p, 8), "[######..] 3/4  nt:128x256x512  eta 1m20s");
}

TEST(TuneFormatTest, TableShowsDefaultTunedAndSpeedupAndErrors) {
  v1::TuneProgress a;
  *a.mutable_shape() = *ParseTuneShape("nt:128x256x512");
  a.set_default_seconds(2e-3);
  a.set_tuned_seconds(1e-3);
  a.set_config("tn128");
  v1::TuneProgress b;
  *b.mutable_shape() = *ParseTuneShape("nn:128x256x512");
  b.set_error("NOT_FOUND: no config space for gemm nn on x86_64");
  const std::string table = FormatTuneTable({a, b});
  EXPECT_NE(table.find("SPEEDUP"), std::string::npos) << table;
  EXPECT_NE(table.find("2.00 ms"), std::string::npos) << table;
  EXPECT_NE(table.find("1.00 ms"), std::string::npos) << table;
  EXPECT_NE(table.find("2.00x"), std::string::npos) << table;
  EXPECT_NE(table.find("tn128"), std::string::npos) << table;
  EXPECT_NE(table.find("no config space"), std::string::npos) << table;
  EXPECT_EQ(FormatTuneTable({a}).find("ERROR"), std::string::npos);
}

TEST(TuneFormatTest, KernelTimesPickTheirUnit) {
  EXPECT_EQ(FormatKernelTime(0), "-");
  EXPECT_EQ(FormatKernelTime(5e-7), "500 ns");
  EXPECT_EQ(FormatKernelTime(4.52e-5), "45.2 us");
  EXPECT_EQ(FormatKernelTime(2.5), "2.50 s");
}

TEST(TuneFormatTest, CacheListingAsTableAndJson) {
  v1::ListCacheResponse list;
  list.set_path("/var/lib/kerneld/autotune-cpu-x.cache");
  v1::CacheEntry* e = list.add_entries();
  e->set_key("gemm:nt:e4m3fn.e4m3fn>bf16:m128:n256:k512:g1:x86_64:v1:cpu");
  e->set_config("tn32");
  e->set_seconds(1e-3);
  e->set_default_seconds(1.5e-3);
  e->set_pinned(true);
  const std::string table = FormatCacheTable(list);
  EXPECT_NE(table.find("1.50x"), std::string::npos) << table;
  EXPECT_NE(table.find("pinned"), std::string::npos) << table;
  EXPECT_NE(table.find("1 entries, file /var/lib/kerneld/"), std::string::npos) << table;
  const std::string json = FormatCacheJson(list);
  EXPECT_NE(json.find("\"config\": \"tn32\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"pinned\": true"), std::string::npos) << json;
}

int Kctl(const std::vector<std::string>& args, std::string* err = nullptr) {
  std::ostringstream out, e;
  const int code = RunKctl(args, "/nonexistent/admin.sock", out, e);
  if (err != nullptr) *err = e.str();
  return code;
}

TEST(KctlTuneTest, UsageErrorsExitTwoBeforeConnecting) {
  std::string err;
  EXPECT_EQ(Kctl({"tune"}, &err), kExitUsage);
  EXPECT_NE(err.find("--from_misses"), std::string::npos) << err;
  EXPECT_EQ(Kctl({"tune", "nt:1x1"}), kExitUsage);
  EXPECT_EQ(Kctl({"tune", "nt:1x1x128", "--budget=-3"}), kExitUsage);
  EXPECT_EQ(Kctl({"tune", "nt:1x1x128", "--device=x"}), kExitUsage);
  EXPECT_EQ(Kctl({"tune", "--shapes=/nonexistent/shapes.txt"}), kExitUsage);
  EXPECT_EQ(Kctl({"cache"}), kExitUsage);
  EXPECT_EQ(Kctl({"cache", "frob"}), kExitUsage);
  EXPECT_EQ(Kctl({"cache", "pin", "key-only"}), kExitUsage);
  EXPECT_EQ(Kctl({"cache", "unpin"}), kExitUsage);
  EXPECT_EQ(Kctl({"cache", "import"}), kExitUsage);
  EXPECT_EQ(Kctl({"cache", "list", "--include_pinned"}), kExitUsage);
}

TEST(KctlTuneTest, NoDaemonExitsOne) {
  std::string err;
  EXPECT_EQ(Kctl({"--timeout=0.2", "tune", "nt:128x256x512"}, &err), kExitFailure);
  EXPECT_NE(err.find("kctl: tune:"), std::string::npos) << err;
  EXPECT_EQ(Kctl({"--timeout=0.2", "cache", "list"}), kExitFailure);
}

}  // namespace
}  // namespace kctl
}  // namespace kd
