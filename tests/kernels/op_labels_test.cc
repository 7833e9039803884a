// OpLabelKey: two ops get the same key exactly when their metric labels (OpName, OpVariantLabel,
// OpDTypeLabel, OpShapeClass) are the same, over ops that differ in every input of a label.
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/ops.h"

namespace kd {
namespace {

Tensor Shaped(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  for (int i = 0; i < t.rank; ++i) t.shape[i] = shape[i];
  return t;
}

QuantizeArgs Quant(QuantGranularity g, DType in, DType out, int64_t m, int64_t k) {
  QuantizeArgs q;
  q.granularity = g;
  q.input = Shaped(in, {m, k});
  q.output = Shaped(out, {m, k});
  q.scales = Shaped(DType::kF32, {m, k / 128});
  return q;
}

std::vector<Op> Ops() {
  std::vector<Op> ops;
  for (QuantGranularity g : {QuantGranularity::k1x128, QuantGranularity::k128x128,
                             QuantGranularity::kPerRow, QuantGranularity::kMx1x32}) {
    for (DType in : {DType::kBF16, DType::kF32}) {
      for (DType out : {DType::kE4M3FN, DType::kE5M2}) {
        for (int64_t m : {128, 8192, 65536}) ops.push_back(Quant(g, in, out, m, 4096));
      }
    }
  }
  QuantizeArgs t = Quant(QuantGranularity::k1x128, DType::kBF16, DType::kE4M3FN, 128, 128);
  t.transpose_output = true;
  ops.push_back(t);
  QuantizeArgs dual = Quant(QuantGranularity::k1x128, DType::kBF16, DType::kE4M3FN, 128, 128);
  dual.output_t = Shaped(DType::kE4M3FN, {128, 128});
  ops.push_back(dual);
  dual.transpose_output = true;  // the dual label wins over the transposed one
  ops.push_back(dual);
  for (GemmVariant v : {GemmVariant::kNT, GemmVariant::kNN, GemmVariant::kTN}) {
    for (DType d : {DType::kBF16, DType::kF32}) {
      GemmArgs g;
      g.variant = v;
      g.a = Shaped(DType::kE4M3FN, {256, 512});
      g.b = Shaped(DType::kE4M3FN, {256, 512});
      g.d = Shaped(d, {256, 256});
      ops.push_back(g);
    }
  }
  for (int32_t alignment : {16, 32, 128}) {
    for (DType dtype : {DType::kBF16, DType::kE4M3FN}) {
      PadArgs p;
      p.alignment = alignment;
      p.input = Shaped(dtype, {1024, 64});
      p.output = Shaped(dtype, {4096, 64});
      ops.push_back(p);
      UnpadArgs u;
      u.alignment = alignment;
      u.input = Shaped(dtype, {4096, 64});
      u.output = Shaped(dtype, {1024, 64});
      ops.push_back(u);
    }
  }
  return ops;
}

std::tuple<std::string, std::string, std::string, std::string> Labels(const Op& op) {
  return {std::string(OpName(op)), OpVariantLabel(op), OpDTypeLabel(op),
          std::string(OpShapeClass(op))};
}

TEST(OpLabelKey, EqualExactlyWhenTheLabelsAreEqual) {
  const std::vector<Op> ops = Ops();
  int same = 0, different = 0;
  for (const Op& a : ops) {
    for (const Op& b : ops) {
      const bool labels_equal = Labels(a) == Labels(b);
      EXPECT_EQ(OpLabelKey(a) == OpLabelKey(b), labels_equal)
          << std::get<0>(Labels(a)) << " " << std::get<1>(Labels(a)) << " "
          << std::get<2>(Labels(a)) << " " << std::get<3>(Labels(a)) << " vs "
          << std::get<0>(Labels(b)) << " " << std::get<1>(Labels(b)) << " "
          << std::get<2>(Labels(b)) << " " << std::get<3>(Labels(b));
      (labels_equal ? same : different) += 1;
    }
  }
  // The set has pairs of both kinds beyond an op against itself (the shape classes of m=128
  // and m=8192 at K=4096 differ, as do most pairs; two dual ops share every label).
  EXPECT_GT(same, static_cast<int>(ops.size()));
  EXPECT_GT(different, 0);
}

TEST(OpTensors, ListsThePresentTensorsInFieldOrder) {
  QuantizeArgs q = Quant(QuantGranularity::k1x128, DType::kBF16, DType::kE4M3FN, 128, 128);
  q.output_t = Shaped(DType::kE4M3FN, {128, 128});
  q.scales_t = Shaped(DType::kF32, {128, 1});
  const Op op = q;
  const NamedTensors tensors = OpTensors(op);
  std::vector<std::string> fields;
  for (const NamedTensor& t : tensors) fields.emplace_back(t.field);
  EXPECT_EQ(fields,
            (std::vector<std::string>{"input", "output", "scales", "output_t", "scales_t"}));
  EXPECT_EQ(tensors[1].tensor, &std::get<QuantizeArgs>(op).output);
}

TEST(OpTensors, MarksTheTensorsTheOpWrites) {
  PadArgs p;
  p.input = Shaped(DType::kBF16, {4, 8});
  p.group_ends = Shaped(DType::kI32, {2});
  p.output = Shaped(DType::kBF16, {34, 8});
  p.padded_group_ends = Shaped(DType::kI32, {2});
  std::vector<std::string> outputs;
  for (const NamedTensor& t : OpTensors(p)) {
    if (t.output) outputs.emplace_back(t.field);
  }
  EXPECT_EQ(outputs, (std::vector<std::string>{"output", "padded_group_ends"}));
}

TEST(OpName, IsTheTraitsName) {
  EXPECT_EQ(OpName(QuantizeArgs()), "quantize");
  EXPECT_EQ(OpName(GemmArgs()), "gemm");
  EXPECT_EQ(OpName(PadArgs()), "pad");
  EXPECT_EQ(OpName(UnpadArgs()), "unpad");
}

}  // namespace
}  // namespace kd
