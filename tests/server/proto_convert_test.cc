// The kernel layer's op list and the wire contract agree: kerneld.v1.Op's `kind` has one case per
// op of kd::Op, in the same order and named as OpTraits<Args>::kName, and each op's message has a
// TensorRef field for every tensor in OpTraits<Args>::kTensors, under the same name, and no other.
// A new op that is in one list and not the other fails here.
#include "server/proto_convert.h"

#include <set>
#include <string>
#include <utility>
#include <variant>

#include "gtest/gtest.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kd {
namespace {

namespace pb = ::google::protobuf;

template <typename Args>
void ExpectOpMatches(const pb::FieldDescriptor* kind_case) {
  ASSERT_NE(kind_case, nullptr);
  EXPECT_EQ(kind_case->name(), std::string(OpTraits<Args>::kName));
  const pb::Descriptor* message = kind_case->message_type();
  ASSERT_NE(message, nullptr) << kind_case->full_name();
  std::set<std::string> proto_tensors, op_tensors;
  for (int i = 0; i < message->field_count(); ++i) {
    if (message->field(i)->message_type() == v1::TensorRef::descriptor()) {
      proto_tensors.insert(message->field(i)->name());
    }
  }
  for (const auto& field : OpTraits<Args>::kTensors) op_tensors.emplace(field.name);
  EXPECT_EQ(proto_tensors, op_tensors) << message->full_name();
}

template <size_t... I>
void ExpectEveryOpMatches(const pb::OneofDescriptor* kind, std::index_sequence<I...>) {
  (ExpectOpMatches<std::variant_alternative_t<I, Op>>(kind->field(static_cast<int>(I))), ...);
}

TEST(ProtoConvertTest, EveryOpHasItsCaseAndItsTensorsOnTheWire) {
  const pb::OneofDescriptor* kind = v1::Op::descriptor()->FindOneofByName("kind");
  ASSERT_NE(kind, nullptr);
  ASSERT_EQ(static_cast<size_t>(kind->field_count()), kOpCount);
  ExpectEveryOpMatches(kind, std::make_index_sequence<kOpCount>());
}

}  // namespace
}  // namespace kd
