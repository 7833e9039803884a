// The wire contract is the op table's (kerneld/op_table.h), and so is the kernel layer's op list:
// each enum of KD_ENUMS has exactly the table's values in kerneld.proto, under its names; each op
// message has exactly the table's fields, in its order, of the kinds it says; kerneld.v1.Op's
// `kind` has one case per op of kd::Op, in the same order and named as OpTraits<Args>::kName, and
// each op's message has a TensorRef field for every tensor in OpTraits<Args>::kTensors. An op, an
// enum value or a field in one place and not the other fails here (server/proto_convert.cc holds
// the other direction at compile time).
#include "server/proto_convert.h"

#include <algorithm>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/op_table.h"
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

struct WireValue {
  std::string name;
  int number;
  bool operator==(const WireValue& o) const { return name == o.name && number == o.number; }
};

std::ostream& operator<<(std::ostream& os, const WireValue& v) {
  return os << v.name << "=" << v.number;
}

TEST(ProtoConvertTest, EveryWireEnumHasExactlyTheTablesValues) {
  struct Row {
    const char* proto_enum;
    const char* proto_prefix;
    std::vector<WireValue> values;
  };
  std::vector<Row> rows;
#define KD_VALUE_(suffix, cpp, value, ...) rows.back().values.push_back({#suffix, value});
#define KD_X_(Enum, c_prefix, proto_enum, proto_prefix) \
  rows.push_back({proto_enum, proto_prefix, {}});       \
  KD_ENUM_VALUES_##Enum(KD_VALUE_)
  KD_ENUMS(KD_X_)
#undef KD_X_
#undef KD_VALUE_
  for (const Row& row : rows) {
    SCOPED_TRACE(row.proto_enum);
    const pb::EnumDescriptor* e =
        pb::DescriptorPool::generated_pool()->FindEnumTypeByName(row.proto_enum);
    ASSERT_NE(e, nullptr);
    std::vector<WireValue> proto, table;
    for (int i = 0; i < e->value_count(); ++i) {
      if (e->value(i)->number() == 0) continue;  // unspecified, in every enum
      proto.push_back({e->value(i)->name(), e->value(i)->number()});
    }
    for (const WireValue& v : row.values) table.push_back({row.proto_prefix + v.name, v.number});
    EXPECT_EQ(proto, table);
  }
}

// Each op message's fields, by field number, are the table's row: same names, same order, same
// kinds (TensorRef for a tensor, the table's enum for an enum, bool, int32, float).
TEST(ProtoConvertTest, EveryOpMessageHasExactlyTheTablesFieldsInOrder) {
  struct Field {
    std::string name;
    std::string type;
    bool operator==(const Field& o) const { return name == o.name && type == o.type; }
  };
  struct OpRow {
    std::string message;
    std::vector<Field> fields;
  };
  std::vector<OpRow> ops;
#define KD_T_(field, dir, req) ops.back().fields.push_back({#field, "kerneld.v1.TensorRef"});
#define KD_E_(field, Enum) ops.back().fields.push_back({#field, "kerneld.v1." #Enum});
#define KD_B_(field) ops.back().fields.push_back({#field, "bool"});
#define KD_I_(field) ops.back().fields.push_back({#field, "int32"});
#define KD_F_(field) ops.back().fields.push_back({#field, "float"});
#define KD_X_(name, Name, UPPER, number)         \
  ops.push_back({"kerneld.v1." #Name "Op", {}}); \
  KD_OP_FIELDS_##name(KD_T_, KD_E_, KD_B_, KD_I_, KD_F_)
  KD_OPS(KD_X_)
#undef KD_X_
#undef KD_T_
#undef KD_E_
#undef KD_B_
#undef KD_I_
#undef KD_F_
  for (const OpRow& op : ops) {
    SCOPED_TRACE(op.message);
    const pb::Descriptor* m =
        pb::DescriptorPool::generated_pool()->FindMessageTypeByName(op.message);
    ASSERT_NE(m, nullptr);
    std::vector<const pb::FieldDescriptor*> by_number;
    for (int i = 0; i < m->field_count(); ++i) by_number.push_back(m->field(i));
    std::sort(by_number.begin(), by_number.end(),
              [](const auto* a, const auto* b) { return a->number() < b->number(); });
    std::vector<Field> proto;
    for (const pb::FieldDescriptor* f : by_number) {
      std::string type = f->type_name();
      if (f->message_type() != nullptr) type = f->message_type()->full_name();
      if (f->enum_type() != nullptr) type = f->enum_type()->full_name();
      proto.push_back({f->name(), type});
    }
    ASSERT_EQ(proto.size(), op.fields.size());
    for (size_t i = 0; i < proto.size(); ++i) {
      EXPECT_EQ(proto[i].name, op.fields[i].name) << "field " << i;
      EXPECT_EQ(proto[i].type, op.fields[i].type) << op.fields[i].name;
    }
  }
}

}  // namespace
}  // namespace kd
