// The portable tile GEMM's host side (kernels/gpu/tile_gemm: tile_gemm_config.h and
// tile_gemm_args.h): configuration spaces per architecture and the heuristic, which formats each
// device takes and with which code it refuses the others, and how each GemmArgs variant maps to
// the kernel's Params. No GPU needed.
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/gpu/device_caps.h"
#include "kernels/gpu/tile_gemm/tile_gemm_args.h"

namespace kd {
namespace tile_gemm {
namespace {

bool Contains(const std::vector<TileShape>& space, const TileShape& s) {
  for (const TileShape& t : space) {
    if (t == s) return true;
  }
  return false;
}

TEST(TileGemmConfigTest, FamiliesFollowTheFp8MatrixInstructions) {
  EXPECT_EQ(FamilyOf("sm_89"), ArchFamily::kNvidia);
  EXPECT_EQ(FamilyOf("sm_90"), ArchFamily::kNvidia);
  EXPECT_EQ(FamilyOf("sm_90a"), ArchFamily::kNvidia);
  EXPECT_EQ(FamilyOf("sm_120"), ArchFamily::kNvidia);
  EXPECT_EQ(FamilyOf("sm_86"), ArchFamily::kNone);
  EXPECT_EQ(FamilyOf("sm_80"), ArchFamily::kNone);
  EXPECT_EQ(FamilyOf("gfx942"), ArchFamily::kGfx94x);
  EXPECT_EQ(FamilyOf("gfx940"), ArchFamily::kGfx94x);
  EXPECT_EQ(FamilyOf("gfx950"), ArchFamily::kGfx950);
  EXPECT_EQ(FamilyOf("gfx90a"), ArchFamily::kNone);
  EXPECT_EQ(FamilyOf("sm_"), ArchFamily::kNone);
  EXPECT_EQ(FamilyOf(""), ArchFamily::kNone);
}

// FamilyOf reads the FP8 matrix-core table (kernels/gpu/device_caps.h): every entry's family
// follows its encoding, an NVIDIA part the table does not list takes the nearest one below, and a
// feature suffix is not stripped.
TEST(TileGemmConfigTest, FamiliesFollowTheDeviceCapsTable) {
  for (const GpuArchCaps& caps : GpuArchTable()) {
    const bool amd = absl::StartsWith(caps.arch, "gfx");
    ArchFamily expected = ArchFamily::kNone;
    if (caps.fp8 == Fp8MatrixFormats::kFnuz) expected = ArchFamily::kGfx94x;
    if (caps.fp8 == Fp8MatrixFormats::kOcp) {
      expected = amd ? ArchFamily::kGfx950 : ArchFamily::kNvidia;
    }
    EXPECT_EQ(FamilyOf(caps.arch), expected) << caps.arch;
  }
  for (int version = 0; version < 200; ++version) {
    const std::string arch = absl::StrCat("sm_", version);
    EXPECT_EQ(FamilyOf(arch), version >= 89 ? ArchFamily::kNvidia : ArchFamily::kNone) << arch;
    EXPECT_EQ(FamilyOf(arch + "a"), FamilyOf(arch)) << arch;
  }
  EXPECT_EQ(FamilyOf("gfx942:sramecc+:xnack-"), ArchFamily::kNone);
  EXPECT_EQ(FamilyOf("gfx943"), ArchFamily::kNone);
  EXPECT_EQ(FamilyOf("x86_64"), ArchFamily::kNone);
}

TEST(TileGemmConfigTest, EachArchitectureHasItsOwnSpaceWithTheDefaultFirst) {
  // Hopper's three-stage 128x128 (113.6 KB of shared memory) is past sm_89's 99 KB per block.
  EXPECT_EQ(TileGemmSpace("sm_90")[0], (TileShape{128, 128, 3}));
  EXPECT_EQ(TileGemmSpace("sm_89")[0], (TileShape{128, 128, 2}));
  EXPECT_FALSE(Contains(TileGemmSpace("sm_89"), TileShape{128, 128, 3}));
  // AMD shapes fit gfx942's 64 KB of LDS; none of them is in an NVIDIA space and back.
  for (const TileShape& s : TileGemmSpace("gfx942")) {
    EXPECT_FALSE(Contains(TileGemmSpace("sm_90"), s)) << TileShapeToString(s);
    EXPECT_EQ(s.stages, 2);
    EXPECT_LE(2 * (s.block_m + s.block_n) * (128 + 16 + 4), 64 * 1024) << TileShapeToString(s);
  }
  EXPECT_TRUE(TileGemmSpace("gfx90a").empty());
  EXPECT_TRUE(TileGemmSpace("sm_80").empty());
}

TEST(TileGemmConfigTest, HeuristicPicksFromTheArchitecturesSpace) {
  for (const char* arch : {"sm_89", "sm_90", "gfx942", "gfx950"}) {
    for (int64_t rows : {1, 64, 65, 300, 4096, 16384}) {
      for (int64_t cols : {7, 128, 2112, 7168}) {
        const TileShape s = HeuristicTileShape(arch, rows, cols, 1, 132);
        EXPECT_TRUE(Contains(TileGemmSpace(arch), s))
            << arch << " " << rows << "x" << cols << ": " << TileShapeToString(s);
      }
    }
  }
  EXPECT_EQ(HeuristicTileShape("sm_90", 8192, 8192, 1, 132), (TileShape{128, 128, 3}));
  EXPECT_EQ(HeuristicTileShape("sm_90", 64, 4096, 1, 132), (TileShape{64, 128, 3}));
  EXPECT_EQ(HeuristicTileShape("sm_90", 1024, 1024, 1, 132), (TileShape{128, 64, 3}));
  EXPECT_EQ(HeuristicTileShape("gfx942", 8192, 8192, 1, 304), (TileShape{128, 64, 2}));
  EXPECT_EQ(HeuristicTileShape("gfx90a", 8192, 8192, 1, 110), TileShape{});
}

TEST(TileGemmConfigTest, ShapeStringsRoundTrip) {
  for (const char* arch : {"sm_90", "gfx942"}) {
    for (const TileShape& s : TileGemmSpace(arch)) {
      const absl::StatusOr<TileShape> parsed = ParseTileShape(TileShapeToString(s));
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_EQ(*parsed, s);
    }
  }
  EXPECT_EQ(TileShapeToString({128, 64, 3}), "128x64s3");
  for (const char* bad :
       {"", "128x128", "128x128s", "x128s3", "128x128s3x", "128 x128s3", "+128x128s3"}) {
    EXPECT_EQ(ParseTileShape(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// The typed config the autotune spaces and the tune cache hold: "tm<M>.tn<N>.ts<S>", canonical
// only, of a shape some architecture's space has; which architecture runs it is TileGemmRuns.
TEST(TileGemmConfigTest, TypedConfigsRoundTripAndSayWhereTheyRun) {
  for (const char* arch : {"sm_90", "sm_89", "gfx942", "gfx950"}) {
    for (const TileShape& s : TileGemmSpace(arch)) {
      const TileGemmConfig c = ToTileGemmConfig(s);
      EXPECT_EQ(ToTileShape(c), s);
      const absl::StatusOr<TileGemmConfig> parsed = ParseTileGemmConfig(TileGemmConfigToString(c));
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_EQ(*parsed, c);
      EXPECT_TRUE(TileGemmRuns(arch, c)) << arch;
    }
  }
  EXPECT_EQ(TileGemmConfigToString({128, 64, 3}), "tm128.tn64.ts3");
  // Hopper's three-stage 128x128 tile needs more shared memory than sm_89 has per block; AMD's
  // 64x64 tile is built for AMD alone; nothing runs on an architecture without FP8 MMA.
  EXPECT_TRUE(TileGemmRuns("sm_90", {128, 128, 3}));
  EXPECT_FALSE(TileGemmRuns("sm_89", {128, 128, 3}));
  EXPECT_FALSE(TileGemmRuns("sm_90", {64, 64, 2}));
  EXPECT_TRUE(TileGemmRuns("gfx942", {64, 64, 2}));
  EXPECT_FALSE(TileGemmRuns("gfx90a", {128, 64, 2}));
  EXPECT_FALSE(TileGemmRuns("sm_80", {128, 128, 2}));
  for (const char* bad : {"", "tm128.tn128", "tm128.tn128.ts2.x1", "tn128.tm128.ts2",
                          "tm0128.tn128.ts2", "tm256.tn128.ts2", "tm128.tn128.ts4", "128x128s2"}) {
    EXPECT_EQ(ParseTileGemmConfig(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// A tensor view over fake device addresses (nothing is dereferenced).
Tensor View(uintptr_t address, DType dtype, std::vector<int64_t> shape,
            std::vector<int64_t> strides = {}) {
  Tensor t;
  t.data = reinterpret_cast<void*>(address);
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.strides[d] = strides.empty() ? stride : strides[d];
    stride *= shape[d];
  }
  return t;
}

GemmArgs Nt(DType a, DType b) {
  GemmArgs g;
  g.variant = GemmVariant::kNT;
  g.a = View(0x10000, a, {300, 256});
  g.a_scales = View(0x20000, DType::kF32, {300, 2});
  g.b = View(0x30000, b, {200, 256});
  g.b_scales = View(0x40000, DType::kF32, {2, 2});
  g.d = View(0x50000, DType::kBF16, {300, 200});
  return g;
}

TEST(TileGemmArgsTest, DevicesTakeTheFormatsTheirMatrixCoresRead) {
  for (const char* arch : {"sm_89", "sm_90", "gfx950"}) {
    EXPECT_TRUE(TileGemmSupports(Nt(DType::kE4M3FN, DType::kE4M3FN), arch).ok()) << arch;
    EXPECT_TRUE(TileGemmSupports(Nt(DType::kE4M3FN, DType::kE5M2), arch).ok()) << arch;
    EXPECT_TRUE(TileGemmSupports(Nt(DType::kE5M2, DType::kE5M2), arch).ok()) << arch;
    const absl::Status fnuz = TileGemmSupports(Nt(DType::kE4M3FNUZ, DType::kE4M3FNUZ), arch);
    EXPECT_EQ(fnuz.code(), absl::StatusCode::kFailedPrecondition) << arch;
    EXPECT_NE(fnuz.message().find("e4m3fnuz"), absl::string_view::npos) << fnuz;
    EXPECT_NE(fnuz.message().find(arch), absl::string_view::npos) << fnuz;
  }
  EXPECT_TRUE(TileGemmSupports(Nt(DType::kE4M3FNUZ, DType::kE4M3FNUZ), "gfx942").ok());
  const absl::Status ocp = TileGemmSupports(Nt(DType::kE4M3FN, DType::kE4M3FN), "gfx942");
  EXPECT_EQ(ocp.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ocp.message().find("a.dtype=e4m3fn"), absl::string_view::npos) << ocp;
  EXPECT_EQ(TileGemmSupports(Nt(DType::kE5M2, DType::kE5M2), "gfx942").code(),
            absl::StatusCode::kFailedPrecondition);
  for (const char* arch : {"gfx90a", "sm_80", "sm_86"}) {
    const absl::Status none = TileGemmSupports(Nt(DType::kE4M3FN, DType::kE4M3FN), arch);
    EXPECT_EQ(none.code(), absl::StatusCode::kUnimplemented) << arch;
    EXPECT_NE(none.message().find(arch), absl::string_view::npos) << none;
  }
}

TEST(TileGemmArgsTest, NtMapsRowsScalesAndStrides) {
  GemmArgs g = Nt(DType::kE5M2, DType::kE4M3FN);
  g.d = View(0x50000, DType::kF32, {300, 200}, {264, 1});
  g.accumulate = true;
  const absl::StatusOr<Params> p = TileGemmParams(g);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, Mode::kDense);
  EXPECT_EQ(p->a_kind, Fp8Kind::kE5M2);
  EXPECT_EQ(p->b_kind, Fp8Kind::kE4M3);
  EXPECT_TRUE(p->b_k_major && p->d_f32 && p->accumulate);
  EXPECT_EQ(p->m, 300);
  EXPECT_EQ(p->n, 200);
  EXPECT_EQ(p->k, 256);
  EXPECT_EQ(p->lda, 256);
  EXPECT_EQ(p->ldb, 256);
  EXPECT_EQ(p->sa_ld, 2);
  EXPECT_EQ(p->sb_row, 2);
  EXPECT_EQ(p->sb_col, 1);
  EXPECT_EQ(p->sb_shift, 7);
  EXPECT_EQ(p->ldd, 264);
}

TEST(TileGemmArgsTest, NnReadsBAlongNAndItsScalesTransposed) {
  GemmArgs g;
  g.variant = GemmVariant::kNN;
  g.a = View(0x10000, DType::kE4M3FN, {64, 384});
  g.a_scales = View(0x20000, DType::kF32, {64, 3});
  g.b = View(0x30000, DType::kE4M3FN, {384, 200}, {204, 1});
  g.b_scales = View(0x40000, DType::kF32, {3, 2});
  g.d = View(0x50000, DType::kBF16, {64, 200});
  const absl::StatusOr<Params> p = TileGemmParams(g);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->b_k_major);
  EXPECT_EQ(p->n, 200);
  EXPECT_EQ(p->k, 384);
  EXPECT_EQ(p->ldb, 204);
  EXPECT_EQ(p->sb_row, 1);
  EXPECT_EQ(p->sb_col, 2);
  EXPECT_EQ(p->sb_shift, 7);
  // NN's b is read 4 columns at a time: its row stride must be a multiple of 4 bytes.
  g.b = View(0x30000, DType::kE4M3FN, {384, 200}, {202, 1});
  const absl::StatusOr<Params> odd = TileGemmParams(g);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("b.strides[0]=202"), absl::string_view::npos)
      << odd.status();
}

TEST(TileGemmArgsTest, TnAndKGroupedUseRowScalesOfB) {
  GemmArgs g = Nt(DType::kE4M3FN, DType::kE4M3FN);
  g.variant = GemmVariant::kTN;
  g.b_scales = View(0x40000, DType::kF32, {200, 2});
  absl::StatusOr<Params> p = TileGemmParams(g);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->sb_shift, 0);
  EXPECT_EQ(p->sb_row, 2);

  g.variant = GemmVariant::kKGroupedTN;
  g.d = View(0x50000, DType::kF32, {3, 300, 200});
  g.group_ends = View(0x60000, DType::kI64, {3});
  p = TileGemmParams(g);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, Mode::kKGrouped);
  EXPECT_EQ(p->num_groups, 3);
  EXPECT_EQ(p->k, 256);
  EXPECT_EQ(p->d_group, 300 * 200);
  EXPECT_EQ(p->ldd, 200);
  EXPECT_TRUE(p->group_ends_i64);
}

TEST(TileGemmArgsTest, MGroupedStepsBAndItsScalesPerGroup) {
  GemmArgs g;
  g.variant = GemmVariant::kMGroupedNT;
  g.a = View(0x10000, DType::kE4M3FN, {1000, 512});
  g.a_scales = View(0x20000, DType::kF32, {1000, 4});
  g.b = View(0x30000, DType::kE4M3FN, {6, 320, 512});
  g.b_scales = View(0x40000, DType::kF32, {6, 3, 4});
  g.d = View(0x50000, DType::kBF16, {1000, 320});
  g.group_ends = View(0x60000, DType::kI32, {6});
  absl::StatusOr<Params> p = TileGemmParams(g);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, Mode::kMGrouped);
  EXPECT_EQ(p->num_groups, 6);
  EXPECT_EQ(p->m, 1000);
  EXPECT_EQ(p->n, 320);
  EXPECT_EQ(p->b_group, 320 * 512);
  EXPECT_EQ(p->ldb, 512);
  EXPECT_EQ(p->sb_group, 12);
  EXPECT_EQ(p->sb_row, 4);
  EXPECT_EQ(p->d_group, 0);
  EXPECT_FALSE(p->group_ends_i64);

  g.b = View(0x30000, DType::kE4M3FN, {kMaxGroups + 1, 320, 512});
  g.b_scales = View(0x40000, DType::kF32, {kMaxGroups + 1, 3, 4});
  g.group_ends = View(0x60000, DType::kI32, {kMaxGroups + 1});
  EXPECT_EQ(TileGemmParams(g).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(TileGemmArgsTest, ReductionContiguousOperandsNeedSixteenByteRows) {
  GemmArgs g = Nt(DType::kE4M3FN, DType::kE4M3FN);
  g.a = View(0x10008, DType::kE4M3FN, {300, 256});
  absl::StatusOr<Params> p = TileGemmParams(g);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("a starts at"), absl::string_view::npos) << p.status();
  g = Nt(DType::kE4M3FN, DType::kE4M3FN);
  g.b = View(0x30000, DType::kE4M3FN, {200, 256}, {264, 1});
  p = TileGemmParams(g);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("b.strides[0]=264"), absl::string_view::npos) << p.status();
  g.b = View(0x30000, DType::kE4M3FN, {200, 256}, {272, 1});
  EXPECT_TRUE(TileGemmParams(g).ok());
}

}  // namespace
}  // namespace tile_gemm
}  // namespace kd
