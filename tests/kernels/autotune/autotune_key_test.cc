#include "kerneld/kernels/autotune_key.h"

#include "gtest/gtest.h"

namespace kd {
namespace {

DeviceProperties H100() {
  DeviceProperties p;
  p.name = "NVIDIA H100 80GB HBM3";
  p.arch = "sm_90";
  return p;
}

TEST(TuneKeyTest, CanonicalStringNamesEveryField) {
  const TuneKey key = MakeGemmTuneKey(GemmVariant::kNT, DType::kE4M3FN, DType::kBF16, 4096, 7168,
                                      2048, 1, H100(), 3);
  EXPECT_EQ(key.ToString(),
            "gemm:nt:e4m3fn.e4m3fn>bf16:m4096:n7168:k2048:g1:sm_90:v3:"
            "NVIDIA H100 80GB HBM3");
}

TEST(TuneKeyTest, ParseRoundTripsAndEscapesSeparatorsInDeviceName) {
  DeviceProperties odd;
  odd.name = "Weird:GPU 100%\tx";
  odd.arch = "gfx942";
  const TuneKey key =
      MakeGemmTuneKey(GemmVariant::kNN, DType::kE4M3FNUZ, DType::kF32, 100, 200, 384, 1, odd, 1);
  const std::string text = key.ToString();
  EXPECT_EQ(text.find('\t'), std::string::npos);
  EXPECT_NE(text.find("Weird%3AGPU 100%25%09x"), std::string::npos) << text;
  absl::StatusOr<TuneKey> parsed = ParseTuneKey(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, key);
  EXPECT_EQ(parsed->device, "Weird:GPU 100%\tx");
}

TEST(TuneKeyTest, MalformedKeysAreInvalidArgument) {
  const char* bad[] = {
      "",
      "gemm:nt:e4m3fn.e4m3fn>bf16:m1:n1:k128:g1:sm_90:v1",            // 9 fields
      "gemm:nt:e4m3fn.e4m3fn>bf16:m1:n1:k128:g1:sm_90:v1:dev:extra",  // 11 fields
      "gemm:nt:e4m3fn.e4m3fn>bf16:x1:n1:k128:g1:sm_90:v1:dev",        // wrong prefix
      "gemm:nt:e4m3fn.e4m3fn>bf16:m0:n1:k128:g1:sm_90:v1:dev",        // m < 1
      "gemm:nt:e4m3fn.e4m3fn>bf16:m1:n1:k128:g0:sm_90:v1:dev",        // groups < 1
      "gemm:nt:e4m3fn.e4m3fn>bf16:m1:n1:k128:g1:sm_90:v-1:dev",       // version < 0
      "gemm:nt:e4m3fn.e4m3fn>bf16:m1:n1:k128:g1:sm_90:v1:de%4",       // bad escape
      "gemm:nt:e4m3fn.e4m3fn>bf16:m1:n1:k128:g1:sm_90:v1:",           // empty device
      "gemm::e4m3fn.e4m3fn>bf16:m1:n1:k128:g1:sm_90:v1:dev",          // empty variant
  };
  for (const char* text : bad) {
    EXPECT_EQ(ParseTuneKey(text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(TuneKeyTest, TokenBucketIsNextPowerOfTwoWithAFloor) {
  EXPECT_EQ(TokenBucket(1), kMinTokenBucket);
  EXPECT_EQ(TokenBucket(128), 128);
  EXPECT_EQ(TokenBucket(129), 256);
  EXPECT_EQ(TokenBucket(16640), 32768);
  EXPECT_EQ(TokenBucket(32768), 32768);
}

TEST(TuneKeyTest, MGroupedBucketsTokensAndKeepsWeightDimsAndGroupsExact) {
  const TuneKey a = MakeGemmTuneKey(GemmVariant::kMGroupedNT, DType::kE4M3FN, DType::kBF16, 9000,
                                    7168, 2048, 8, H100(), 1);
  const TuneKey b = MakeGemmTuneKey(GemmVariant::kMGroupedNT, DType::kE4M3FN, DType::kBF16, 16000,
                                    7168, 2048, 8, H100(), 1);
  EXPECT_EQ(a.m, 16384);
  EXPECT_EQ(a, b);  // two routing steps, one entry
  EXPECT_EQ(a.n, 7168);
  EXPECT_EQ(a.k, 2048);
  const TuneKey other_groups = MakeGemmTuneKey(GemmVariant::kMGroupedNT, DType::kE4M3FN,
                                               DType::kBF16, 9000, 7168, 2048, 64, H100(), 1);
  EXPECT_NE(a, other_groups);
}

TEST(TuneKeyTest, KGroupedBucketsTheReduction) {
  const TuneKey key = MakeGemmTuneKey(GemmVariant::kKGroupedTN, DType::kE4M3FN, DType::kF32, 7168,
                                      2048, 5000, 16, H100(), 1);
  EXPECT_EQ(key.m, 7168);
  EXPECT_EQ(key.n, 2048);
  EXPECT_EQ(key.k, 8192);
  EXPECT_TRUE(IsClassed(key));
}

TEST(TuneKeyTest, DenseShapesStayExact) {
  const TuneKey key =
      MakeGemmTuneKey(GemmVariant::kNT, DType::kE4M3FN, DType::kBF16, 4097, 100, 384, 1, H100(), 1);
  EXPECT_EQ(key.m, 4097);
  EXPECT_EQ(key.n, 100);
  EXPECT_TRUE(IsClassed(key));
  TuneKey unclassed = MakeGemmTuneKey(GemmVariant::kMGroupedNT, DType::kE4M3FN, DType::kBF16, 300,
                                      100, 384, 2, H100(), 1);
  unclassed.m = 300;
  EXPECT_FALSE(IsClassed(unclassed));
}

TEST(TuneKeyTest, KeyFromGemmArgsReadsDimsPerVariant) {
  GemmArgs g;
  g.variant = GemmVariant::kNT;
  g.a.rank = g.b.rank = g.d.rank = 2;
  g.a.dtype = g.b.dtype = DType::kE5M2;
  g.d.dtype = DType::kF32;
  g.a.shape[0] = 512, g.a.shape[1] = 1024;  // M, K
  g.b.shape[0] = 768, g.b.shape[1] = 1024;  // N, K
  absl::StatusOr<TuneKey> key = GemmTuneKeyFromArgs(g, H100(), 2);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->ToString(),
            "gemm:nt:e5m2.e5m2>f32:m512:n768:k1024:g1:sm_90:v2:"
            "NVIDIA H100 80GB HBM3");
  g.variant = GemmVariant::kInvalid;
  EXPECT_EQ(GemmTuneKeyFromArgs(g, H100(), 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kd
