// kd::Validate on GemmArgs: every valid variant passes, and each rule of kernels/ops/gemm.cc
// fails alone with INVALID_ARGUMENT and a message naming the field and the rule.
#include <string>

#include "gtest/gtest.h"
#include "tests/kernels/gemm/gemm_test_util.h"

namespace kd {
namespace gemm_test {
namespace {

// Descriptors only: validation never reads tensor data, so one shared buffer backs them all.
Tensor View(DType dtype, std::initializer_list<int64_t> shape) {
  static std::vector<uint64_t> backing(1 << 20);
  Tensor t;
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  // Distinct, non-overlapping addresses so the aliasing rule stays quiet.
  static size_t next = 0;
  t.data = reinterpret_cast<char*>(backing.data()) + next;
  next = (next + stride * DTypeSize(dtype) + 64) % (backing.size() * 8 / 2);
  return t;
}

GemmArgs ValidNt() {
  GemmArgs g;
  g.variant = GemmVariant::kNT;
  g.a = View(DType::kE4M3FN, {100, 256});
  g.a_scales = View(DType::kF32, {100, 2});
  g.b = View(DType::kE4M3FN, {200, 256});
  g.b_scales = View(DType::kF32, {2, 2});
  g.d = View(DType::kBF16, {100, 200});
  return g;
}

GemmArgs ValidNn() {
  GemmArgs g;
  g.variant = GemmVariant::kNN;
  g.a = View(DType::kE4M3FN, {100, 256});
  g.a_scales = View(DType::kF32, {100, 2});
  g.b = View(DType::kE4M3FN, {256, 300});
  g.b_scales = View(DType::kF32, {2, 3});
  g.d = View(DType::kF32, {100, 300});
  return g;
}

GemmArgs ValidTn() {
  GemmArgs g;
  g.variant = GemmVariant::kTN;
  g.a = View(DType::kE4M3FN, {64, 384});
  g.a_scales = View(DType::kF32, {64, 3});
  g.b = View(DType::kE5M2, {72, 384});
  g.b_scales = View(DType::kF32, {72, 3});
  g.d = View(DType::kF32, {64, 72});
  return g;
}

GemmArgs ValidMGrouped() {
  GemmArgs g;
  g.variant = GemmVariant::kMGroupedNT;
  g.a = View(DType::kE4M3FN, {300, 128});
  g.a_scales = View(DType::kF32, {300, 1});
  g.b = View(DType::kE4M3FN, {4, 160, 128});
  g.b_scales = View(DType::kF32, {4, 2, 1});
  g.group_ends = View(DType::kI32, {4});
  g.d = View(DType::kBF16, {300, 160});
  return g;
}

GemmArgs ValidKGrouped() {
  GemmArgs g;
  g.variant = GemmVariant::kKGroupedTN;
  g.a = View(DType::kE4M3FN, {96, 512});
  g.a_scales = View(DType::kF32, {96, 4});
  g.b = View(DType::kE4M3FN, {80, 512});
  g.b_scales = View(DType::kF32, {80, 4});
  g.group_ends = View(DType::kI64, {3});
  g.d = View(DType::kF32, {3, 96, 80});
  return g;
}

void ExpectInvalid(const GemmArgs& g, const std::string& fragment) {
  const absl::Status s = Validate(g).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find(fragment), std::string::npos)
      << "message \"" << s.message() << "\" lacks \"" << fragment << "\"";
}

TEST(GemmValidateTest, EveryVariantWithConsistentShapesIsValid) {
  for (const GemmArgs& g : {ValidNt(), ValidNn(), ValidTn(), ValidMGrouped(), ValidKGrouped()}) {
    EXPECT_TRUE(Validate(g).ok()) << GemmVariantName(g.variant) << ": " << Validate(g).status();
  }
}

TEST(GemmValidateTest, UnknownVariantIsInvalid) {
  GemmArgs g = ValidNt();
  g.variant = static_cast<GemmVariant>(9);
  ExpectInvalid(g, "variant=9");
}

TEST(GemmValidateTest, NonFp8OperandIsInvalid) {
  GemmArgs g = ValidNt();
  g.b.dtype = DType::kBF16;
  ExpectInvalid(g, "b.dtype=bf16 must be one of");
}

TEST(GemmValidateTest, FnuzMixedWithOcpIsInvalid) {
  GemmArgs g = ValidNt();
  g.a.dtype = DType::kE4M3FNUZ;
  ExpectInvalid(g, "mix an fnuz format");
}

TEST(GemmValidateTest, AccumulateIntoBf16IsInvalid) {
  GemmArgs g = ValidNt();
  g.accumulate = true;
  ExpectInvalid(g, "accumulate needs d.dtype=f32");
}

TEST(GemmValidateTest, GroupEndsOnDenseVariantIsInvalid) {
  GemmArgs g = ValidTn();
  g.group_ends = View(DType::kI32, {2});
  ExpectInvalid(g, "group_ends is only for the grouped variants");
}

TEST(GemmValidateTest, NtReductionMismatchIsInvalid) {
  GemmArgs g = ValidNt();
  g.b = View(DType::kE4M3FN, {200, 384});
  ExpectInvalid(g, "b.shape[1]=384 must equal a.shape[1]=256");
}

TEST(GemmValidateTest, NtReductionOffTheBlockIsInvalid) {
  GemmArgs g = ValidNt();
  g.a = View(DType::kE4M3FN, {100, 200});
  g.b = View(DType::kE4M3FN, {200, 200});
  ExpectInvalid(g, "a.shape[1]=200 (the reduction) is not a multiple of block 128");
}

TEST(GemmValidateTest, NtWrongWeightScaleShapeIsInvalid) {
  GemmArgs g = ValidNt();
  g.b_scales = View(DType::kF32, {200, 2});  // 1x128 scales where NT wants 128x128
  ExpectInvalid(g, "b_scales.shape (200, 2) must be (2, 2)");
}

TEST(GemmValidateTest, NtWrongOutputShapeIsInvalid) {
  GemmArgs g = ValidNt();
  g.d = View(DType::kBF16, {200, 100});
  ExpectInvalid(g, "d.shape (200, 100) must be (100, 200)");
}

TEST(GemmValidateTest, NtWrongActivationScaleShapeIsInvalid) {
  GemmArgs g = ValidNt();
  g.a_scales = View(DType::kF32, {2, 100});
  ExpectInvalid(g, "a_scales.shape (2, 100) must be (100, 2)");
}

TEST(GemmValidateTest, NnReductionIsWRows) {
  GemmArgs g = ValidNn();
  g.b = View(DType::kE4M3FN, {300, 256});
  ExpectInvalid(g, "b.shape[0]=300 must equal a.shape[1]=256");
}

TEST(GemmValidateTest, NnWeightScalesAreReductionBlocksByColumnBlocks) {
  GemmArgs g = ValidNn();
  g.b_scales = View(DType::kF32, {3, 2});
  ExpectInvalid(g, "b_scales.shape (3, 2) must be (2, 3)");
}

TEST(GemmValidateTest, TnNeedsOneScalePerRowOfB) {
  GemmArgs g = ValidTn();
  g.b_scales = View(DType::kF32, {1, 3});
  ExpectInvalid(g, "b_scales.shape (1, 3) must be (72, 3)");
}

TEST(GemmValidateTest, MGroupedNeedsGroupEnds) {
  GemmArgs g = ValidMGrouped();
  g.group_ends = Tensor();
  ExpectInvalid(g, "group_ends is required");
}

TEST(GemmValidateTest, MGroupedGroupEndsOfFloatIsInvalid) {
  GemmArgs g = ValidMGrouped();
  g.group_ends = View(DType::kF32, {4});
  ExpectInvalid(g, "group_ends.dtype=f32 must be one of");
}

TEST(GemmValidateTest, MGroupedOneGroupEndPerExpert) {
  GemmArgs g = ValidMGrouped();
  g.group_ends = View(DType::kI32, {3});
  ExpectInvalid(g, "group_ends.shape (3) must be (4)");
}

TEST(GemmValidateTest, MGroupedWeightsAreRankThree) {
  GemmArgs g = ValidMGrouped();
  g.b = View(DType::kE4M3FN, {160, 128});
  ExpectInvalid(g, "b.shape (160, 128) has rank 2; must be 3");
}

TEST(GemmValidateTest, MGroupedWeightScalesPerExpert) {
  GemmArgs g = ValidMGrouped();
  g.b_scales = View(DType::kF32, {1, 2, 1});
  ExpectInvalid(g, "b_scales.shape (1, 2, 1) must be (4, 2, 1)");
}

TEST(GemmValidateTest, KGroupedTokensOffTheBlockAreInvalid) {
  GemmArgs g = ValidKGrouped();
  g.a = View(DType::kE4M3FN, {96, 500});
  g.b = View(DType::kE4M3FN, {80, 500});
  ExpectInvalid(g, "a.shape[1]=500 (the reduction) is not a multiple of block 128");
}

TEST(GemmValidateTest, KGroupedOutputHasOneMatrixPerExpert) {
  GemmArgs g = ValidKGrouped();
  g.d = View(DType::kF32, {2, 96, 80});
  ExpectInvalid(g, "group_ends.shape (3) must be (2)");
}

// The (rows, blocks) view of a K-block-major scale tensor: strides (1, ld).
Tensor KBlockMajorView(int64_t rows, int64_t blocks, int64_t ld) {
  Tensor t = View(DType::kF32, {blocks, ld});  // the memory: blocks rows of ld scales
  t.shape[0] = rows;
  t.shape[1] = blocks;
  t.strides[0] = 1;
  t.strides[1] = ld;
  return t;
}

TEST(GemmValidateTest, OneByOneTwentyEightScalesMayBeKBlockMajorOnEveryVariant) {
  GemmArgs nt = ValidNt();
  nt.a_scales = KBlockMajorView(100, 2, 100);
  GemmArgs nn = ValidNn();
  nn.a_scales = KBlockMajorView(100, 2, 104);  // a K-block stride larger than the rows
  GemmArgs tn = ValidTn();
  tn.a_scales = KBlockMajorView(64, 3, 64);
  tn.b_scales = KBlockMajorView(72, 3, 72);
  GemmArgs mg = ValidMGrouped();
  mg.a_scales = KBlockMajorView(300, 1, 300);
  GemmArgs kg = ValidKGrouped();
  kg.a_scales = KBlockMajorView(96, 4, 96);
  kg.b_scales = KBlockMajorView(80, 4, 80);
  for (const GemmArgs& g : {nt, nn, tn, mg, kg}) {
    EXPECT_TRUE(Validate(Op(g)).ok())
        << GemmVariantName(g.variant) << ": " << Validate(Op(g)).status();
  }
}

TEST(GemmValidateTest, KBlockMajorScalesWhoseBlocksOverlapAreInvalid) {
  GemmArgs g = ValidTn();
  g.a_scales = KBlockMajorView(64, 3, 63);
  ExpectInvalid(g, "a_scales.strides[1]=63 must be >= shape[0]=64");
  g = ValidKGrouped();
  g.b_scales = KBlockMajorView(80, 4, 40);
  ExpectInvalid(g, "b_scales.strides[1]=40 must be >= shape[0]=80");
}

TEST(GemmValidateTest, OneTwentyEightSquareWeightScalesMustBeRowMajor) {
  GemmArgs g = ValidNt();
  g.b_scales = KBlockMajorView(2, 2, 2);
  ExpectInvalid(g, "b_scales.strides[1]=2 must be 1 (the innermost dimension is contiguous)");
}

TEST(GemmValidateTest, TransposedOperandOrOutputIsInvalid) {
  GemmArgs g = ValidNt();
  g.d.strides[0] = 1;
  g.d.strides[1] = 100;
  ExpectInvalid(g, "d.strides[1]=100 must be 1 (the innermost dimension is contiguous)");
  g = ValidNt();
  g.a.strides[0] = 1;
  g.a.strides[1] = 100;
  ExpectInvalid(g, "a.strides[1]=100 must be 1");
}

TEST(GemmValidateTest, KGroupedOutputIsRankThree) {
  GemmArgs g = ValidKGrouped();
  g.d = View(DType::kF32, {96, 80});
  ExpectInvalid(g, "d.shape (96, 80) has rank 2; must be 3");
}

}  // namespace
}  // namespace gemm_test
}  // namespace kd
