#include <sstream>
#include <string>
#include <vector>

#include "client/kctl/commands.h"
#include "gtest/gtest.h"

namespace kd {
namespace kctl {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result Kctl(const std::vector<std::string>& args, const std::string& env = "") {
  std::ostringstream out, err;
  const int code = RunKctl(args, env, out, err);
  return {code, out.str(), err.str()};
}

TEST(KctlTest, NoCommandPrintsUsageAndExitsTwo) {
  const Result r = Kctl({});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("usage: kctl"), std::string::npos);
}

TEST(KctlTest, UnknownCommandPrintsUsageAndExitsTwo) {
  const Result r = Kctl({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown command \"frobnicate\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: kctl"), std::string::npos);
}

TEST(KctlTest, HelpPrintsUsageToStdoutAndExitsZero) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"help"}}) {
    const Result r = Kctl(args);
    EXPECT_EQ(r.code, kExitOk);
    EXPECT_NE(r.out.find("status [--json]"), std::string::npos) << r.out;
  }
}

TEST(KctlTest, UnknownOptionOfACommandExitsTwo) {
  const Result r = Kctl({"status", "--frob"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--frob"), std::string::npos) << r.err;
}

TEST(KctlTest, SingleDashOptionExitsTwo) { EXPECT_EQ(Kctl({"status", "-j"}).code, kExitUsage); }

TEST(KctlTest, BadTimeoutExitsTwo) {
  EXPECT_EQ(Kctl({"status", "--timeout=soon"}).code, kExitUsage);
  EXPECT_EQ(Kctl({"status", "--timeout=-1"}).code, kExitUsage);
}

TEST(KctlTest, StatusWithNoDaemonPrintsTheStatusAndExitsOne) {
  const Result r =
      Kctl({"status", "--admin_socket=/nonexistent/kerneld/admin.sock", "--timeout=0.2"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_NE(r.err.find("UNAVAILABLE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/kerneld/admin.sock"), std::string::npos) << r.err;
}

TEST(KctlTest, EnvironmentOverridesTheDefaultSocketAndTheFlagOverridesBoth) {
  Result r = Kctl({"status", "--timeout=0.2"}, "/nonexistent/from-env.sock");
  EXPECT_NE(r.err.find("/nonexistent/from-env.sock"), std::string::npos) << r.err;
  r = Kctl({"--admin_socket=/nonexistent/from-flag.sock", "status", "--timeout=0.2"},
           "/nonexistent/from-env.sock");
  EXPECT_NE(r.err.find("/nonexistent/from-flag.sock"), std::string::npos) << r.err;
  r = Kctl({"status", "--timeout=0.2"});
  EXPECT_NE(r.err.find("/run/kerneld/admin.sock"), std::string::npos) << r.err;
}

TEST(KctlTest, HealthWithNoDaemonExitsOne) {
  const Result r = Kctl({"health", "--socket=/nonexistent/kerneld.sock", "--timeout=0.2"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_NE(r.err.find("UNAVAILABLE"), std::string::npos) << r.err;
}

TEST(ParseCommandLineTest, SplitsWordsAndOptions) {
  const absl::StatusOr<CommandLine> line =
      ParseCommandLine({"cache", "--json", "export", "--out=a=b", "--", "--literal"});
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->words, (std::vector<std::string>{"cache", "export", "--literal"}));
  EXPECT_EQ(line->options.at("json"), "");
  EXPECT_EQ(line->options.at("out"), "a=b");
}

TEST(ParseCommandLineTest, MalformedOptionsAreInvalidArgument) {
  EXPECT_EQ(ParseCommandLine({"--=x"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCommandLine({"-x"}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kctl
}  // namespace kd
