#include "kernels/gpu/tile_gemm/tile_gemm_args.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"

namespace kd {
namespace tile_gemm {
namespace {

absl::Status CheckFormat(DType dtype, absl::string_view field, absl::string_view arch,
                         ArchFamily family) {
  const bool fnuz = dtype == DType::kE4M3FNUZ;
  if (family == ArchFamily::kGfx94x && !fnuz) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ".dtype=", DTypeName(dtype), ": the FP8 matrix instructions of ", arch,
                     " read e4m3fnuz (and e5m2fnuz), not the OCP formats"));
  }
  if (family != ArchFamily::kGfx94x && fnuz) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ".dtype=e4m3fnuz: the FP8 matrix instructions of ", arch,
                     " read the OCP formats e4m3fn and e5m2, not e4m3fnuz"));
  }
  return absl::OkStatus();
}

absl::Status CheckRows(const Tensor& t, int row_dim, int64_t multiple, absl::string_view field) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(t.data);
  if (base % multiple != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " starts at an address that is not a multiple of ", multiple, " bytes"));
  }
  if (t.strides[row_dim] % multiple != 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".strides[", row_dim,
                                                   "]=", t.strides[row_dim],
                                                   " is not a multiple of ", multiple, " bytes"));
  }
  return absl::OkStatus();
}

Fp8Kind KindOf(DType dtype) { return dtype == DType::kE5M2 ? Fp8Kind::kE5M2 : Fp8Kind::kE4M3; }

constexpr int64_t kInt32Max = 0x7FFFFFFF;

}  // namespace

absl::Status TileGemmSupports(const GemmArgs& args, absl::string_view arch) {
  const ArchFamily family = FamilyOf(arch);
  if (family == ArchFamily::kNone) {
    return absl::UnimplementedError(absl::StrCat(
        "the tile gemm needs FP8 matrix instructions, which device ", arch, " does not have"));
  }
  const absl::Status a = CheckFormat(args.a.dtype, "a", arch, family);
  if (!a.ok()) return a;
  return CheckFormat(args.b.dtype, "b", arch, family);
}

absl::StatusOr<Params> TileGemmParams(const GemmArgs& g) {
  Params p;
  p.a_kind = KindOf(g.a.dtype);
  p.b_kind = KindOf(g.b.dtype);
  p.d_f32 = g.d.dtype == DType::kF32;
  p.accumulate = g.accumulate;
  p.a = static_cast<const uint8_t*>(g.a.data);
  p.lda = g.a.strides[0];
  p.sa = static_cast<const float*>(g.a_scales.data);
  p.sa_ld = g.a_scales.strides[0];
  p.b = static_cast<const uint8_t*>(g.b.data);
  p.sb = static_cast<const float*>(g.b_scales.data);
  p.d = g.d.data;
  p.m = static_cast<int>(g.a.shape[0]);
  p.k = static_cast<int>(g.a.shape[1]);
  absl::Status rows = CheckRows(g.a, 0, 16, "a");
  if (!rows.ok()) return rows;
  switch (g.variant) {
    case GemmVariant::kNT:
    case GemmVariant::kTN:
      p.n = static_cast<int>(g.b.shape[0]);
      p.ldb = g.b.strides[0];
      p.sb_row = g.b_scales.strides[0];
      p.sb_col = 1;
      p.sb_shift = g.variant == GemmVariant::kNT ? 7 : 0;
      p.ldd = g.d.strides[0];
      rows = CheckRows(g.b, 0, 16, "b");
      break;
    case GemmVariant::kNN:
      p.b_k_major = false;
      p.n = static_cast<int>(g.b.shape[1]);
      p.ldb = g.b.strides[0];
      p.sb_row = 1;
      p.sb_col = g.b_scales.strides[0];
      p.sb_shift = 7;
      p.ldd = g.d.strides[0];
      rows = CheckRows(g.b, 0, 4, "b");
      break;
    case GemmVariant::kMGroupedNT:
      p.mode = Mode::kMGrouped;
      p.num_groups = static_cast<int>(g.b.shape[0]);
      p.n = static_cast<int>(g.b.shape[1]);
      p.b_group = g.b.strides[0];
      p.ldb = g.b.strides[1];
      p.sb_group = g.b_scales.strides[0];
      p.sb_row = g.b_scales.strides[1];
      p.sb_col = 1;
      p.sb_shift = 7;
      p.ldd = g.d.strides[0];
      rows = CheckRows(g.b, 1, 16, "b");
      if (rows.ok() && g.b.strides[0] % 16 != 0) {
        rows = absl::InvalidArgumentError(
            absl::StrCat("b.strides[0]=", g.b.strides[0], " is not a multiple of 16 bytes"));
      }
      break;
    case GemmVariant::kKGroupedTN:
      p.mode = Mode::kKGrouped;
      p.num_groups = static_cast<int>(g.d.shape[0]);
      p.n = static_cast<int>(g.b.shape[0]);
      p.ldb = g.b.strides[0];
      p.sb_row = g.b_scales.strides[0];
      p.sb_col = 1;
      p.sb_shift = 0;
      p.d_group = g.d.strides[0];
      p.ldd = g.d.strides[1];
      rows = CheckRows(g.b, 0, 16, "b");
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("variant=", static_cast<int>(g.variant), " is not a gemm variant"));
  }
  if (!rows.ok()) return rows;
  if (p.mode != Mode::kDense) {
    if (p.num_groups > kMaxGroups) {
      return absl::UnimplementedError(absl::StrCat("group_ends.shape[0]=", p.num_groups,
                                                   " is over the tile gemm's ", kMaxGroups,
                                                   " groups"));
    }
    p.group_ends = g.group_ends.data;
    p.group_ends_i64 = g.group_ends.dtype == DType::kI64;
  }
  // The kernel indexes rows, columns and the reduction with 32-bit ints and its grid with the
  // tile count.
  const int64_t m = g.a.shape[0], k = g.a.shape[1];
  const int64_t n = p.b_k_major ? g.b.shape[g.b.rank - 2] : g.b.shape[1];
  if (m > kInt32Max || k > kInt32Max || n > kInt32Max ||
      ((m + 63) / 64 + p.num_groups) * ((n + 63) / 64) > kInt32Max) {
    return absl::InvalidArgumentError(absl::StrCat("a.shape ", g.a.ShapeString(), " and b.shape ",
                                                   g.b.ShapeString(),
                                                   " need more than 2^31 rows or tiles"));
  }
  return p;
}

}  // namespace tile_gemm
}  // namespace kd
