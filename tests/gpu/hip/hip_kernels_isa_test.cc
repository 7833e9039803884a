// The AMD code objects of the GPU backend's portable kernels (kernels/gpu: quantize, pad/unpad,
// the FP8 and scale transposes, the FP8 encode check), disassembled with llvm-objdump and their
// kernel metadata read with llvm-readelf. gfx90a and gfx940: the objects kerneld_hip links
// (hipcc 5.2, unbundled from its host objects); gfx942: the same sources by clang-19, device-only.
//
// What it proves, per architecture and kernel:
//   - the one source compiled into real kernels for each target: the same kernels (by symbol) on
//     all three, every family of the backend present, each writing global memory (stores or
//     atomics) and none a trap;
//   - nothing spills to memory: no scratch_* or buffer_load/buffer_store instruction,
//     .private_segment_fixed_size 0, no VGPR spills (SGPR spills go to VGPR lanes, v_writelane,
//     and are printed, not failed);
//   - wave64: .wavefront_size 64, every work-group a whole number of wavefronts
//     (.max_flat_workgroup_size, set by KD_LAUNCH_BOUNDS, a multiple of 64), and the kernels that
//     reduce across lanes do it with wave64 cross-lane instructions (ds_bpermute, ds_swizzle, DPP);
//   - FP8 is encoded in software on AMD (the branch-free encoder of fp8_encode.h, checked
//     exhaustively against fp8::Encode on the host): no v_cvt_pk_fp8/bf8 instruction.
// What it does not prove: that the kernels compute the right bytes on an AMD GPU (no AMD GPU has
// run them), their speed, or that the 32-lane groups of vendor.h (kLaneGroup) reduce as intended
// on a wavefront of 64; those need an MI200/MI300 and the suite of tests/gpu.
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/amd_code_object.h"

#ifndef KD_LLVM_OBJDUMP
#error "KD_LLVM_OBJDUMP must name llvm-objdump"
#endif

namespace {

// Every source of the portable kernels (kernels/gpu/*.cu, from the build).
const char* const kSources[] = {KD_AMD_SOURCES};

// The kernel families the backend must hold (a part of the mangled name); a kernel of a family not
// listed here is checked as every other is.
const char* const kFamilies[] = {"Fp8EncodeCheckKernel", "GroupOffsetsKernel",
                                 "CopyGroupRowsKernel",  "QuantizeBlockwiseKernel",
                                 "QuantizeTiledKernel",  "RowBlocksKernel",
                                 "PerRowKernel",         "TensorAmaxKernel",
                                 "TensorEncodeKernel",   "ColAmaxKernel",
                                 "ColScaleKernel",       "ColEncodeKernel",
                                 "ColStripKernel",       "ColTileKernel",
                                 "MxTileAsyncKernel",    "CheckGroupEndsKernel",
                                 "TransposeFp8Kernel",   "TransposeScalesKernel"};

// Families that exchange values across lanes (shuffles).
const char* const kShuffling[] = {"GroupOffsetsKernel",  "QuantizeBlockwiseKernel",
                                  "QuantizeTiledKernel", "RowBlocksKernel",
                                  "ColStripKernel",      "ColTileKernel"};

using Kernel = kd::testing::AmdKernel;

std::string ObjectPath(const std::string& source, const std::string& arch) {
  return std::string(KD_AMD_OBJECT_DIR) + "/" + source + "." + arch + ".co";
}

// The kernels of every source's code object for `arch`, by symbol (read once per process).
std::map<std::string, Kernel> ReadArchUncached(const std::string& arch);
const std::map<std::string, Kernel>& ReadArch(const std::string& arch) {
  static auto* cache = new std::map<std::string, std::map<std::string, Kernel>>();
  auto it = cache->find(arch);
  if (it == cache->end()) it = cache->emplace(arch, ReadArchUncached(arch)).first;
  return it->second;
}

std::map<std::string, Kernel> ReadArchUncached(const std::string& arch) {
  std::map<std::string, Kernel> kernels;
  for (const char* source : kSources) {
    kernels.merge(kd::testing::ReadAmdCodeObject(KD_LLVM_OBJDUMP, KD_LLVM_READELF,
                                                 ObjectPath(source, arch), arch));
  }
  return kernels;
}

// The listed family of `symbol`, else the mangled name's first identifier ending in "Kernel" (every
// __global__ function's name does), else "".
std::string FamilyOf(const std::string& symbol) {
  for (const char* family : kFamilies) {
    if (symbol.find(family) != std::string::npos) return family;
  }
  const size_t end = symbol.find("Kernel");
  if (end == std::string::npos) return "";
  size_t begin = end;
  while (begin > 0 && std::isalpha(static_cast<unsigned char>(symbol[begin - 1]))) --begin;
  return symbol.substr(begin, end + 6 - begin);
}

class HipKernelsIsaTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HipKernelsIsaTest, RealWave64KernelsWithoutSpills) {
  const std::string arch = GetParam();
  const std::map<std::string, Kernel>& kernels = ReadArch(arch);
  ASSERT_FALSE(kernels.empty()) << "cannot read " << ObjectPath("pad", arch);
  std::set<std::string> families;
  int sgpr_spills = 0;
  for (const auto& [symbol, k] : kernels) {
    SCOPED_TRACE(arch + " " + symbol);
    const std::string family = FamilyOf(symbol);
    EXPECT_FALSE(family.empty()) << "a kernel of no known family";
    families.insert(family);
    EXPECT_GE(k.Count("global_store") + k.Count("global_atomic") + k.Count("flat_store") +
                  k.Count("flat_atomic"),
              1)
        << "a kernel that writes nothing";
    EXPECT_EQ(k.Count("s_trap"), 0);
    EXPECT_EQ(k.Count("scratch_"), 0);
    EXPECT_EQ(k.Count("buffer_load") + k.Count("buffer_store"), 0);
    EXPECT_EQ(k.Meta(".private_segment_fixed_size"), 0);
    EXPECT_EQ(k.Meta(".vgpr_spill_count"), 0);
    EXPECT_EQ(k.Meta(".wavefront_size"), 64);
    const int group = k.Meta(".max_flat_workgroup_size");
    EXPECT_TRUE(group > 0 && group <= 1024 && group % 64 == 0) << "work-group " << group;
    EXPECT_EQ(k.Count("v_cvt_pk_fp8") + k.Count("v_cvt_pk_bf8") + k.Count("v_cvt_sr_"), 0);
    sgpr_spills += std::max(0, k.Meta(".sgpr_spill_count"));
  }
  for (const char* family : kFamilies) EXPECT_EQ(families.count(family), 1u) << family;
  for (const char* family : kShuffling) {
    int cross_lane = 0;
    for (const auto& [symbol, k] : kernels) {
      if (FamilyOf(symbol) == family) {
        cross_lane += k.Count("ds_bpermute") + k.Count("ds_swizzle") + k.Count("ds_permute") +
                      k.Count("v_mov_b32_dpp") + k.Count("v_readlane");
      }
    }
    EXPECT_GT(cross_lane, 0) << family << " has no cross-lane instruction on " << arch;
  }
  std::printf("%s: %zu kernels, %zu families, %d SGPR spills to VGPR lanes in all\n", arch.c_str(),
              kernels.size(), families.size(), sgpr_spills);
}

TEST(HipKernelsIsaTest, EveryTargetHasTheSameKernels) {
  std::set<std::string> reference;
  for (const auto& [symbol, k] : ReadArch("gfx942")) reference.insert(symbol);
  for (const char* arch : {"gfx90a", "gfx940"}) {
    std::set<std::string> symbols;
    for (const auto& [symbol, k] : ReadArch(arch)) symbols.insert(symbol);
    EXPECT_EQ(symbols, reference) << arch << " and gfx942 differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Arch, HipKernelsIsaTest, ::testing::Values("gfx90a", "gfx940", "gfx942"));

}  // namespace
