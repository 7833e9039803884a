// Test support: the PyTorch golden vectors of tests/data/golden (made by tests/data/make_golden.py)
// and their manifest, shared by the CPU, CUDA and wire-path golden tests.
#ifndef KERNELD_TESTS_KERNELS_GOLDEN_MANIFEST_H_
#define KERNELD_TESTS_KERNELS_GOLDEN_MANIFEST_H_

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "kerneld/kernels/dtype.h"
#include "kerneld/kernels/ops.h"
#include "tests/kernels/mini_json.h"

#ifndef KD_GOLDEN_DIR
#error "KD_GOLDEN_DIR must name tests/data/golden"
#endif

namespace kd {
namespace golden {

// $KD_GOLDEN_DIR when set (a bundle run on the GPU machine), else the source tree's folder.
inline std::string Dir() {
  const char* env = std::getenv("KD_GOLDEN_DIR");
  return env != nullptr ? env : KD_GOLDEN_DIR;
}

// The bytes of `rel` under Dir(); empty when it cannot be read.
inline std::string ReadFile(const std::string& rel) {
  std::ifstream f(Dir() + "/" + rel, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// manifest.json, parsed once; a null Value when it is missing or malformed.
inline const testing_json::Value& Manifest() {
  static const testing_json::Value manifest = [] {
    std::optional<testing_json::Value> v = testing_json::Parse(ReadFile("manifest.json"));
    return v ? *v : testing_json::Value();
  }();
  return manifest;
}

// The DType of a manifest dtype name ("bf16", "e4m3fn", ...); kInvalid for an unknown name.
inline DType DTypeFromName(const std::string& n) {
  static const std::map<std::string, DType> kNames = {
      {"f32", DType::kF32},   {"bf16", DType::kBF16},     {"f16", DType::kF16},
      {"u8", DType::kU8},     {"e4m3fn", DType::kE4M3FN}, {"e4m3fnuz", DType::kE4M3FNUZ},
      {"e5m2", DType::kE5M2}, {"i64", DType::kI64}};
  auto it = kNames.find(n);
  return it == kNames.end() ? DType::kInvalid : it->second;
}

// The granularity whose GranularityName is `n`; kInvalid for an unknown name.
inline QuantGranularity GranularityFromName(const std::string& n) {
  for (int g = 1; g <= 8; ++g) {
    if (GranularityName(static_cast<QuantGranularity>(g)) == n) {
      return static_cast<QuantGranularity>(g);
    }
  }
  return QuantGranularity::kInvalid;
}

// The recipe of golden case `c` (granularity, transpose, scale format and layout, mx rounding,
// eps) as QuantizeArgs without tensors; the caller binds input, outputs and group ends.
inline QuantizeArgs RecipeOfCase(const testing_json::Value& c) {
  QuantizeArgs a;
  a.granularity = GranularityFromName(c["granularity"].string);
  a.transpose_output = c["transpose"].boolean;
  a.scale_format = c["pow2"].boolean ? ScaleFormat::kPow2 : ScaleFormat::kFp32;
  a.scale_layout = c["scale_layout"].string == "k_block_major" ? ScaleLayout::kKBlockMajor
                                                               : ScaleLayout::kRowMajor;
  a.mx_rounding = c["mx_rounding"].string == "rceil" ? MxRounding::kRceil : MxRounding::kFloor;
  a.eps = static_cast<float>(c["eps"].number);
  return a;
}

}  // namespace golden
}  // namespace kd

#endif  // KERNELD_TESTS_KERNELS_GOLDEN_MANIFEST_H_
