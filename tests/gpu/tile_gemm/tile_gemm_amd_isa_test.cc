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

#ifndef KD_LLVM_OBJDUMP
#error "KD_LLVM_OBJDUMP must name llvm-objdump"
#endif

namespace {

// Everything `command` writes to stdout; empty on failure.
std::string Run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe.get())) > 0) out.append(buf, n);
  return out;
}

struct Kernel {
  std::map<std::string, int> mnemonics;  // instruction name -> count
  std::map<std::string, int> meta;       // ".vgpr_count" -> value
};

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
  // NOTE: gfx940, gfx941 and gfx942 share one instruction encoding (LLVM's GFX940 subtarget);
  // Debian's llvm-objdump-15 decodes gfx942 code objects only when told so.
  const std::string mcpu = arch == "gfx90a" ? "gfx90a" : "gfx940";
  std::map<std::string, Kernel> kernels;
  std::istringstream dis(Run(std::string(KD_LLVM_OBJDUMP) +
                             " -d --triple=amdgcn-amd-amdhsa --mcpu=" + mcpu + " " +
                             ObjectPath(arch)));
  const std::regex label(R"(^[0-9a-f]+ <([^>]+)>:)");
  const std::regex instruction(R"(^\s+([a-z_][a-z0-9_]*)\b)");
  Kernel* current = nullptr;
  std::smatch m;
  for (std::string line; std::getline(dis, line);) {
    if (std::regex_search(line, m, label)) {
      current = m[1].str() == ".text" ? nullptr : &kernels[m[1].str()];
    } else if (current != nullptr && std::regex_search(line, m, instruction)) {
      ++current->mnemonics[m[1].str()];
    }
  }
  std::istringstream notes(Run(std::string(KD_LLVM_READELF) + " --notes " + ObjectPath(arch)));
  const std::regex field(R"(^\s+-?\s*(\.[a-z_]+):\s+(\S+))");
  std::map<std::string, std::string> block;
  auto flush = [&] {
    auto name = block.find(".name");
    if (name != block.end() && kernels.count(name->second)) {
      for (const auto& [k, v] : block) {
        if (k != ".name" && !v.empty() && isdigit(static_cast<unsigned char>(v[0])))
          kernels[name->second].meta[k] = std::stoi(v);
      }
    }
    block.clear();
  };
  for (std::string line; std::getline(notes, line);) {
    if (line.rfind("  - .", 0) == 0) flush();  // a new kernel's entry in amdhsa.kernels
    if (std::regex_search(line, m, field)) block[m[1].str()] = m[2].str();
  }
  flush();
  return kernels;
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

int CountPrefix(const Kernel& k, const std::string& prefix) {
  int n = 0;
  for (const auto& [name, count] : k.mnemonics) {
    if (name.rfind(prefix, 0) == 0) n += count;
  }
  return n;
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
        in.k_major ? "k-major" : "nn     ", CountPrefix(k, "v_mfma_f32_32x32x16_"),
        k.meta.count(".vgpr_count") ? k.meta.at(".vgpr_count") : -1,
        k.meta.count(".agpr_count") ? k.meta.at(".agpr_count") : -1,
        k.meta.count(".private_segment_fixed_size") ? k.meta.at(".private_segment_fixed_size") : -1,
        k.meta.count(".vgpr_spill_count") ? k.meta.at(".vgpr_spill_count") : -1,
        k.meta.count(".sgpr_spill_count") ? k.meta.at(".sgpr_spill_count") : -1,
        CountPrefix(k, "s_trap"));
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
    EXPECT_EQ(CountPrefix(k, "v_mfma"), 8 * frags) << "an MFMA of another operand pair";
    EXPECT_EQ(CountPrefix(k, "scratch_"), 0);
    EXPECT_EQ(CountPrefix(k, "buffer_"), 0);
    EXPECT_EQ(
        k.meta.count(".private_segment_fixed_size") ? k.meta.at(".private_segment_fixed_size") : -1,
        0);
    EXPECT_EQ(k.meta.count(".vgpr_spill_count") ? k.meta.at(".vgpr_spill_count") : -1, 0);
    EXPECT_EQ(k.meta.count(".sgpr_spill_count") ? k.meta.at(".sgpr_spill_count") : -1, 0);
    EXPECT_EQ(CountPrefix(k, "s_trap"), 0);
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
    EXPECT_EQ(CountPrefix(k, "v_mfma"), 0);
    EXPECT_GE(CountPrefix(k, "s_trap"), 1);
  }
  EXPECT_EQ(instances, 24) << "cannot read " << ObjectPath("gfx90a");
}

}  // namespace
