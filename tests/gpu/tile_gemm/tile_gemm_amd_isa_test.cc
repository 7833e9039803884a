// The AMD code objects of the portable tile GEMM (kernels/gpu/tile_gemm; no AMD GPU needed),
// disassembled with llvm-objdump and their kernel metadata read with llvm-readelf, as the CUDA
// build's SASS is checked for QGMMA. Where the HIP backend is built, the objects of its targets
// (KD_HIP_ARCHITECTURES, gfx90a and gfx940 by default) are the ones kerneld_hip links, unbundled
// from its host object of tile_gemm_kernels.cu; gfx942 (and, without the HIP backend, gfx90a and
// gfx940) are compiled for the test, device-only (clang-19, hipcc).
//   - gfx940, gfx942: every TileGemmKernel instantiation holds exactly the FP8 MFMAs its tile
//     implies (8 v_mfma_f32_32x32x16_<a>_<b> per 32x32 fragment and 128-wide block: two per
//     32-byte step, four steps), of the operand pair its template names, and nothing spills:
//     no scratch_* or buffer_* instruction, .private_segment_fixed_size 0, no VGPR/SGPR spills;
//   - gfx90a (no FP8 MFMA): the same kernels exist as trap stubs without any MFMA.
// The summary table (per kernel: MFMAs, VGPRs, AGPRs, spills) is printed to the test log.
#include <cstdio>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/amd_code_object.h"

#ifndef KD_LLVM_OBJDUMP
#error "KD_LLVM_OBJDUMP must name llvm-objdump"
#endif

namespace {

using Kernel = kd::testing::AmdKernel;

struct CodeObject {
  std::string path;
  bool linked = false;  // unbundled from kerneld_hip's object, not compiled for the test
};

// KD_AMD_OBJECTS: "arch=linked|compiled=path", comma-separated.
std::map<std::string, CodeObject> CodeObjects() {
  std::map<std::string, CodeObject> objects;
  std::istringstream list(KD_AMD_OBJECTS);
  for (std::string entry; std::getline(list, entry, ',');) {
    const size_t arch_end = entry.find('=');
    const size_t kind_end = entry.find('=', arch_end + 1);
    if (arch_end == std::string::npos || kind_end == std::string::npos) continue;
    objects[entry.substr(0, arch_end)] = {
        entry.substr(kind_end + 1),
        entry.substr(arch_end + 1, kind_end - arch_end - 1) == "linked"};
  }
  return objects;
}

std::string ObjectPath(const std::string& arch) {
  const std::map<std::string, CodeObject> objects = CodeObjects();
  const auto it = objects.find(arch);
  return it == objects.end() ? "(no " + arch + " object)" : it->second.path;
}

// The kernels of one code object: disassembly per kernel symbol, then its metadata note.
std::map<std::string, Kernel> ReadObject(const std::string& arch) {
  return kd::testing::ReadAmdCodeObject(KD_LLVM_OBJDUMP, KD_LLVM_READELF, ObjectPath(arch), arch);
}

// Template arguments of a TileGemmKernel symbol of the AMD build (kd::tile_gemm::amd, the inline
// namespace that keeps it apart from the NVIDIA build's in one binary): operand kinds, block_m,
// block_n, stages, warps.
struct Instance {
  int a = 0, b = 0, block_m = 0, block_n = 0, stages = 0, warps_m = 0, warps_n = 0;
  bool k_major = false;
};
bool ParseInstance(const std::string& symbol, Instance& in) {
  static const std::regex re(
      R"(tile_gemm3amd14TileGemmKernelINS1_12MfmaFragmentILNS0_7Fp8KindE(\d)ELS4_(\d)ENS1_7MfmaIsaEEELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb(\d)E)");
  std::smatch m;
  if (!std::regex_search(symbol, m, re)) return false;
  in.a = std::stoi(m[1]);
  in.b = std::stoi(m[2]);
  in.block_m = std::stoi(m[3]);
  in.block_n = std::stoi(m[4]);
  in.stages = std::stoi(m[5]);
  in.warps_m = std::stoi(m[6]);
  in.warps_n = std::stoi(m[7]);
  in.k_major = m[8] == "1";
  return true;
}

void PrintSummary(const std::string& arch, const std::map<std::string, Kernel>& kernels) {
  std::printf("%s: %zu kernels\n", arch.c_str(), kernels.size());
  for (const auto& [symbol, k] : kernels) {
    Instance in;
    if (!ParseInstance(symbol, in)) continue;
    std::printf(
        "  %s x %s  %3dx%-3d s%d %s  mfma_fp8 %3d  vgpr %3d agpr %3d  private %d  vgpr_spill %d  "
        "sgpr_spill %d  s_trap %d\n",
        in.a ? "e5m2" : "e4m3", in.b ? "e5m2" : "e4m3", in.block_m, in.block_n, in.stages,
        in.k_major ? "k-major" : "nn     ", k.Count("v_mfma_f32_32x32x16_"), k.Meta(".vgpr_count"),
        k.Meta(".agpr_count"), k.Meta(".private_segment_fixed_size"), k.Meta(".vgpr_spill_count"),
        k.Meta(".sgpr_spill_count"), k.Count("s_trap"));
  }
}

class AmdCodeObjectTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AmdCodeObjectTest, Gfx94xKernelsHoldTheirFp8MfmasAndNeverSpill) {
  const std::string arch = GetParam();
  const std::map<std::string, Kernel> kernels = ReadObject(arch);
  PrintSummary(arch, kernels);
  int instances = 0;
  for (const auto& [symbol, k] : kernels) {
    Instance in;
    if (!ParseInstance(symbol, in)) continue;
    ++instances;
    SCOPED_TRACE(symbol);
    const std::string kind[] = {"fp8", "bf8"};
    const std::string expected = "v_mfma_f32_32x32x16_" + kind[in.a] + "_" + kind[in.b];
    const int frags = (in.block_m / in.warps_m / 32) * (in.block_n / in.warps_n / 32);
    EXPECT_EQ(k.mnemonics.count(expected) ? k.mnemonics.at(expected) : 0, 8 * frags);
    EXPECT_EQ(k.Count("v_mfma"), 8 * frags) << "an MFMA of another operand pair";
    EXPECT_EQ(k.Count("scratch_"), 0);
    EXPECT_EQ(k.Count("buffer_"), 0);
    EXPECT_EQ(k.Meta(".private_segment_fixed_size"), 0);
    EXPECT_EQ(k.Meta(".vgpr_spill_count"), 0);
    EXPECT_EQ(k.Meta(".sgpr_spill_count"), 0);
    EXPECT_EQ(k.Count("s_trap"), 0);
  }
  // 3 tile shapes x 2 B layouts x 4 operand pairs (tile_gemm_kernels.cu).
  EXPECT_EQ(instances, 24) << "cannot read " << ObjectPath(arch);
}

INSTANTIATE_TEST_SUITE_P(Arch, AmdCodeObjectTest, ::testing::Values("gfx940", "gfx942"));

// The HIP backend runs the tile GEMM from the linked objects (kernels/gpu/gpu_gemm_hip.cc): where
// it is built, at least one target with FP8 MFMA checked above is one kerneld_hip links (gfx940
// with the default KD_HIP_ARCHITECTURES).
TEST(AmdCodeObjectTest, ChecksTheObjectsKerneldHipLinks) {
  const std::map<std::string, CodeObject> objects = CodeObjects();
  for (const auto& [arch, object] : objects) {
    std::printf("%s: %s (%s)\n", arch.c_str(), object.path.c_str(),
                object.linked ? "linked by kerneld_hip" : "compiled for this test");
  }
  ASSERT_EQ(objects.size(), 3u) << KD_AMD_OBJECTS;
  if (!KD_HIP_LINKS_TILE_GEMM) GTEST_SKIP() << "the HIP backend is not built here";
  EXPECT_TRUE(objects.at("gfx940").linked || objects.at("gfx942").linked);
}

TEST(AmdCodeObjectTest, Gfx90aKernelsAreTrapStubsWithoutMfma) {
  const std::map<std::string, Kernel> kernels = ReadObject("gfx90a");
  PrintSummary("gfx90a", kernels);
  int instances = 0;
  for (const auto& [symbol, k] : kernels) {
    Instance in;
    if (!ParseInstance(symbol, in)) continue;
    ++instances;
    SCOPED_TRACE(symbol);
    EXPECT_EQ(k.Count("v_mfma"), 0);
    EXPECT_GE(k.Count("s_trap"), 1);
  }
  EXPECT_EQ(instances, 24) << "cannot read " << ObjectPath("gfx90a");
}

}  // namespace
