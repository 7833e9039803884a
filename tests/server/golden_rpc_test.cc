// Every PyTorch golden quantization case (tests/data/golden) through the daemon's wire path: the
// input in a registered shm buffer, the op as a QuantizeOp message over the Unix socket, the
// outputs compared byte for byte with what PyTorch computed. Once per case with Quantize, and once
// with all cases in one Submit batch.
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/kernels/golden_manifest.h"
#include "tests/support/test_daemon.h"

namespace kd {
namespace testing {
namespace {

using testing_json::Value;

using golden::Manifest;
using golden::ReadFile;

v1::DType WireDType(const std::string& name) {
  static const std::map<std::string, v1::DType> kNames = {
      {"f32", v1::DTYPE_F32},   {"bf16", v1::DTYPE_BF16},     {"f16", v1::DTYPE_F16},
      {"u8", v1::DTYPE_U8},     {"e4m3fn", v1::DTYPE_E4M3FN}, {"e4m3fnuz", v1::DTYPE_E4M3FNUZ},
      {"e5m2", v1::DTYPE_E5M2}, {"i64", v1::DTYPE_I64}};
  auto it = kNames.find(name);
  return it == kNames.end() ? v1::DTYPE_UNSPECIFIED : it->second;
}

v1::QuantGranularity WireGranularity(const std::string& name) {
  static const std::map<std::string, v1::QuantGranularity> kNames = {
      {"1x128", v1::QUANT_1X128},
      {"128x1", v1::QUANT_128X1},
      {"128x128", v1::QUANT_128X128},
      {"per_row", v1::QUANT_PER_ROW},
      {"per_tensor", v1::QUANT_PER_TENSOR},
      {"mx1x32", v1::QUANT_MX_1X32},
      {"jagged_rowwise", v1::QUANT_JAGGED_ROWWISE},
      {"jagged_colwise", v1::QUANT_JAGGED_COLWISE}};
  auto it = kNames.find(name);
  return it == kNames.end() ? v1::QUANT_GRANULARITY_UNSPECIFIED : it->second;
}

int64_t Bytes(const Value& desc, v1::DType dtype) {
  static const std::map<v1::DType, int64_t> kSize = {
      {v1::DTYPE_F32, 4}, {v1::DTYPE_BF16, 2}, {v1::DTYPE_F16, 2}, {v1::DTYPE_I64, 8}};
  int64_t n = kSize.count(dtype) ? kSize.at(dtype) : 1;
  for (int64_t d : desc["shape"].AsInts()) n *= d;
  return n;
}

// One case laid out in one shm buffer: input, group ends, then each output, 256-byte aligned.
struct LaidOutCase {
  v1::QuantizeOp op;
  std::map<std::string, std::pair<uint64_t, int64_t>> outputs;  // name -> (offset, bytes)
};

class GoldenRpcTest : public ::testing::Test {
 protected:
  static constexpr size_t kBufferBytes = 4 << 20;

  LaidOutCase LayOut(const Value& c) {
    LaidOutCase out;
    uint64_t offset = 0;
    auto place = [&](int64_t bytes) {
      const uint64_t at = offset;
      offset = (offset + bytes + 255) / 256 * 256;
      EXPECT_LE(offset, kBufferBytes);
      return at;
    };
    auto ref = [&](uint64_t at, v1::DType dtype, const std::vector<int64_t>& shape) {
      v1::TensorRef r;
      r.set_buffer_id(buffer_id_);
      r.set_byte_offset(at);
      r.set_dtype(dtype);
      for (int64_t d : shape) r.add_shape(d);
      return r;
    };
    const Value& in = Manifest()["inputs"][c["input"].string];
    const v1::DType in_dtype = WireDType(in["dtype"].string);
    const std::string in_bytes = ReadFile(in["file"].string);
    const uint64_t in_at = place(in_bytes.size());
    std::memcpy(shm_.as<char>() + in_at, in_bytes.data(), in_bytes.size());
    *out.op.mutable_input() = ref(in_at, in_dtype, in["shape"].AsInts());
    out.op.set_granularity(WireGranularity(c["granularity"].string));
    out.op.set_transpose_output(c["transpose"].boolean);
    out.op.set_scale_format(c["pow2"].boolean ? v1::SCALE_POW2 : v1::SCALE_FP32);
    out.op.set_scale_layout(c["scale_layout"].string == "k_block_major"
                                ? v1::SCALE_LAYOUT_K_BLOCK_MAJOR
                                : v1::SCALE_LAYOUT_ROW_MAJOR);
    out.op.set_mx_rounding(c["mx_rounding"].string == "rceil" ? v1::MX_ROUNDING_RCEIL
                                                              : v1::MX_ROUNDING_FLOOR);
    out.op.set_eps(static_cast<float>(c["eps"].number));
    if (c.Has("group_ends")) {
      const std::vector<int64_t> e = c["group_ends"].AsInts();
      const uint64_t at = place(e.size() * sizeof(int64_t));
      std::memcpy(shm_.as<char>() + at, e.data(), e.size() * sizeof(int64_t));
      *out.op.mutable_group_ends() = ref(at, v1::DTYPE_I64, {static_cast<int64_t>(e.size())});
    }
    for (const auto& [name, desc] : c["outputs"].object) {
      v1::DType dtype = WireDType(desc["dtype"].string);
      if (name.rfind("output", 0) == 0) dtype = WireDType(c["out_dtype"].string);
      const int64_t bytes = Bytes(desc, dtype);
      const uint64_t at = place(bytes);
      std::memset(shm_.as<char>() + at, 0xA5, bytes);  // poison: every byte must be written
      const v1::TensorRef r = ref(at, dtype, desc["shape"].AsInts());
      if (name == "output")
        *out.op.mutable_output() = r;
      else if (name == "scales")
        *out.op.mutable_scales() = r;
      else if (name == "output_t")
        *out.op.mutable_output_t() = r;
      else if (name == "scales_t")
        *out.op.mutable_scales_t() = r;
      out.outputs[name] = {at, bytes};
    }
    return out;
  }

  void ExpectGolden(const Value& c, const LaidOutCase& laid, const char* shm_base) {
    for (const auto& [name, desc] : c["outputs"].object) {
      const std::string expected = ReadFile(desc["file"].string);
      const auto [at, bytes] = laid.outputs.at(name);
      ASSERT_EQ(static_cast<int64_t>(expected.size()), bytes) << c["name"].string << " " << name;
      EXPECT_EQ(std::memcmp(shm_base + at, expected.data(), bytes), 0)
          << c["name"].string << " " << name << " differs from PyTorch";
    }
  }

  void SetUp() override {
    ASSERT_EQ(Manifest().kind, Value::kObject);
    session_ = daemon_.Open("golden");
    buffer_id_ = daemon_.Register(session_, shm_);
  }

  TestDaemon daemon_;
  ShmObject shm_{kBufferBytes};
  OpenSession session_;
  uint64_t buffer_id_ = 0;
};

TEST_F(GoldenRpcTest, EveryCaseOverQuantizeMatchesPyTorch) {
  size_t n = 0;
  for (const Value& c : Manifest()["cases"].array) {
    const LaidOutCase laid = LayOut(c);
    grpc::ClientContext ctx;
    v1::QuantizeRequest req;
    req.set_session_id(session_.id);
    *req.mutable_op() = laid.op;
    v1::OpResponse resp;
    const grpc::Status s = daemon_.data().Quantize(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << c["name"].string << ": " << s.error_message();
    ExpectGolden(c, laid, shm_.as<char>());
    ++n;
  }
  EXPECT_GE(n, 20u);
}

TEST_F(GoldenRpcTest, EveryCaseInOneSubmitMatchesPyTorch) {
  // Each case gets its own buffer so that all of them can be in flight in one batch.
  std::vector<std::unique_ptr<ShmObject>> buffers;
  std::vector<LaidOutCase> laid;
  v1::SubmitRequest req;
  req.set_session_id(session_.id);
  for (const Value& c : Manifest()["cases"].array) {
    laid.push_back(LayOut(c));
    buffers.push_back(std::make_unique<ShmObject>(kBufferBytes));
    std::memcpy(buffers.back()->as<char>(), shm_.as<char>(), kBufferBytes);
    const uint64_t id = daemon_.Register(session_, *buffers.back());
    v1::QuantizeOp op = laid.back().op;
    for (v1::TensorRef* r : {op.mutable_input(), op.mutable_output(), op.mutable_scales()})
      r->set_buffer_id(id);
    if (op.has_output_t()) op.mutable_output_t()->set_buffer_id(id);
    if (op.has_scales_t()) op.mutable_scales_t()->set_buffer_id(id);
    if (op.has_group_ends()) op.mutable_group_ends()->set_buffer_id(id);
    *req.add_ops()->mutable_quantize() = op;
  }
  grpc::ClientContext ctx;
  v1::SubmitResponse resp;
  const grpc::Status s = daemon_.data().Submit(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  for (size_t i = 0; i < laid.size(); ++i) {
    ExpectGolden(Manifest()["cases"][i], laid[i], buffers[i]->as<char>());
  }
}

}  // namespace
}  // namespace testing
}  // namespace kd
