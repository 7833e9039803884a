// Test support: the PyTorch golden vectors of tests/data/golden (made by tests/data/make_golden.py)
// and their manifest, shared by the CPU, CUDA and wire-path golden tests.
#ifndef KERNELD_TESTS_KERNELS_GOLDEN_MANIFEST_H_
#define KERNELD_TESTS_KERNELS_GOLDEN_MANIFEST_H_

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

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

}  // namespace golden
}  // namespace kd

#endif  // KERNELD_TESTS_KERNELS_GOLDEN_MANIFEST_H_
