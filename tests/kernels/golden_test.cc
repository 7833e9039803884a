// The CPU backend against golden vectors computed by PyTorch (tests/data/make_golden.py, run on
// the GPU machine; files in tests/data/golden/). Every case runs through kd::Validate and the CPU
// backend's Run and must match bit for bit; fp8.h must match torch's float8 casts.
//
// The blockwise FP8 GEMM with e4m3fnuz operands against the float64 references of
// tests/data/make_gemm_golden.py (tests/data/golden/gemm_fnuz/): every variant, within the fp32
// budget the GEMM tests state (tests/kernels/gemm/gemm_test_util.h), NaN where the reference is.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/registry.h"
#include "tests/kernels/golden_manifest.h"
#include "tests/kernels/quantize_reference.h"

namespace kd {
namespace {

using testing_json::Value;
using testing_ref::HostTensor;

using golden::DTypeFromName;
using golden::Manifest;
using golden::ReadFile;

// A tensor of `dtype` and `shape` filled with the bytes of a golden file.
HostTensor Load(const std::string& file, DType dtype, const std::vector<int64_t>& shape) {
  HostTensor t(dtype, shape);
  const std::string bytes = ReadFile(file);
  const size_t expected = static_cast<size_t>(t.numel()) * DTypeSize(dtype);
  EXPECT_EQ(bytes.size(), expected) << file;
  std::memcpy(t.storage.data(), bytes.data(), std::min(bytes.size(), expected));
  return t;
}

TEST(GoldenManifestTest, IsPresentAndCoversEveryGranularity) {
  const Value& m = Manifest();
  ASSERT_EQ(m.kind, Value::kObject) << "cannot read " << golden::Dir() << "/manifest.json";
  std::set<std::string> granularities;
  bool transposed = false, dual = false, rceil = false, pow2 = false, kbm = false;
  for (const Value& c : m["cases"].array) {
    granularities.insert(c["granularity"].string);
    transposed |= c["transpose"].boolean;
    dual |= c["dual"].boolean;
    rceil |= c["mx_rounding"].string == "rceil";
    pow2 |= c["pow2"].boolean;
    kbm |= c["scale_layout"].string == "k_block_major";
  }
  EXPECT_EQ(granularities.size(), 8u);
  EXPECT_TRUE(transposed && dual && rceil && pow2 && kbm);
}

class GoldenCaseTest : public ::testing::TestWithParam<size_t> {};

TEST_P(GoldenCaseTest, CpuBackendMatchesPyTorchBitExactly) {
  const Value& c = Manifest()["cases"][GetParam()];
  const Value& in_desc = Manifest()["inputs"][c["input"].string];
  HostTensor input = Load(in_desc["file"].string, DTypeFromName(in_desc["dtype"].string),
                          in_desc["shape"].AsInts());
  const Value& outs = c["outputs"];
  std::map<std::string, HostTensor> got;
  for (const auto& [name, desc] : outs.object) {
    DType dtype = DTypeFromName(desc["dtype"].string);
    if (name.rfind("output", 0) == 0) dtype = DTypeFromName(c["out_dtype"].string);
    if (name == "scales" && c["granularity"].string == "mx1x32") dtype = DType::kU8;
    got.emplace(name, HostTensor(dtype, desc["shape"].AsInts()));
  }
  HostTensor ends;
  QuantizeArgs a = golden::RecipeOfCase(c);
  a.input = input.t;
  a.output = got.at("output").t;
  a.scales = got.at("scales").t;
  if (c.Has("group_ends")) {
    const std::vector<int64_t> e = c["group_ends"].AsInts();
    ends = HostTensor(DType::kI64, {static_cast<int64_t>(e.size())});
    std::memcpy(ends.storage.data(), e.data(), e.size() * sizeof(int64_t));
    a.group_ends = ends.t;
  }
  if (got.count("output_t")) {
    a.output_t = got.at("output_t").t;
    a.scales_t = got.at("scales_t").t;
  }
  ASSERT_NE(a.granularity, QuantGranularity::kInvalid) << c["granularity"].string;
  absl::StatusOr<ValidatedOp> op = Validate(a);
  ASSERT_TRUE(op.ok()) << op.status();
  std::unique_ptr<Backend> cpu = CreateCpuBackend(2);
  std::unique_ptr<Stream> stream = cpu->CreateStream(0).value();
  ASSERT_TRUE(cpu->Run(*op, *stream, {}).ok());

  for (const auto& [name, desc] : outs.object) {
    const HostTensor& mine = got.at(name);
    const std::string expected = ReadFile(desc["file"].string);
    const size_t elem = DTypeSize(mine.t.dtype);
    ASSERT_EQ(expected.size(), static_cast<size_t>(mine.numel()) * elem) << name;
    const auto* gb = reinterpret_cast<const uint8_t*>(mine.storage.data());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < mine.numel(); ++i) {
      if (std::memcmp(gb + i * elem, expected.data() + i * elem, elem) == 0) continue;
      if (mismatches++ < 5) {
        uint32_t g = 0, e = 0;
        std::memcpy(&g, gb + i * elem, elem);
        std::memcpy(&e, expected.data() + i * elem, elem);
        const int64_t cols = mine.t.rank == 2 ? mine.t.shape[1] : 1;
        ADD_FAILURE() << c["name"].string << " " << name << "[" << i / cols << ", " << i % cols
                      << "]: cpu 0x" << std::hex << g << ", torch 0x" << e;
      }
    }
    EXPECT_EQ(mismatches, 0) << c["name"].string << " " << name;
  }
}

std::vector<size_t> CaseIndices() {
  std::vector<size_t> v;
  for (size_t i = 0; i < Manifest()["cases"].size(); ++i) v.push_back(i);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Torch, GoldenCaseTest, ::testing::ValuesIn(CaseIndices()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string n = Manifest()["cases"][info.param]["name"].string;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// The manifest's case named `name`; a null Value when there is none.
const Value& CaseNamed(const std::string& name) {
  static const Value kNone;
  for (const Value& c : Manifest()["cases"].array) {
    if (c["name"].string == name) return c;
  }
  return kNone;
}

// The 128x128 dual pass (no golden case of its own: torch computes it as two ops) reproduces the
// torch goldens of both its halves: on the input of golden case `of_x` its output/scales are that
// case's (128x128 of X), and on the input of `of_xt` its output_t/scales_t are that one's (128x128
// of Xᵀ, transpose_output); each run takes the case's format and scale recipe.
void CheckDual128x128Against(const std::string& name, bool transposed_half) {
  const Value& c = CaseNamed(name);
  ASSERT_EQ(c.kind, Value::kObject) << "golden case " << name << " is missing";
  ASSERT_EQ(c["granularity"].string, "128x128");
  ASSERT_EQ(c["transpose"].boolean, transposed_half);
  const Value& in_desc = Manifest()["inputs"][c["input"].string];
  HostTensor input = Load(in_desc["file"].string, DTypeFromName(in_desc["dtype"].string),
                          in_desc["shape"].AsInts());
  const int64_t m = input.t.shape[0], k = input.t.shape[1];
  const DType out = DTypeFromName(c["out_dtype"].string);
  HostTensor output(out, {m, k}), scales(DType::kF32, {m / 128, k / 128});
  HostTensor output_t(out, {k, m}), scales_t(DType::kF32, {k / 128, m / 128});
  QuantizeArgs a = golden::RecipeOfCase(c);
  a.transpose_output = false;
  a.input = input.t;
  a.output = output.t;
  a.scales = scales.t;
  a.output_t = output_t.t;
  a.scales_t = scales_t.t;
  absl::StatusOr<ValidatedOp> op = Validate(Op(a));
  ASSERT_TRUE(op.ok()) << op.status();
  std::unique_ptr<Backend> cpu = CreateCpuBackend(2);
  std::unique_ptr<Stream> stream = cpu->CreateStream(0).value();
  ASSERT_TRUE(cpu->Run(*op, *stream, {}).ok());
  const std::pair<const char*, const HostTensor*> halves[] = {
      {"output", transposed_half ? &output_t : &output},
      {"scales", transposed_half ? &scales_t : &scales}};
  for (const auto& [key, mine] : halves) {
    const std::string expected = ReadFile(c["outputs"][key]["file"].string);
    const size_t bytes = static_cast<size_t>(mine->numel()) * DTypeSize(mine->t.dtype);
    ASSERT_EQ(expected.size(), bytes) << name << " " << key;
    EXPECT_EQ(std::memcmp(mine->storage.data(), expected.data(), bytes), 0)
        << name << " " << key << " differs from torch's";
  }
}

TEST(GoldenDualTest, Dual128x128OfXMatchesTorch128x128OfX) {
  CheckDual128x128Against("128x128_f16_e4m3fn_pow2", false);
}

TEST(GoldenDualTest, Dual128x128OfXtMatchesTorch128x128OfXTransposed) {
  CheckDual128x128Against("128x128_t_f32_e4m3fnuz", true);
}

template <typename F>
void CheckCastTable(const std::string& fmt) {
  const Value& table = Manifest()["cast_table"];
  const int64_t n = table["cast_inputs.f32"]["count"].AsInt();
  ASSERT_GT(n, 0);
  const std::string values = ReadFile(table["cast_inputs.f32"]["file"].string);
  const std::string codes = ReadFile(table["cast_" + fmt + ".u8"]["file"].string);
  ASSERT_EQ(values.size(), static_cast<size_t>(n) * 4);
  ASSERT_EQ(codes.size(), static_cast<size_t>(n));
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, values.data() + 4 * i, 4);
    const uint8_t torch_code = static_cast<uint8_t>(codes[i]);
    if (fp8::Encode<F>(v) != torch_code && mismatches++ < 5) {
      ADD_FAILURE() << fmt << " encode of " << v << " (0x" << std::hex << testing_ref::Bits(v)
                    << "): kerneld 0x" << int{fp8::Encode<F>(v)} << ", torch 0x" << int{torch_code};
    }
  }
  EXPECT_EQ(mismatches, 0);
  const std::string decoded = ReadFile(table["decode_" + fmt + ".f32"]["file"].string);
  ASSERT_EQ(decoded.size(), 256u * 4);
  for (int c = 0; c < 256; ++c) {
    float torch_value;
    std::memcpy(&torch_value, decoded.data() + 4 * c, 4);
    const float mine = fp8::Decode<F>(static_cast<uint8_t>(c));
    if (std::isnan(torch_value)) {
      EXPECT_TRUE(std::isnan(mine)) << fmt << " code " << c;
    } else {
      EXPECT_EQ(testing_ref::Bits(mine), testing_ref::Bits(torch_value)) << fmt << " code " << c;
    }
  }
}

// ---- GEMM, e4m3fnuz operands --------------------------------------------------------------

const Value& GemmManifest() {
  static const Value manifest = [] {
    std::optional<Value> v = testing_json::Parse(ReadFile("gemm_fnuz/manifest.json"));
    return v ? *v : Value();
  }();
  return manifest;
}

GemmVariant GemmVariantFromName(const std::string& n) {
  static const std::map<std::string, GemmVariant> kNames = {
      {"nt", GemmVariant::kNT},
      {"nn", GemmVariant::kNN},
      {"tn", GemmVariant::kTN},
      {"m_grouped_nt", GemmVariant::kMGroupedNT},
      {"k_grouped_tn", GemmVariant::kKGroupedTN}};
  auto it = kNames.find(n);
  return it == kNames.end() ? GemmVariant::kInvalid : it->second;
}

// The tensor `key` of GEMM case `c`, as `dtype` (the file's own dtype when kInvalid).
HostTensor LoadGemmTensor(const Value& c, const std::string& key, DType dtype = DType::kInvalid) {
  const Value& desc = c["tensors"][key];
  if (dtype == DType::kInvalid) dtype = DTypeFromName(desc["dtype"].string);
  return Load("gemm_fnuz/" + desc["file"].string, dtype, desc["shape"].AsInts());
}

std::vector<double> LoadDoubles(const Value& c, const std::string& key) {
  const std::string bytes = ReadFile("gemm_fnuz/" + c["tensors"][key]["file"].string);
  std::vector<double> out(bytes.size() / 8);
  std::memcpy(out.data(), bytes.data(), out.size() * 8);
  return out;
}

TEST(GoldenGemmManifestTest, CoversEveryVariantWithFnuzOperands) {
  const Value& m = GemmManifest();
  ASSERT_EQ(m.kind, Value::kObject) << "cannot read " << golden::Dir() << "/gemm_fnuz";
  EXPECT_EQ(m["operand_dtype"].string, "e4m3fnuz");
  std::set<std::string> variants, outs;
  bool accumulate = false;
  for (const Value& c : m["cases"].array) {
    variants.insert(c["variant"].string);
    outs.insert(c["out"].string);
    accumulate |= c["accumulate"].boolean;
  }
  EXPECT_EQ(variants.size(), 5u);
  EXPECT_EQ(outs.size(), 2u);
  EXPECT_TRUE(accumulate);
}

class GoldenGemmTest : public ::testing::TestWithParam<size_t> {};

TEST_P(GoldenGemmTest, CpuBackendMatchesFloat64ReferenceWithinBudget) {
  const Value& c = GemmManifest()["cases"][GetParam()];
  GemmArgs g;
  g.variant = GemmVariantFromName(c["variant"].string);
  g.accumulate = c["accumulate"].boolean;
  HostTensor a = LoadGemmTensor(c, "a", DType::kE4M3FNUZ);
  HostTensor b = LoadGemmTensor(c, "b", DType::kE4M3FNUZ);
  HostTensor a_scales = LoadGemmTensor(c, "a_scales");
  HostTensor b_scales = LoadGemmTensor(c, "b_scales");
  const DType out = DTypeFromName(c["out"].string);
  HostTensor d = g.accumulate ? LoadGemmTensor(c, "d_prior")
                              : HostTensor(out, c["tensors"]["expected"]["shape"].AsInts());
  HostTensor ends;
  g.a = a.t;
  g.b = b.t;
  g.a_scales = a_scales.t;
  g.b_scales = b_scales.t;
  g.d = d.t;
  if (c["tensors"].Has("group_ends")) {
    ends = LoadGemmTensor(c, "group_ends");
    g.group_ends = ends.t;
  }
  std::vector<double> prior(d.numel(), 0.0);
  for (int64_t i = 0; g.accumulate && i < d.numel(); ++i) prior[i] = d.as<float>()[i];
  absl::StatusOr<ValidatedOp> op = Validate(g);
  ASSERT_TRUE(op.ok()) << op.status();
  std::unique_ptr<Backend> cpu = CreateCpuBackend(2);
  std::unique_ptr<Stream> stream = cpu->CreateStream(0).value();
  ASSERT_TRUE(cpu->Run(*op, *stream, {}).ok());

  const std::vector<double> expected = LoadDoubles(c, "expected"), mass = LoadDoubles(c, "mass");
  ASSERT_EQ(static_cast<int64_t>(expected.size()), d.numel());
  ASSERT_EQ(mass.size(), expected.size());
  const int64_t reduction = g.variant == GemmVariant::kNN ? b.t.shape[0] : a.t.shape[1];
  const double rel = (reduction / 128 + 24) * std::ldexp(1.0, -24);
  int64_t bad = 0;
  for (int64_t i = 0; i < d.numel(); ++i) {
    const double got =
        out == DType::kF32 ? d.as<float>()[i] : fp8::BF16ToFloat(d.as<uint16_t>()[i]);
    const double want = prior[i] + expected[i];
    if (std::isnan(expected[i])) {
      if (!std::isnan(got) && bad++ < 5) ADD_FAILURE() << "element " << i << ": " << got;
      continue;
    }
    double bound = rel * mass[i];
    if (out == DType::kBF16) bound += std::ldexp(std::fabs(want), -8);
    if (g.accumulate) bound += std::ldexp(std::fabs(prior[i]) + std::fabs(want), -23);
    if (!(std::fabs(got - want) <= bound) && bad++ < 5) {
      ADD_FAILURE() << c["name"].string << " element " << i << ": cpu " << got << ", reference "
                    << want << ", bound " << bound;
    }
  }
  EXPECT_EQ(bad, 0) << c["name"].string;
}

std::vector<size_t> GemmCaseIndices() {
  std::vector<size_t> v;
  for (size_t i = 0; i < GemmManifest()["cases"].size(); ++i) v.push_back(i);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Fnuz, GoldenGemmTest, ::testing::ValuesIn(GemmCaseIndices()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return GemmManifest()["cases"][info.param]["name"].string;
                         });

TEST(GoldenCastTest, E4m3fnMatchesTorch) { CheckCastTable<fp8::E4M3FN>("e4m3fn"); }
TEST(GoldenCastTest, E4m3fnuzMatchesTorch) { CheckCastTable<fp8::E4M3FNUZ>("e4m3fnuz"); }
TEST(GoldenCastTest, E5m2MatchesTorch) { CheckCastTable<fp8::E5M2>("e5m2"); }

}  // namespace
}  // namespace kd
