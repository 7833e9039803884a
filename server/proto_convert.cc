#include "server/proto_convert.h"

#include <string>
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

// One binding per op message: its enums range-checked, its scalars converted, its tensors bound
// under the field names of the op's OpTraits.
#define KD_BIND(dst, msg, name) \
  KD_ASSIGN_OR_RETURN(dst, b.Bind(msg.name(), msg.has_##name(), #name))

absl::StatusOr<Op> BindMessage(OpBinder& b, const v1::QuantizeOp& p) {
  QuantizeArgs a;
  KD_RETURN_IF_ERROR(CheckEnum(p.granularity(), v1::QuantGranularity_MAX, "granularity"));
  KD_RETURN_IF_ERROR(CheckEnum(p.scale_format(), v1::ScaleFormat_MAX, "scale_format"));
  KD_RETURN_IF_ERROR(CheckEnum(p.scale_layout(), v1::ScaleLayout_MAX, "scale_layout"));
  KD_RETURN_IF_ERROR(CheckEnum(p.mx_rounding(), v1::MxRounding_MAX, "mx_rounding"));
  a.granularity = static_cast<QuantGranularity>(p.granularity());
  a.transpose_output = p.transpose_output();
  a.scale_format = p.scale_format() == v1::SCALE_POW2 ? ScaleFormat::kPow2 : ScaleFormat::kFp32;
  a.scale_layout = p.scale_layout() == v1::SCALE_LAYOUT_K_BLOCK_MAJOR ? ScaleLayout::kKBlockMajor
                                                                      : ScaleLayout::kRowMajor;
  a.mx_rounding =
      p.mx_rounding() == v1::MX_ROUNDING_RCEIL ? MxRounding::kRceil : MxRounding::kFloor;
  a.eps = p.eps() == 0.0f ? kDefaultQuantEps : p.eps();
  KD_BIND(a.input, p, input);
  KD_BIND(a.output, p, output);
  KD_BIND(a.scales, p, scales);
  KD_BIND(a.output_t, p, output_t);
  KD_BIND(a.scales_t, p, scales_t);
  KD_BIND(a.group_ends, p, group_ends);
  return Op(a);
}

absl::StatusOr<Op> BindMessage(OpBinder& b, const v1::GemmOp& p) {
  GemmArgs a;
  KD_RETURN_IF_ERROR(CheckEnum(p.variant(), v1::GemmVariant_MAX, "variant"));
  a.variant = static_cast<GemmVariant>(p.variant());
  a.accumulate = p.accumulate();
  KD_BIND(a.a, p, a);
  KD_BIND(a.a_scales, p, a_scales);
  KD_BIND(a.b, p, b);
  KD_BIND(a.b_scales, p, b_scales);
  KD_BIND(a.d, p, d);
  KD_BIND(a.group_ends, p, group_ends);
  return Op(a);
}

absl::StatusOr<Op> BindMessage(OpBinder& b, const v1::PadOp& p) {
  PadArgs a;
  a.alignment = p.alignment();
  KD_BIND(a.input, p, input);
  KD_BIND(a.group_ends, p, group_ends);
  KD_BIND(a.output, p, output);
  KD_BIND(a.padded_group_ends, p, padded_group_ends);
  return Op(a);
}

absl::StatusOr<Op> BindMessage(OpBinder& b, const v1::UnpadOp& p) {
  UnpadArgs a;
  a.alignment = p.alignment();
  KD_BIND(a.input, p, input);
  KD_BIND(a.group_ends, p, group_ends);
  KD_BIND(a.output, p, output);
  return Op(a);
}

#undef KD_BIND

}  // namespace

template <typename OpMessage>
absl::StatusOr<Op> OpBinder::BindOp(const OpMessage& op) {
  return BindMessage(*this, op);
}
template absl::StatusOr<Op> OpBinder::BindOp(const v1::QuantizeOp&);
template absl::StatusOr<Op> OpBinder::BindOp(const v1::GemmOp&);
template absl::StatusOr<Op> OpBinder::BindOp(const v1::PadOp&);
template absl::StatusOr<Op> OpBinder::BindOp(const v1::UnpadOp&);

// One case per op of kd::Op (and per case of kerneld.v1.Op's `kind`; proto_convert_test checks
// that the two lists and their tensor fields agree).
static_assert(kOpCount == 4, "a new op needs its BindMessage, its instantiation and its case here");

absl::StatusOr<Op> OpBinder::Any(const v1::Op& op) {
  switch (op.kind_case()) {
    case v1::Op::kQuantize:
      return BindOp(op.quantize());
    case v1::Op::kGemm:
      return BindOp(op.gemm());
    case v1::Op::kPad:
      return BindOp(op.pad());
    case v1::Op::kUnpad:
      return BindOp(op.unpad());
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
