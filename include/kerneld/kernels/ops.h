// The ops kerneld runs. Each op is one plain argument struct, shared by every backend, and one
// OpTraits specialisation right below it: the op's name and its tensors in order, each with its
// field name and whether the op writes it. Its validation and metric labels, declared in the
// traits, are defined in kernels/ops/<op>.cc. Everything generic (OpName, OpTensors, the labels,
// Validate) is built from the traits, so the `Op` list below is the one list of ops in the
// kernel layer; code outside it that must handle every op visits `Op` or static_asserts kOpCount.
// The semantics of each op and field are those of the matching message in
// proto/kerneld/v1/kerneld.proto.
//
// Validation happens once, in Validate(), before any backend sees an op: it returns a
// ValidatedOp, the only type Backend::Supports and Backend::Run take.
#ifndef KERNELD_KERNELS_OPS_H_
#define KERNELD_KERNELS_OPS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/tensor.h"
#include "kerneld/op_table.h"

namespace kd {

// One tensor of an op: its field name (as in the proto message), where it sits in the args
// struct, and whether the op writes it.
template <typename Args>
struct OpTensorField {
  absl::string_view name;
  Tensor Args::*member;
  bool output;
};

// Specialised once per op, below its struct:
//   kName           the op's name ("quantize"), its metric label and its error prefix
//   kTensors[]      its tensors, from its row of kerneld/op_table.h (KD_OPS_TENSORS), in the
//                   order errors and OpTensors list them
//   kDTypeFrom/To   the tensors whose dtypes make the dtype label ("bf16>e4m3fn"); kDTypeTo
//                   nullptr for one dtype ("bf16")
//   Validate        the op's rules (INVALID_ARGUMENT naming the field and the rule)
//   VariantLabel    the bounded metric label of its form ("1x128_dual", "nt", "a16")
//   VariantKey      a number equal for two ops exactly when their VariantLabels are
template <typename Args>
struct OpTraits;

constexpr int64_t kQuantBlock = 128;
constexpr int64_t kMxBlock = 32;
constexpr float kDefaultQuantEps = 1e-12f;

// The enums of kerneld/op_table.h, with its values (0, kInvalid where it is named, is
// unspecified on the wire).
#define KD_OPS_ENUMERATOR_(suffix, cpp, value, ...) cpp = value,
enum class QuantGranularity : uint8_t {
  kInvalid = 0,
  KD_ENUM_VALUES_QuantGranularity(KD_OPS_ENUMERATOR_)
};
enum class ScaleFormat : uint8_t { KD_ENUM_VALUES_ScaleFormat(KD_OPS_ENUMERATOR_) };
enum class ScaleLayout : uint8_t { KD_ENUM_VALUES_ScaleLayout(KD_OPS_ENUMERATOR_) };
enum class MxRounding : uint8_t { KD_ENUM_VALUES_MxRounding(KD_OPS_ENUMERATOR_) };
enum class GemmVariant : uint8_t { kInvalid = 0, KD_ENUM_VALUES_GemmVariant(KD_OPS_ENUMERATOR_) };
#undef KD_OPS_ENUMERATOR_

// Each enum value's label in the table ("1x128", "k_block_major", "nt"); "invalid" for a value
// the table does not list.
absl::string_view EnumLabel(QuantGranularity v);
absl::string_view EnumLabel(ScaleFormat v);
absl::string_view EnumLabel(ScaleLayout v);
absl::string_view EnumLabel(MxRounding v);
absl::string_view EnumLabel(GemmVariant v);
// Whether `v` is a value the table lists (kInvalid and unknown numbers are not).
bool IsKnown(QuantGranularity v);
bool IsKnown(ScaleFormat v);
bool IsKnown(ScaleLayout v);
bool IsKnown(MxRounding v);
bool IsKnown(GemmVariant v);

inline absl::string_view GranularityName(QuantGranularity g) { return EnumLabel(g); }
inline absl::string_view GemmVariantName(GemmVariant v) { return EnumLabel(v); }

// An op's tensors as its OpTraits lists them, from the op's row of kerneld/op_table.h
// (KD_OP_FIELDS_<name>), in the table's order. `Args` names the op's struct.
#define KD_OPS_TENSOR_FIELD_(field, dir, req) {#field, &Args::field, KD_OPS_IS_OUT_##dir},
#define KD_OPS_IS_OUT_IN false
#define KD_OPS_IS_OUT_OUT true
#define KD_OPS_NOT_A_TENSOR_(...)
#define KD_OPS_TENSORS(name)                                                            \
  KD_OP_FIELDS_##name(KD_OPS_TENSOR_FIELD_, KD_OPS_NOT_A_TENSOR_, KD_OPS_NOT_A_TENSOR_, \
                      KD_OPS_NOT_A_TENSOR_, KD_OPS_NOT_A_TENSOR_)

struct QuantizeArgs {
  Tensor input;
  Tensor output;
  Tensor scales;
  Tensor output_t;    // dual pass only
  Tensor scales_t;    // dual pass only
  Tensor group_ends;  // jagged only
  QuantGranularity granularity = QuantGranularity::kInvalid;
  bool transpose_output = false;
  ScaleFormat scale_format = ScaleFormat::kFp32;
  ScaleLayout scale_layout = ScaleLayout::kRowMajor;
  float eps = kDefaultQuantEps;
  MxRounding mx_rounding = MxRounding::kFloor;
};

template <>
struct OpTraits<QuantizeArgs> {
  using Args = QuantizeArgs;
  static constexpr absl::string_view kName = "quantize";
  static constexpr OpTensorField<Args> kTensors[] = {KD_OPS_TENSORS(quantize)};
  static constexpr Tensor Args::*kDTypeFrom = &Args::input;
  static constexpr Tensor Args::*kDTypeTo = &Args::output;
  static absl::Status Validate(const QuantizeArgs& args);
  static std::string VariantLabel(const QuantizeArgs& args);
  static uint32_t VariantKey(const QuantizeArgs& args);
};

struct GemmArgs {
  GemmVariant variant = GemmVariant::kInvalid;
  Tensor a, a_scales, b, b_scales, d;
  Tensor group_ends;
  bool accumulate = false;
  // The kernel config to run with, resolved once from the daemon's tune cache (gemm_config.h);
  // std::monostate, or another backend's config, runs the backend's heuristic default. Never set
  // from a request. The result does not depend on it.
  GemmKernelConfig config;
};

template <>
struct OpTraits<GemmArgs> {
  using Args = GemmArgs;
  static constexpr absl::string_view kName = "gemm";
  static constexpr OpTensorField<Args> kTensors[] = {KD_OPS_TENSORS(gemm)};
  static constexpr Tensor Args::*kDTypeFrom = &Args::a;
  static constexpr Tensor Args::*kDTypeTo = &Args::d;
  static absl::Status Validate(const GemmArgs& args);
  static std::string VariantLabel(const GemmArgs& args);
  static uint32_t VariantKey(const GemmArgs& args);
};

struct PadArgs {
  Tensor input;
  Tensor group_ends;
  Tensor output;
  Tensor padded_group_ends;
  int32_t alignment = 0;
};

template <>
struct OpTraits<PadArgs> {
  using Args = PadArgs;
  static constexpr absl::string_view kName = "pad";
  static constexpr OpTensorField<Args> kTensors[] = {KD_OPS_TENSORS(pad)};
  static constexpr Tensor Args::*kDTypeFrom = &Args::input;
  static constexpr Tensor Args::*kDTypeTo = nullptr;
  static absl::Status Validate(const PadArgs& args);
  static std::string VariantLabel(const PadArgs& args);
  static uint32_t VariantKey(const PadArgs& args);
};

struct UnpadArgs {
  Tensor input;
  Tensor group_ends;
  Tensor output;
  int32_t alignment = 0;
};

template <>
struct OpTraits<UnpadArgs> {
  using Args = UnpadArgs;
  static constexpr absl::string_view kName = "unpad";
  static constexpr OpTensorField<Args> kTensors[] = {KD_OPS_TENSORS(unpad)};
  static constexpr Tensor Args::*kDTypeFrom = &Args::input;
  static constexpr Tensor Args::*kDTypeTo = nullptr;
  static absl::Status Validate(const UnpadArgs& args);
  static std::string VariantLabel(const UnpadArgs& args);
  static uint32_t VariantKey(const UnpadArgs& args);
};

// The largest magnitude of each row (kerneld.proto's RowAmaxOp).
struct RowAmaxArgs {
  Tensor input;
  Tensor output;
};

template <>
struct OpTraits<RowAmaxArgs> {
  using Args = RowAmaxArgs;
  static constexpr absl::string_view kName = "row_amax";
  static constexpr OpTensorField<Args> kTensors[] = {KD_OPS_TENSORS(row_amax)};
  static constexpr Tensor Args::*kDTypeFrom = &Args::input;
  static constexpr Tensor Args::*kDTypeTo = nullptr;
  static absl::Status Validate(const RowAmaxArgs& args);
  static std::string VariantLabel(const RowAmaxArgs& args) { return "rows"; }
  static uint32_t VariantKey(const RowAmaxArgs& args) { return 0; }
};

namespace internal {
// std::variant of the types before the trailing `void` (the X-macro expansion below ends its
// list with one).
template <typename List, typename... Ts>
struct VariantOf;
template <typename... Done>
struct VariantOf<std::tuple<Done...>, void> {
  using type = std::variant<Done...>;
};
template <typename... Done, typename T, typename... Rest>
struct VariantOf<std::tuple<Done...>, T, Rest...> {
  using type = typename VariantOf<std::tuple<Done..., T>, Rest...>::type;
};
}  // namespace internal

// Every op, one alternative per entry of KD_OPS, in its order: alternative i is the op numbered
// i + 1. Its index is the op's number in metrics keys (OpLabelKey).
#define KD_OPS_ARGS_(name, Name, UPPER, number) Name##Args,
using Op = internal::VariantOf<std::tuple<>, KD_OPS(KD_OPS_ARGS_) void>::type;
#undef KD_OPS_ARGS_
inline constexpr size_t kOpCount = std::variant_size_v<Op>;
#define KD_OPS_CHECK_ORDER_(name, Name, UPPER, number)                                  \
  static_assert(std::is_same_v<std::variant_alternative_t<number - 1, Op>, Name##Args>, \
                #Name " is op number " #number " of kerneld/op_table.h");               \
  static_assert(OpTraits<Name##Args>::kName == absl::string_view(#name));
KD_OPS(KD_OPS_CHECK_ORDER_)
#undef KD_OPS_CHECK_ORDER_

// OpTraits<Args>::kName of the op held: "quantize", "gemm", "pad", "unpad".
absl::string_view OpName(const Op& op);
// The variant label used in metrics ("1x128", "nt", "a16"...), bounded.
std::string OpVariantLabel(const Op& op);
// The dtype label used in metrics (the input's dtype to the output's: "bf16>e4m3fn").
std::string OpDTypeLabel(const Op& op);
// A bounded size class for metrics: "xs" (< 2^16 elements in the largest tensor), "s" (< 2^20),
// "m" (< 2^24), "l" (< 2^27), "xl".
absl::string_view OpShapeClass(const Op& op);
// The inputs of the three labels above and of OpName packed into one number: two ops have the
// same key exactly when their four labels are the same. For caching a metric series per op
// without building its label strings on every request. It mirrors OpName, OpVariantLabel,
// OpDTypeLabel and OpShapeClass: change it with them (op_labels_test checks the pairing).
uint64_t OpLabelKey(const Op& op);

// The present tensors of an op with their field names, in OpTraits<Args>::kTensors order, for
// device checks and bookkeeping. An op has at most six tensors, so the list never allocates.
struct NamedTensor {
  absl::string_view field;
  const Tensor* tensor;
  bool output = false;  // the op writes it
};
using NamedTensors = absl::InlinedVector<NamedTensor, 6>;
NamedTensors OpTensors(const Op& op);

class ValidatedOp;

// Checks the op against its contract (OpTraits<Args>::Validate: dtypes, shapes, block
// divisibility, enum values), then that every tensor of the op lives on one device and that no
// output overlaps another tensor of the op. INVALID_ARGUMENT (FAILED_PRECONDITION for mixed
// devices) with a message naming the field; else the op, as a ValidatedOp.
absl::StatusOr<ValidatedOp> Validate(Op&& op);
absl::StatusOr<ValidatedOp> Validate(const Op& op);  // validates a copy

// An op that passed Validate. Only Validate makes one, so a backend that is handed a ValidatedOp
// runs it without checking its shapes again (it still checks what only it can: data it reads on
// the device, such as group ends). Its tensors cannot change after validation.
class ValidatedOp {
 public:
  const Op& op() const { return op_; }
  template <typename Args>
  const Args* get_if() const {
    return std::get_if<Args>(&op_);
  }
  // The config a GEMM runs with (GemmArgs::config): chosen after validation, by the daemon's
  // tune cache, and not part of it (the result does not depend on it). nullptr for other ops.
  decltype(GemmArgs::config)* mutable_gemm_config() {
    GemmArgs* gemm = std::get_if<GemmArgs>(&op_);
    return gemm == nullptr ? nullptr : &gemm->config;
  }

  // Only Validate can make a Key, so only Validate makes a ValidatedOp (the constructor is public
  // so that Validate can build one inside its StatusOr).
  class Key {
    friend absl::StatusOr<ValidatedOp> Validate(Op&& op);
    Key() {}  // user-provided: no aggregate initialisation around it
  };
  ValidatedOp(Key, Op&& op) : op_(std::move(op)) {}

 private:
  Op op_;
};

// Group offsets (end of each group, in rows) read from `ends` (i32 or i64, on the host) are
// checked: monotone non-decreasing, non-negative, last equal to `total_rows`. INVALID_ARGUMENT
// naming `field` otherwise. Backends that can read the offsets on the host call this before use.
absl::Status CheckGroupEnds(const int64_t* ends, int64_t groups, int64_t total_rows,
                            absl::string_view field);

}  // namespace kd

#endif  // KERNELD_KERNELS_OPS_H_
