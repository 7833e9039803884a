#include "server/proto_convert.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "kerneld/kernels/status_macros.h"

namespace kd {
namespace {

template <typename... Parts>
absl::Status Invalid(Parts&&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(std::forward<Parts>(parts)...));
}

// Proto3 enums are open: an unknown number arrives as-is and must be rejected by range. The
// field's name is `field` followed by `suffix`, joined only for the error (no string is built on
// the request path).
absl::Status CheckEnum(int value, int max, absl::string_view field, absl::string_view suffix = "") {
  if (value < 0 || value > max) return Invalid(field, suffix, "=", value, " is not a known value");
  return absl::OkStatus();
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::StatusOr<Tensor> OpBinder::Bind(const v1::TensorRef& ref, bool present,
                                      absl::string_view field) {
  if (!present) return Tensor();
  TensorDesc desc;
  desc.present = true;
  KD_RETURN_IF_ERROR(CheckEnum(ref.dtype(), v1::DType_MAX, field, ".dtype"));
  desc.dtype = static_cast<DType>(ref.dtype());
  if (ref.shape_size() < 1 || ref.shape_size() > kMaxRank) {
    return Invalid(field, ".shape has rank ", ref.shape_size(), "; must be 1..", kMaxRank);
  }
  desc.rank = ref.shape_size();
  for (int i = 0; i < desc.rank; ++i) desc.shape[i] = ref.shape(i);
  if (ref.strides_size() != 0) {
    if (ref.strides_size() != desc.rank) {
      return Invalid(field, ".strides has ", ref.strides_size(), " entries; must be 0 or ",
                     desc.rank, " (one per dimension)");
    }
    desc.strides_given = true;
    for (int i = 0; i < desc.rank; ++i) desc.strides[i] = ref.strides(i);
  }
  desc.buffer_id = ref.buffer_id();
  desc.byte_offset = ref.byte_offset();
  absl::StatusOr<BufferEntry> entry = session_.Find(ref.buffer_id());
  if (!entry.ok()) return PrefixStatus(absl::StrCat(field, "."), entry.status());
  const Region& region = *entry->region;
  KD_ASSIGN_OR_RETURN(Tensor t,
                      BindTensor(desc, region.data(), region.size(), region.loc(), field));
  if (backend_ == nullptr) {
    backend_ = entry->backend;
    device_ = region.loc().device;
    first_field_ = std::string(field);
  } else if (backend_ != entry->backend || device_ != region.loc().device) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, " is on ", entry->backend->name(), ":", region.loc().device, " but ",
                     first_field_, " is on ", backend_->name(), ":", device_,
                     "; every tensor of a request must be on one device"));
  }
  // An op has at most six tensors: one allocation for the usual request.
  if (regions_.empty()) regions_.reserve(6);
  regions_.push_back(std::move(entry->region));
  return t;
}

namespace {

// The wire enums are the table's (kerneld/op_table.h), value for value: kerneld.proto's
// constants and the kernels' enumerators are checked against it here, at compile time
// (proto_convert_test checks that the proto has no value the table lacks).
template <typename E, size_t N>
constexpr int MaxOf(const E (&values)[N]) {
  int max = 0;
  for (const E v : values) max = static_cast<int>(v) > max ? static_cast<int>(v) : max;
  return max;
}
#define KD_WIRE_CHECK_(proto_value, cpp_enum, value)                         \
  static_assert(proto_value == value && static_cast<int>(cpp_enum) == value, \
                #proto_value " and " #cpp_enum " have the value of kerneld/op_table.h");
#define KD_X_(suffix, cpp, value, ...) KD_WIRE_CHECK_(v1::DTYPE_##suffix, DType::cpp, value)
KD_ENUM_VALUES_DType(KD_X_)
#undef KD_X_
#define KD_X_(suffix, cpp, value, ...) \
  KD_WIRE_CHECK_(v1::QUANT_##suffix, QuantGranularity::cpp, value)
    KD_ENUM_VALUES_QuantGranularity(KD_X_)
#undef KD_X_
#define KD_X_(suffix, cpp, value, ...) KD_WIRE_CHECK_(v1::SCALE_##suffix, ScaleFormat::cpp, value)
        KD_ENUM_VALUES_ScaleFormat(KD_X_)
#undef KD_X_
#define KD_X_(suffix, cpp, value, ...) \
  KD_WIRE_CHECK_(v1::SCALE_LAYOUT_##suffix, ScaleLayout::cpp, value)
            KD_ENUM_VALUES_ScaleLayout(KD_X_)
#undef KD_X_
#define KD_X_(suffix, cpp, value, ...) \
  KD_WIRE_CHECK_(v1::MX_ROUNDING_##suffix, MxRounding::cpp, value)
                KD_ENUM_VALUES_MxRounding(KD_X_)
#undef KD_X_
#define KD_X_(suffix, cpp, value, ...) KD_WIRE_CHECK_(v1::GEMM_##suffix, GemmVariant::cpp, value)
                    KD_ENUM_VALUES_GemmVariant(KD_X_)
#undef KD_X_
#define KD_X_(suffix, cpp, value, ...) static_assert(v1::Completion::suffix == value);
                        KD_ENUM_VALUES_CompletionMode(KD_X_)
#undef KD_X_
#define KD_X_(suffix, cpp, value, ...) static_assert(v1::IpcMemHandle::suffix == value);
                            KD_ENUM_VALUES_IpcKind(KD_X_)
#undef KD_X_
#undef KD_WIRE_CHECK_
#define KD_X_(suffix, cpp, value, ...) DType::cpp,
                                constexpr DType kDTypes[] = {KD_ENUM_VALUES_DType(KD_X_)};
#undef KD_X_
static_assert(MaxOf(kDTypes) == v1::DType_MAX, "kerneld.proto's DType has a value the table lacks");
#define KD_X_(name, Name, UPPER, number)                                    \
  static_assert(v1::Op::k##Name == number, "Op." #name " is field " #number \
                                           " of "                           \
                                           "kerneld.proto's Op.kind (kerneld/op_table.h)");
KD_OPS(KD_X_)
#undef KD_X_

// A wire enum value into the op's field: range-checked (proto3 enums are open, so an unknown
// number arrives as it was sent), and 0 (unspecified) leaves the op's default.
template <typename Enum>
absl::Status AssignEnum(int wire, int max, absl::string_view field, Enum* out) {
  KD_RETURN_IF_ERROR(CheckEnum(wire, max, field));
  if (wire != 0) *out = static_cast<Enum>(wire);
  return absl::OkStatus();
}

absl::Status AssignTensor(absl::StatusOr<Tensor> bound, Tensor* out) {
  if (!bound.ok()) return bound.status();
  *out = *std::move(bound);
  return absl::OkStatus();
}

// One binding per op message, generated from its row of the table (KD_OP_FIELDS_<name>): its
// tensors bound under their field names, its enums range-checked, its scalars copied; a zero
// enum or float leaves the args' default. A field the message or the args struct lacks does not
// compile.
#define KD_BIND_TENSOR_(field, dir, req) \
  KD_RETURN_IF_ERROR(AssignTensor(b.Bind(p.field(), p.has_##field(), #field), &a.field));
#define KD_BIND_ENUM_(field, Enum) \
  KD_RETURN_IF_ERROR(AssignEnum(p.field(), v1::Enum##_MAX, #field, &a.field));
#define KD_BIND_FLAG_(field) a.field = p.field();
#define KD_BIND_INT_(field) a.field = p.field();
#define KD_BIND_FLOAT_(field) \
  if (p.field() != 0.0f) a.field = p.field();
#define KD_X_(name, Name, UPPER, number)                                             \
  absl::StatusOr<Op> BindMessage(OpBinder& b, const v1::Name##Op& p) {               \
    Name##Args a;                                                                    \
    KD_OP_FIELDS_##name(KD_BIND_TENSOR_, KD_BIND_ENUM_, KD_BIND_FLAG_, KD_BIND_INT_, \
                        KD_BIND_FLOAT_) return Op(std::move(a));                     \
  }
KD_OPS(KD_X_)
#undef KD_X_
#undef KD_BIND_TENSOR_
#undef KD_BIND_ENUM_
#undef KD_BIND_FLAG_
#undef KD_BIND_INT_
#undef KD_BIND_FLOAT_

}  // namespace

template <typename OpMessage>
absl::StatusOr<Op> OpBinder::BindOp(const OpMessage& op) {
  return BindMessage(*this, op);
}
#define KD_X_(name, Name, UPPER, number) \
  template absl::StatusOr<Op> OpBinder::BindOp(const v1::Name##Op&);
KD_OPS(KD_X_)
#undef KD_X_

absl::StatusOr<Op> OpBinder::Any(const v1::Op& op) {
  switch (op.kind_case()) {
#define KD_X_(name, Name, UPPER, number) \
  case v1::Op::k##Name:                  \
    return BindOp(op.name());
    KD_OPS(KD_X_)
#undef KD_X_
    case v1::Op::KIND_NOT_SET:
      break;
  }
  static const std::string* const kCases = [] {
    const google::protobuf::OneofDescriptor* kind = v1::Op::descriptor()->FindOneofByName("kind");
    std::vector<std::string> names;
    for (int i = 0; i < kind->field_count(); ++i) names.push_back(kind->field(i)->name());
    return new std::string(absl::StrJoin(names, ", "));
  }();
  return Invalid("kind is not set (one of ", *kCases, ")");
}

}  // namespace kd
