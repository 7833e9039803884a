// What every op shares, built from its OpTraits: names, tensor lists, metric labels, and the
// checks Validate adds to each op's own rules.
#include "kerneld/kernels/ops.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/ops/checks.h"

namespace kd {
namespace {

template <typename Args>
using TraitsOf = OpTraits<std::decay_t<Args>>;

// The tensors of kDTypeFrom and kDTypeTo.
template <typename Args>
std::pair<const Tensor*, const Tensor*> DTypeTensors(const Args& args) {
  using T = OpTraits<Args>;
  const Tensor* to = T::kDTypeTo == nullptr ? nullptr : &(args.*T::kDTypeTo);
  return {&(args.*T::kDTypeFrom), to};
}

// Calls fn(field, tensor) for each present tensor of `args`, in kTensors order. Unrolled over the
// constexpr table, so that each field's offset is a constant: these run on every request.
template <typename Args, typename Fn, size_t... I>
void ForEachPresent(const Args& args, Fn&& fn, std::index_sequence<I...>) {
  const auto visit = [&](const OpTensorField<Args>& field) {
    const Tensor& t = args.*field.member;
    if (t.present()) fn(field, t);
  };
  (visit(OpTraits<Args>::kTensors[I]), ...);
}
template <typename Args, typename Fn>
void ForEachPresent(const Args& args, Fn&& fn) {
  ForEachPresent(args, std::forward<Fn>(fn),
                 std::make_index_sequence<std::size(OpTraits<Args>::kTensors)>());
}

// OpShapeClass's class as an index into kShapeClasses.
constexpr absl::string_view kShapeClasses[] = {"xs", "s", "m", "l", "xl"};
template <typename Args>
int ShapeClassIndex(const Args& args) {
  int64_t largest = 0;
  ForEachPresent(
      args, [&largest](const auto&, const Tensor& t) { largest = std::max(largest, t.numel()); });
  if (largest < (int64_t{1} << 16)) return 0;
  if (largest < (int64_t{1} << 20)) return 1;
  if (largest < (int64_t{1} << 24)) return 2;
  if (largest < (int64_t{1} << 27)) return 3;
  return 4;
}

// Bytes [begin, end) a tensor can touch.
std::pair<uintptr_t, uintptr_t> ByteRange(const Tensor& t) {
  uint64_t last = 0;
  for (int i = 0; i < t.rank; ++i) last += static_cast<uint64_t>(t.shape[i] - 1) * t.strides[i];
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data);
  return {begin, begin + (last + 1) * DTypeSize(t.dtype)};
}

}  // namespace

// EnumLabel and IsKnown of every kernels enum, from the table.
#define KD_ENUM_LABEL_CASE_(suffix, cpp, value, label, ...) \
  case E::cpp:                                              \
    return label;
#define KD_ENUM_KNOWN_CASE_(suffix, cpp, value, label, ...) case E::cpp:
#define KD_ENUM_FUNCTIONS_(Enum)                                               \
  absl::string_view EnumLabel(Enum v) {                                        \
    using E = Enum;                                                            \
    switch (v) { KD_ENUM_VALUES_##Enum(KD_ENUM_LABEL_CASE_) default : break; } \
    return "invalid";                                                          \
  }                                                                            \
  bool IsKnown(Enum v) {                                                       \
    using E = Enum;                                                            \
    switch (v) {                                                               \
      KD_ENUM_VALUES_##Enum(KD_ENUM_KNOWN_CASE_) return true;                  \
      default:                                                                 \
        return false;                                                          \
    }                                                                          \
  }
KD_ENUM_FUNCTIONS_(QuantGranularity)
KD_ENUM_FUNCTIONS_(ScaleFormat)
KD_ENUM_FUNCTIONS_(ScaleLayout)
KD_ENUM_FUNCTIONS_(MxRounding)
KD_ENUM_FUNCTIONS_(GemmVariant)
#undef KD_ENUM_FUNCTIONS_
#undef KD_ENUM_KNOWN_CASE_
#undef KD_ENUM_LABEL_CASE_

absl::string_view OpName(const Op& op) {
  return std::visit([](const auto& args) { return TraitsOf<decltype(args)>::kName; }, op);
}

NamedTensors OpTensors(const Op& op) {
  NamedTensors out;
  std::visit(
      [&out](const auto& args) {
        ForEachPresent(args, [&out](const auto& field, const Tensor& t) {
          out.push_back({field.name, &t, field.output});
        });
      },
      op);
  return out;
}

std::string OpVariantLabel(const Op& op) {
  return std::visit([](const auto& args) { return TraitsOf<decltype(args)>::VariantLabel(args); },
                    op);
}

std::string OpDTypeLabel(const Op& op) {
  return std::visit(
      [](const auto& args) {
        const auto [from, to] = DTypeTensors(args);
        if (to == nullptr) return std::string(DTypeName(from->dtype));
        return absl::StrCat(DTypeName(from->dtype), ">", DTypeName(to->dtype));
      },
      op);
}

absl::string_view OpShapeClass(const Op& op) {
  return kShapeClasses[std::visit([](const auto& args) { return ShapeClassIndex(args); }, op)];
}

uint64_t OpLabelKey(const Op& op) {
  // op index | shape class << 8 | dtypes << 16, << 24 | VariantKey << 32.
  const uint64_t key = std::visit(
      [](const auto& args) -> uint64_t {
        const auto [from, to] = DTypeTensors(args);
        const uint64_t dtypes = static_cast<uint64_t>(from->dtype) |
                                (to == nullptr ? 0 : static_cast<uint64_t>(to->dtype) << 8);
        return static_cast<uint64_t>(ShapeClassIndex(args)) << 8 | dtypes << 16 |
               static_cast<uint64_t>(TraitsOf<decltype(args)>::VariantKey(args)) << 32;
      },
      op);
  return static_cast<uint64_t>(op.index()) | key;
}

absl::StatusOr<ValidatedOp> Validate(const Op& op) { return Validate(Op(op)); }

absl::StatusOr<ValidatedOp> Validate(Op&& op) {
  const absl::Status status =
      std::visit([](const auto& args) { return TraitsOf<decltype(args)>::Validate(args); }, op);
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
    if (!out.output) continue;
    const auto [ob, oe] = ByteRange(*out.tensor);
    for (const NamedTensor& other : tensors) {
      if (other.tensor == out.tensor) continue;
      const auto [b, e] = ByteRange(*other.tensor);
      if (ob < e && b < oe) {
        return internal::Invalid(out.field, " overlaps ", other.field,
                                 " in memory; outputs must not alias other tensors of the op");
      }
    }
  }
  // Built in the result's storage: the op is moved once, into the ValidatedOp.
  return absl::StatusOr<ValidatedOp>(absl::in_place, ValidatedOp::Key(), std::move(op));
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
