#include "kerneld/kernels/ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/ops/checks.h"

namespace kd {
namespace internal {

absl::Status CheckTensor(const Tensor& t, absl::string_view field, int rank,
                         std::initializer_list<DType> dtypes, Layout layout) {
  if (!t.present()) return Invalid(field, " is required");
  if (t.rank != rank) {
    return Invalid(field, ".shape ", t.ShapeString(), " has rank ", t.rank, "; must be ", rank);
  }
  const bool transposed = layout == Layout::kOrTransposed2d && rank == 2 && t.strides[0] == 1;
  if (t.strides[rank - 1] != 1 && !transposed) {
    return Invalid(field, ".strides[", rank - 1, "]=", t.strides[rank - 1],
                   " must be 1 (the innermost dimension is contiguous)");
  }
  if (dtypes.size() == 0) return absl::OkStatus();
  for (DType d : dtypes) {
    if (t.dtype == d) return absl::OkStatus();
  }
  std::vector<absl::string_view> names;
  for (DType d : dtypes) names.push_back(DTypeName(d));
  return Invalid(field, ".dtype=", DTypeName(t.dtype), " must be one of ",
                 absl::StrJoin(names, ", "));
}

absl::Status CheckShape(const Tensor& t, absl::string_view field,
                        std::initializer_list<int64_t> expected) {
  bool same = static_cast<int>(expected.size()) == t.rank;
  int i = 0;
  for (int64_t e : expected) {
    if (same && t.shape[i] != e) same = false;
    ++i;
  }
  if (same) return absl::OkStatus();
  return Invalid(field, ".shape ", t.ShapeString(), " must be (", absl::StrJoin(expected, ", "),
                 ")");
}

int64_t RowStride(const Tensor& t) { return t.rank >= 2 ? t.strides[t.rank - 2] : t.shape[0]; }

namespace {

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

absl::Status CheckAlignment(int32_t alignment) {
  if (alignment < 1 || alignment > 1024 || !IsPowerOfTwo(alignment)) {
    return Invalid("alignment=", alignment, " must be a power of two in 1..1024 (16, 32, 128)");
  }
  return absl::OkStatus();
}

absl::Status ValidatePad(const PadArgs& a) {
  KD_RETURN_IF_ERROR(CheckTensor(a.input, "input", 2, {}));
  KD_RETURN_IF_ERROR(CheckTensor(a.group_ends, "group_ends", 1, {DType::kI32, DType::kI64}));
  KD_RETURN_IF_ERROR(CheckTensor(a.output, "output", 2, {a.input.dtype}));
  KD_RETURN_IF_ERROR(CheckTensor(a.padded_group_ends, "padded_group_ends", 1, {DType::kI32}));
  KD_RETURN_IF_ERROR(CheckAlignment(a.alignment));
  const int64_t t = a.input.shape[0], h = a.input.shape[1], g = a.group_ends.shape[0];
  if (a.output.shape[1] != h) {
    return Invalid("output.shape[1]=", a.output.shape[1], " must equal input.shape[1]=", h);
  }
  const int64_t bound = t + g * (a.alignment - 1);
  if (a.output.shape[0] < bound) {
    return Invalid("output.shape[0]=", a.output.shape[0], " must be >= input rows + groups * ",
                   "(alignment - 1) = ", bound);
  }
  KD_RETURN_IF_ERROR(CheckShape(a.padded_group_ends, "padded_group_ends", {g}));
  return absl::OkStatus();
}

absl::Status ValidateUnpad(const UnpadArgs& a) {
  KD_RETURN_IF_ERROR(CheckTensor(a.input, "input", 2, {}));
  KD_RETURN_IF_ERROR(CheckTensor(a.group_ends, "group_ends", 1, {DType::kI32, DType::kI64}));
  KD_RETURN_IF_ERROR(CheckTensor(a.output, "output", 2, {a.input.dtype}));
  KD_RETURN_IF_ERROR(CheckAlignment(a.alignment));
  if (a.output.shape[1] != a.input.shape[1]) {
    return Invalid("output.shape[1]=", a.output.shape[1],
                   " must equal input.shape[1]=", a.input.shape[1]);
  }
  if (a.input.shape[0] < a.output.shape[0]) {
    return Invalid("input.shape[0]=", a.input.shape[0],
                   " must be >= output.shape[0]=", a.output.shape[0],
                   " (the padded tensor holds every row)");
  }
  return absl::OkStatus();
}

// Bytes [begin, end) a tensor can touch.
std::pair<uintptr_t, uintptr_t> ByteRange(const Tensor& t) {
  uint64_t last = 0;
  for (int i = 0; i < t.rank; ++i) last += static_cast<uint64_t>(t.shape[i] - 1) * t.strides[i];
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data);
  return {begin, begin + (last + 1) * DTypeSize(t.dtype)};
}

bool IsOutputField(absl::string_view field) {
  return field == "output" || field == "output_t" || field == "scales" || field == "scales_t" ||
         field == "d" || field == "padded_group_ends";
}

}  // namespace
}  // namespace internal

absl::string_view GranularityName(QuantGranularity g) {
  switch (g) {
    case QuantGranularity::k1x128:
      return "1x128";
    case QuantGranularity::k128x1:
      return "128x1";
    case QuantGranularity::k128x128:
      return "128x128";
    case QuantGranularity::kPerRow:
      return "per_row";
    case QuantGranularity::kPerTensor:
      return "per_tensor";
    case QuantGranularity::kMx1x32:
      return "mx1x32";
    case QuantGranularity::kJaggedRowwise:
      return "jagged_rowwise";
    case QuantGranularity::kJaggedColwise:
      return "jagged_colwise";
    case QuantGranularity::kInvalid:
      break;
  }
  return "invalid";
}

absl::string_view GemmVariantName(GemmVariant v) {
  switch (v) {
    case GemmVariant::kNT:
      return "nt";
    case GemmVariant::kNN:
      return "nn";
    case GemmVariant::kTN:
      return "tn";
    case GemmVariant::kMGroupedNT:
      return "m_grouped_nt";
    case GemmVariant::kKGroupedTN:
      return "k_grouped_tn";
    case GemmVariant::kInvalid:
      break;
  }
  return "invalid";
}

absl::string_view OpName(const Op& op) {
  static constexpr absl::string_view kNames[] = {"quantize", "gemm", "pad", "unpad"};
  return kNames[op.index()];
}

std::string OpVariantLabel(const Op& op) {
  if (auto* q = std::get_if<QuantizeArgs>(&op)) {
    std::string label(GranularityName(q->granularity));
    if (q->output_t.present())
      label += "_dual";
    else if (q->transpose_output)
      label += "_t";
    return label;
  }
  if (auto* g = std::get_if<GemmArgs>(&op)) return std::string(GemmVariantName(g->variant));
  if (auto* p = std::get_if<PadArgs>(&op)) return absl::StrCat("a", p->alignment);
  if (auto* u = std::get_if<UnpadArgs>(&op)) return absl::StrCat("a", u->alignment);
  return "unknown";
}

std::string OpDTypeLabel(const Op& op) {
  if (auto* q = std::get_if<QuantizeArgs>(&op)) {
    return absl::StrCat(DTypeName(q->input.dtype), ">", DTypeName(q->output.dtype));
  }
  if (auto* g = std::get_if<GemmArgs>(&op)) {
    return absl::StrCat(DTypeName(g->a.dtype), ">", DTypeName(g->d.dtype));
  }
  if (auto* p = std::get_if<PadArgs>(&op)) return std::string(DTypeName(p->input.dtype));
  if (auto* u = std::get_if<UnpadArgs>(&op)) return std::string(DTypeName(u->input.dtype));
  return "unknown";
}

namespace {

// OpShapeClass's class as an index into kShapeClasses.
constexpr absl::string_view kShapeClasses[] = {"xs", "s", "m", "l", "xl"};
int ShapeClassIndex(const Op& op) {
  int64_t largest = 0;
  for (const NamedTensor& nt : OpTensors(op)) largest = std::max(largest, nt.tensor->numel());
  if (largest < (int64_t{1} << 16)) return 0;
  if (largest < (int64_t{1} << 20)) return 1;
  if (largest < (int64_t{1} << 24)) return 2;
  if (largest < (int64_t{1} << 27)) return 3;
  return 4;
}

}  // namespace

absl::string_view OpShapeClass(const Op& op) { return kShapeClasses[ShapeClassIndex(op)]; }

uint64_t OpLabelKey(const Op& op) {
  // kind | shape class << 8 | dtypes << 16, << 24 | what the variant label depends on << 32.
  uint64_t dtypes = 0, variant = 0;
  if (auto* q = std::get_if<QuantizeArgs>(&op)) {
    dtypes = static_cast<uint64_t>(q->input.dtype) | static_cast<uint64_t>(q->output.dtype) << 8;
    const uint64_t form = q->output_t.present() ? 2 : q->transpose_output ? 1 : 0;
    variant = static_cast<uint32_t>(q->granularity) << 2 | form;
  } else if (auto* g = std::get_if<GemmArgs>(&op)) {
    dtypes = static_cast<uint64_t>(g->a.dtype) | static_cast<uint64_t>(g->d.dtype) << 8;
    variant = static_cast<uint32_t>(g->variant);
  } else if (auto* p = std::get_if<PadArgs>(&op)) {
    dtypes = static_cast<uint64_t>(p->input.dtype);
    variant = static_cast<uint32_t>(p->alignment);
  } else if (auto* u = std::get_if<UnpadArgs>(&op)) {
    dtypes = static_cast<uint64_t>(u->input.dtype);
    variant = static_cast<uint32_t>(u->alignment);
  }
  return static_cast<uint64_t>(op.index()) | static_cast<uint64_t>(ShapeClassIndex(op)) << 8 |
         dtypes << 16 | variant << 32;
}

NamedTensors OpTensors(const Op& op) {
  NamedTensors out;
  auto add = [&](absl::string_view field, const Tensor& t) {
    if (t.present()) out.push_back({field, &t});
  };
  if (auto* q = std::get_if<QuantizeArgs>(&op)) {
    add("input", q->input);
    add("group_ends", q->group_ends);
    add("output", q->output);
    add("scales", q->scales);
    add("output_t", q->output_t);
    add("scales_t", q->scales_t);
  } else if (auto* g = std::get_if<GemmArgs>(&op)) {
    add("a", g->a);
    add("a_scales", g->a_scales);
    add("b", g->b);
    add("b_scales", g->b_scales);
    add("group_ends", g->group_ends);
    add("d", g->d);
  } else if (auto* p = std::get_if<PadArgs>(&op)) {
    add("input", p->input);
    add("group_ends", p->group_ends);
    add("output", p->output);
    add("padded_group_ends", p->padded_group_ends);
  } else if (auto* u = std::get_if<UnpadArgs>(&op)) {
    add("input", u->input);
    add("group_ends", u->group_ends);
    add("output", u->output);
  }
  return out;
}

absl::Status Validate(const Op& op) {
  absl::Status status;
  if (auto* q = std::get_if<QuantizeArgs>(&op))
    status = internal::ValidateQuantize(*q);
  else if (auto* g = std::get_if<GemmArgs>(&op))
    status = internal::ValidateGemm(*g);
  else if (auto* p = std::get_if<PadArgs>(&op))
    status = internal::ValidatePad(*p);
  else if (auto* u = std::get_if<UnpadArgs>(&op))
    status = internal::ValidateUnpad(*u);
  if (!status.ok()) return status;

  const NamedTensors tensors = OpTensors(op);
  for (const NamedTensor& nt : tensors) {
    if (nt.tensor->loc != tensors.front().tensor->loc) {
      return absl::FailedPreconditionError(absl::StrCat(
          nt.field, " is on ", BackendName(nt.tensor->loc.kind), ":", nt.tensor->loc.device,
          " but ", tensors.front().field, " is on ", BackendName(tensors.front().tensor->loc.kind),
          ":", tensors.front().tensor->loc.device,
          "; every tensor of an op must be on one device"));
    }
  }
  for (const NamedTensor& out : tensors) {
    if (!internal::IsOutputField(out.field)) continue;
    const auto [ob, oe] = internal::ByteRange(*out.tensor);
    for (const NamedTensor& other : tensors) {
      if (other.tensor == out.tensor) continue;
      const auto [b, e] = internal::ByteRange(*other.tensor);
      if (ob < e && b < oe) {
        return internal::Invalid(out.field, " overlaps ", other.field,
                                 " in memory; outputs must not alias other tensors of the op");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGroupEnds(const int64_t* ends, int64_t groups, int64_t total_rows,
                            absl::string_view field) {
  int64_t prev = 0;
  for (int64_t g = 0; g < groups; ++g) {
    if (ends[g] < prev) {
      return internal::Invalid(field, "[", g, "]=", ends[g], " is less than ",
                               g == 0 ? "0" : absl::StrCat(field, "[", g - 1, "]=", prev),
                               "; group ends must be non-decreasing and non-negative");
    }
    prev = ends[g];
  }
  if (groups > 0 && prev != total_rows) {
    return internal::Invalid(field, "[", groups - 1, "]=", prev, " must equal the row count ",
                             total_rows);
  }
  return absl::OkStatus();
}

}  // namespace kd
