// Every validation rule of the data plane, one test each, against a real daemon over its Unix
// socket: the exact status code, a message naming the field and the rule, and the daemon still
// serving afterwards.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/test_daemon.h"

namespace kd {
namespace testing {
namespace {

constexpr size_t kBufferBytes = 1 << 20;
constexpr uint64_t kIn = 0, kOut = 256 << 10, kScales = 512 << 10, kExtra = 768 << 10;

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    session_ = daemon_.Open("validation");
    buf_ = daemon_.Register(session_, shm_);
  }

  // A valid 1x128 quantization of a (4, 256) bf16 matrix.
  v1::QuantizeRequest GoodQuantize() {
    v1::QuantizeRequest r;
    r.set_session_id(session_.id);
    v1::QuantizeOp* op = r.mutable_op();
    *op->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {4, 256}, kIn);
    *op->mutable_output() = Ref(buf_, v1::DTYPE_E4M3FN, {4, 256}, kOut);
    *op->mutable_scales() = Ref(buf_, v1::DTYPE_F32, {4, 2}, kScales);
    op->set_granularity(v1::QUANT_1X128);
    return r;
  }

  v1::GemmRequest GoodGemm() {
    v1::GemmRequest r;
    r.set_session_id(session_.id);
    v1::GemmOp* op = r.mutable_op();
    op->set_variant(v1::GEMM_NT);
    *op->mutable_a() = Ref(buf_, v1::DTYPE_E4M3FN, {4, 256}, kIn);
    *op->mutable_a_scales() = Ref(buf_, v1::DTYPE_F32, {4, 2}, kScales);
    *op->mutable_b() = Ref(buf_, v1::DTYPE_E4M3FN, {8, 256}, kExtra);
    *op->mutable_b_scales() = Ref(buf_, v1::DTYPE_F32, {1, 2}, kScales + 4096);
    *op->mutable_d() = Ref(buf_, v1::DTYPE_BF16, {4, 8}, kOut);
    return r;
  }

  v1::PadRequest GoodPad() {
    v1::PadRequest r;
    r.set_session_id(session_.id);
    v1::PadOp* op = r.mutable_op();
    *op->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {10, 16}, kIn);
    *op->mutable_group_ends() = Ref(buf_, v1::DTYPE_I32, {2}, kExtra);
    *op->mutable_output() = Ref(buf_, v1::DTYPE_BF16, {10 + 2 * 15, 16}, kOut);
    *op->mutable_padded_group_ends() = Ref(buf_, v1::DTYPE_I32, {2}, kScales);
    op->set_alignment(16);
    int32_t* ends = reinterpret_cast<int32_t*>(shm_.as<char>() + kExtra);
    ends[0] = 3;
    ends[1] = 10;
    return r;
  }

  grpc::Status Call(const v1::QuantizeRequest& r) {
    grpc::ClientContext ctx;
    v1::OpResponse resp;
    return daemon_.data().Quantize(&ctx, r, &resp);
  }
  grpc::Status Call(const v1::GemmRequest& r) {
    grpc::ClientContext ctx;
    v1::OpResponse resp;
    return daemon_.data().Gemm(&ctx, r, &resp);
  }
  grpc::Status Call(const v1::PadRequest& r) {
    grpc::ClientContext ctx;
    v1::OpResponse resp;
    return daemon_.data().Pad(&ctx, r, &resp);
  }
  grpc::Status Call(const v1::UnpadRequest& r) {
    grpc::ClientContext ctx;
    v1::OpResponse resp;
    return daemon_.data().Unpad(&ctx, r, &resp);
  }
  grpc::Status Call(const v1::SubmitRequest& r) {
    grpc::ClientContext ctx;
    v1::SubmitResponse resp;
    return daemon_.data().Submit(&ctx, r, &resp);
  }

  void TearDown() override {
    // The daemon keeps serving after every bad request.
    EXPECT_TRUE(Call(GoodQuantize()).ok());
  }

  TestDaemon daemon_;
  ShmObject shm_{kBufferBytes};
  OpenSession session_;
  uint64_t buf_ = 0;
};

#define EXPECT_STATUS(status, code_, text)                                             \
  do {                                                                                 \
    const grpc::Status s_ = (status);                                                  \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code_) << s_.error_message();         \
    EXPECT_NE(s_.error_message().find(text), std::string::npos) << s_.error_message(); \
  } while (0)

TEST_F(ValidationTest, GoodRequestsSucceed) {
  EXPECT_TRUE(Call(GoodQuantize()).ok());
  EXPECT_TRUE(Call(GoodGemm()).ok());
  EXPECT_TRUE(Call(GoodPad()).ok());
}

TEST_F(ValidationTest, UnknownSessionIsNotFound) {
  auto r = GoodQuantize();
  r.set_session_id("0123456789abcdef0123456789abcdef");
  EXPECT_STATUS(Call(r), NOT_FOUND, "is not an open session");
}

TEST_F(ValidationTest, MissingSessionIdIsNotFound) {
  auto r = GoodQuantize();
  r.clear_session_id();
  EXPECT_STATUS(Call(r), NOT_FOUND, "session_id is required");
}

TEST_F(ValidationTest, UnknownBufferIsNotFound) {
  auto r = GoodQuantize();
  r.mutable_op()->mutable_input()->set_buffer_id(999);
  EXPECT_STATUS(Call(r), NOT_FOUND, "input.buffer_id=999 is not a buffer of this session");
}

TEST_F(ValidationTest, ForeignSessionBufferIsNotFound) {
  // Another session uses our buffer id: it reads exactly like an id that does not exist.
  OpenSession other = daemon_.Open("other");
  auto r = GoodQuantize();
  r.set_session_id(other.id);
  const grpc::Status foreign = Call(r);
  EXPECT_STATUS(foreign, NOT_FOUND,
                absl::StrCat("input.buffer_id=", buf_, " is not a buffer of this session"));
  r.mutable_op()->mutable_input()->set_buffer_id(buf_ + 1000);
  const grpc::Status unknown = Call(r);
  EXPECT_EQ(unknown.error_code(), foreign.error_code());
  EXPECT_EQ(unknown.error_message(),
            absl::StrCat("input.buffer_id=", buf_ + 1000, " is not a buffer of this session"));
  // Still ours.
  EXPECT_TRUE(Call(GoodQuantize()).ok());
}

TEST_F(ValidationTest, UnspecifiedDtypeIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->mutable_input()->set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.dtype is unspecified or unknown");
}

TEST_F(ValidationTest, UnknownDtypeEnumIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->mutable_input()->set_dtype(static_cast<v1::DType>(99));
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.dtype=99 is not a known value");
}

TEST_F(ValidationTest, RankOverFourIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {1, 1, 1, 4, 256});
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.shape has rank 5; must be 1..4");
}

TEST_F(ValidationTest, ZeroDimensionIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {0, 256});
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.shape[0]=0 must be >= 1");
}

TEST_F(ValidationTest, NegativeDimensionIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {-4, 256});
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.shape[0]=-4 must be >= 1");
}

TEST_F(ValidationTest, StrideCountMismatchIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {4, 256}, 0, {1});
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.strides has 1 entries; must be 0 or 2");
}

TEST_F(ValidationTest, NonContiguousInnerStrideIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {4, 256}, 0, {512, 2});
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.strides[1]=2 must be 1");
}

TEST_F(ValidationTest, SelfOverlappingStrideIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {4, 256}, 0, {128, 1});
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.strides[0]=128 must be >= 256");
}

TEST_F(ValidationTest, PaddedRowStrideIsAccepted) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {4, 256}, 0, {384, 1});
  EXPECT_TRUE(Call(r).ok());
}

TEST_F(ValidationTest, MisalignedOffsetIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->mutable_input()->set_byte_offset(3);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT,
                "input.byte_offset=3 is not a multiple of the bf16 element size 2");
}

TEST_F(ValidationTest, ExtentBeyondBufferIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->mutable_input()->set_byte_offset(kBufferBytes - 1024);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "exceeds the buffer size 1048576");
}

TEST_F(ValidationTest, OverflowingShapeIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() =
      Ref(buf_, v1::DTYPE_BF16, {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "has more than 2^63 elements");
}

TEST_F(ValidationTest, OverflowingOffsetIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->mutable_input()->set_byte_offset(~uint64_t{0} - 1);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.");
}

TEST_F(ValidationTest, BlockIndivisibleKIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {4, 200}, kIn);
  *r.mutable_op()->mutable_output() = Ref(buf_, v1::DTYPE_E4M3FN, {4, 200}, kOut);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.shape[1]=200 is not a multiple of block 128");
}

TEST_F(ValidationTest, WrongScaleShapeIsInvalid) {
  auto r = GoodQuantize();
  *r.mutable_op()->mutable_scales() = Ref(buf_, v1::DTYPE_F32, {4, 3}, kScales);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "scales.shape (4, 3) must be (4, 2)");
}

TEST_F(ValidationTest, NonFp8OutputIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->mutable_output()->set_dtype(v1::DTYPE_BF16);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT,
                "output.dtype=bf16 must be one of e4m3fn, e4m3fnuz, e5m2");
}

TEST_F(ValidationTest, UnspecifiedGranularityIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->set_granularity(v1::QUANT_GRANULARITY_UNSPECIFIED);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "granularity=0 is unspecified");
}

TEST_F(ValidationTest, UnknownGranularityEnumIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->set_granularity(static_cast<v1::QuantGranularity>(42));
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "granularity=42 is not a known value");
}

TEST_F(ValidationTest, NegativeEpsIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->set_eps(-1.0f);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "eps=-1 must be finite and > 0");
}

TEST_F(ValidationTest, OutputAliasingInputIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->mutable_output()->set_byte_offset(kIn + 512);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "output overlaps input");
}

TEST_F(ValidationTest, MissingRequiredTensorIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_op()->clear_scales();
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "scales is required");
}

TEST_F(ValidationTest, GemmReductionMismatchIsInvalid) {
  auto r = GoodGemm();
  *r.mutable_op()->mutable_b() = Ref(buf_, v1::DTYPE_E4M3FN, {8, 128}, kExtra);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT,
                "b.shape[1]=128 must equal a.shape[1]=256 (the reduction)");
}

TEST_F(ValidationTest, GemmAccumulateIntoBf16IsInvalid) {
  auto r = GoodGemm();
  r.mutable_op()->set_accumulate(true);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "accumulate needs d.dtype=f32");
}

TEST_F(ValidationTest, GemmUnknownVariantIsInvalid) {
  auto r = GoodGemm();
  r.mutable_op()->set_variant(static_cast<v1::GemmVariant>(77));
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "variant=77 is not a known value");
}

TEST_F(ValidationTest, GemmWrongOutputShapeIsInvalid) {
  auto r = GoodGemm();
  *r.mutable_op()->mutable_d() = Ref(buf_, v1::DTYPE_BF16, {4, 9}, kOut);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "d.shape (4, 9) must be (4, 8)");
}

TEST_F(ValidationTest, PadAlignmentNotPowerOfTwoIsInvalid) {
  auto r = GoodPad();
  r.mutable_op()->set_alignment(24);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "alignment=24 must be a power of two");
}

TEST_F(ValidationTest, PadOutputTooSmallIsInvalid) {
  auto r = GoodPad();
  *r.mutable_op()->mutable_output() = Ref(buf_, v1::DTYPE_BF16, {32, 16}, kOut);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT,
                "output.shape[0]=32 must be >= input rows + groups * (alignment - 1) = 40");
}

TEST_F(ValidationTest, DecreasingGroupEndsAreInvalid) {
  auto r = GoodPad();
  int32_t* ends = reinterpret_cast<int32_t*>(shm_.as<char>() + kExtra);
  ends[0] = 7;
  ends[1] = 5;
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "group_ends[1]=5 is less than group_ends[0]=7");
}

TEST_F(ValidationTest, NegativeGroupEndIsInvalid) {
  auto r = GoodPad();
  reinterpret_cast<int32_t*>(shm_.as<char>() + kExtra)[0] = -1;
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "group_ends[0]=-1 is less than 0");
}

TEST_F(ValidationTest, GroupEndsNotCoveringRowsAreInvalid) {
  auto r = GoodPad();
  reinterpret_cast<int32_t*>(shm_.as<char>() + kExtra)[1] = 9;
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "group_ends[1]=9 must equal the row count 10");
}

TEST_F(ValidationTest, UnpadInputShorterThanOutputIsInvalid) {
  v1::UnpadRequest r;
  r.set_session_id(session_.id);
  *r.mutable_op()->mutable_input() = Ref(buf_, v1::DTYPE_BF16, {8, 16}, kIn);
  *r.mutable_op()->mutable_group_ends() = Ref(buf_, v1::DTYPE_I32, {2}, kExtra);
  *r.mutable_op()->mutable_output() = Ref(buf_, v1::DTYPE_BF16, {10, 16}, kOut);
  r.mutable_op()->set_alignment(16);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "input.shape[0]=8 must be >= output.shape[0]=10");
}

TEST_F(ValidationTest, BatchOverLimitIsResourceExhausted) {
  v1::SubmitRequest r;
  r.set_session_id(session_.id);
  for (int i = 0; i < 257; ++i) *r.add_ops()->mutable_quantize() = GoodQuantize().op();
  EXPECT_STATUS(Call(r), RESOURCE_EXHAUSTED,
                "ops has 257 entries; the limit is --max_batch_ops=256");
}

TEST_F(ValidationTest, OversizedMessageIsResourceExhausted) {
  v1::SubmitRequest r;
  r.set_session_id(session_.id);
  r.mutable_completion()->set_wait_event(std::string(5 << 20, 'x'));
  EXPECT_EQ(Call(r).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(ValidationTest, InvalidOpInBatchRunsNothingAndIsNamed) {
  std::memset(shm_.as<char>() + kOut, 0xAB, 1024);
  for (int i = 0; i < 4 * 256; ++i) shm_.as<uint16_t>()[i] = ToBF16(1.0f);
  v1::SubmitRequest r;
  r.set_session_id(session_.id);
  *r.add_ops()->mutable_quantize() = GoodQuantize().op();
  v1::QuantizeOp bad = GoodQuantize().op();
  bad.mutable_scales()->set_byte_offset(kBufferBytes);
  *r.add_ops()->mutable_quantize() = bad;
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "ops[1].quantize.scales.byte_offset=");
  EXPECT_EQ(static_cast<unsigned char>(shm_.as<char>()[kOut]), 0xAB) << "ops[0] ran";
}

TEST_F(ValidationTest, OneOpSubmitStillNamesTheOp) {
  v1::SubmitRequest r;
  r.set_session_id(session_.id);
  v1::QuantizeOp bad = GoodQuantize().op();
  bad.set_eps(-1.0f);  // a validation error, found after binding
  *r.add_ops()->mutable_quantize() = bad;
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "ops[0].quantize.eps=-1 must be finite and > 0");
}

TEST_F(ValidationTest, OpKindNotSetIsInvalid) {
  v1::SubmitRequest r;
  r.set_session_id(session_.id);
  r.add_ops();
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "ops[0].kind is not set");
}

TEST_F(ValidationTest, EmptySubmitIsARoundTrip) {
  v1::SubmitRequest r;
  r.set_session_id(session_.id);
  EXPECT_TRUE(Call(r).ok());
}

TEST_F(ValidationTest, AsyncOnCpuIsFailedPrecondition) {
  auto r = GoodQuantize();
  r.mutable_completion()->set_mode(v1::Completion::ASYNC);
  r.mutable_completion()->set_signal_event(std::string(64, '\1'));
  EXPECT_STATUS(Call(r), FAILED_PRECONDITION, "no IPC events");
}

TEST_F(ValidationTest, AsyncWithoutSignalEventIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_completion()->set_mode(v1::Completion::ASYNC);
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "completion.signal_event is required");
}

TEST_F(ValidationTest, UnknownCompletionModeIsInvalid) {
  auto r = GoodQuantize();
  r.mutable_completion()->set_mode(static_cast<v1::Completion::Mode>(9));
  EXPECT_STATUS(Call(r), INVALID_ARGUMENT, "completion.mode=9 is not a known value");
}

TEST_F(ValidationTest, RegisterWithoutSourceIsInvalid) {
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(session_.id);
  v1::RegisterBufferResponse resp;
  EXPECT_STATUS(daemon_.data().RegisterBuffer(&ctx, req, &resp), INVALID_ARGUMENT,
                "source is not set");
}

TEST_F(ValidationTest, RegisterLargerThanShmIsInvalid) {
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(session_.id);
  req.set_shm_name(shm_.name());
  req.set_size(kBufferBytes + 1);
  v1::RegisterBufferResponse resp;
  EXPECT_STATUS(daemon_.data().RegisterBuffer(&ctx, req, &resp), INVALID_ARGUMENT,
                "exceeds the real size 1048576");
}

TEST_F(ValidationTest, RegisterMissingShmIsInvalid) {
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(session_.id);
  req.set_shm_name("/kerneld-test-does-not-exist");
  req.set_size(16);
  v1::RegisterBufferResponse resp;
  EXPECT_STATUS(daemon_.data().RegisterBuffer(&ctx, req, &resp), INVALID_ARGUMENT,
                "cannot be opened");
}

TEST_F(ValidationTest, RegisterBadShmNameIsInvalid) {
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(session_.id);
  req.set_shm_name("../etc/passwd");
  req.set_size(16);
  v1::RegisterBufferResponse resp;
  EXPECT_STATUS(daemon_.data().RegisterBuffer(&ctx, req, &resp), INVALID_ARGUMENT,
                "must be \"/name\"");
}

TEST_F(ValidationTest, RegisterIpcWithoutGpuBackendIsFailedPrecondition) {
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(session_.id);
  req.mutable_ipc()->set_kind(v1::IpcMemHandle::CUDA);
  req.mutable_ipc()->set_handle(std::string(64, '\0'));
  req.set_size(16);
  v1::RegisterBufferResponse resp;
  EXPECT_STATUS(daemon_.data().RegisterBuffer(&ctx, req, &resp), FAILED_PRECONDITION,
                "has no cuda backend");
}

TEST_F(ValidationTest, AllocateZeroBytesIsInvalid) {
  grpc::ClientContext ctx;
  v1::AllocateBufferRequest req;
  req.set_session_id(session_.id);
  v1::AllocateBufferResponse resp;
  EXPECT_STATUS(daemon_.data().AllocateBuffer(&ctx, req, &resp), INVALID_ARGUMENT,
                "size=0 must be > 0");
}

TEST_F(ValidationTest, AllocateUnknownBackendIsInvalid) {
  grpc::ClientContext ctx;
  v1::AllocateBufferRequest req;
  req.set_session_id(session_.id);
  req.set_size(16);
  req.set_backend("tpu");
  v1::AllocateBufferResponse resp;
  EXPECT_STATUS(daemon_.data().AllocateBuffer(&ctx, req, &resp), INVALID_ARGUMENT,
                "backend=\"tpu\" is not a backend");
}

TEST_F(ValidationTest, AllocateOverSessionQuotaIsResourceExhausted) {
  grpc::ClientContext ctx;
  v1::AllocateBufferRequest req;
  req.set_session_id(session_.id);
  req.set_size(uint64_t{1} << 40);
  v1::AllocateBufferResponse resp;
  EXPECT_STATUS(daemon_.data().AllocateBuffer(&ctx, req, &resp), RESOURCE_EXHAUSTED,
                "--max_session_bytes");
}

TEST_F(ValidationTest, ReleaseUnknownBufferIsNotFound) {
  grpc::ClientContext ctx;
  v1::ReleaseBufferRequest req;
  req.set_session_id(session_.id);
  req.set_buffer_id(12345);
  v1::ReleaseBufferResponse resp;
  EXPECT_STATUS(daemon_.data().ReleaseBuffer(&ctx, req, &resp), NOT_FOUND, "buffer_id=12345");
}

TEST_F(ValidationTest, AdminOnDataSocketIsPermissionDenied) {
  grpc::ClientContext ctx;
  v1::StatusResponse resp;
  EXPECT_STATUS(daemon_.admin_on_data_socket().Status(&ctx, v1::StatusRequest(), &resp),
                PERMISSION_DENIED, "admin method");
  grpc::ClientContext ctx2;
  v1::DrainResponse drain;
  EXPECT_STATUS(daemon_.admin_on_data_socket().Drain(&ctx2, v1::DrainRequest(), &drain),
                PERMISSION_DENIED, "admin method");
  EXPECT_FALSE(daemon_.daemon().draining());
}

TEST_F(ValidationTest, TooLongClientNameIsInvalid) {
  grpc::ClientContext ctx;
  v1::OpenSessionRequest req;
  req.set_client_name(std::string(200, 'n'));
  auto stream = daemon_.data().OpenSession(&ctx, req);
  v1::SessionEvent ev;
  EXPECT_FALSE(stream->Read(&ev));
  EXPECT_STATUS(stream->Finish(), INVALID_ARGUMENT, "client_name has 200 bytes; at most 128");
}

TEST_F(ValidationTest, NamesWithANulByteAreInvalid) {
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(session_.id);
  req.set_shm_name(shm_.name() + std::string("\0x", 2));  // a C API would open shm_.name()
  req.set_size(16);
  v1::RegisterBufferResponse resp;
  EXPECT_STATUS(daemon_.data().RegisterBuffer(&ctx, req, &resp), INVALID_ARGUMENT,
                absl::StrCat("shm_name=\"", shm_.name(), "\\0...\" holds a NUL byte at offset ",
                             shm_.name().size()));
  grpc::ClientContext open_ctx;
  v1::OpenSessionRequest open;
  open.set_client_name(std::string("rank\0zero", 9));
  auto stream = daemon_.data().OpenSession(&open_ctx, open);
  v1::SessionEvent ev;
  EXPECT_FALSE(stream->Read(&ev));
  EXPECT_STATUS(stream->Finish(), INVALID_ARGUMENT, "client_name=\"rank\\0...\" holds a NUL");
}

TEST_F(ValidationTest, DescriptorSourceOverGrpcIsInvalid) {
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(session_.id);
  req.set_attached_fd(true);
  req.set_size(16);
  v1::RegisterBufferResponse resp;
  EXPECT_STATUS(daemon_.data().RegisterBuffer(&ctx, req, &resp), INVALID_ARGUMENT,
                "a descriptor can come only with a request on the fd socket");
}

// A status travels in gRPC metadata, whose default limit is 8 KiB: were a 16 KiB session id or
// name echoed whole, gRPC would tear down the connection, and the healthy session that shares
// it (the fixture's, whose stream and calls use the same channel) would end with it.
TEST_F(ValidationTest, HugeClientStringsComeBackTruncatedAndTheConnectionSurvives) {
  const std::string huge(16 << 10, 'x');
  const std::string echoed = std::string(128, 'x') + "...(truncated, 16384 bytes)";
  auto expect_truncated = [&](const grpc::Status& s, grpc::StatusCode code) {
    EXPECT_EQ(s.error_code(), code) << s.error_message().substr(0, 300);
    EXPECT_NE(s.error_message().find(echoed), std::string::npos)
        << s.error_message().substr(0, 300);
    EXPECT_LT(s.error_message().size(), 512u);
  };
  {
    v1::QuantizeRequest r = GoodQuantize();
    r.set_session_id(huge);
    expect_truncated(Call(r), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::CloseSessionRequest req;
    req.set_session_id(huge);
    v1::CloseSessionResponse resp;
    expect_truncated(daemon_.data().CloseSession(&ctx, req, &resp), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::RegisterBufferRequest req;
    req.set_session_id(session_.id);
    req.set_shm_name("/" + huge);
    req.set_size(16);
    v1::RegisterBufferResponse resp;
    const grpc::Status s = daemon_.data().RegisterBuffer(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("...(truncated, 16385 bytes)"), std::string::npos)
        << s.error_message().substr(0, 300);
  }
  {
    grpc::ClientContext ctx;
    v1::AllocateBufferRequest req;
    req.set_session_id(session_.id);
    req.set_backend(huge);
    req.set_size(16);
    v1::AllocateBufferResponse resp;
    expect_truncated(daemon_.data().AllocateBuffer(&ctx, req, &resp),
                     grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::AttachSubmitRingRequest req;
    req.set_session_id(huge);
    req.set_shm_name(shm_.name());
    req.set_size(4096);
    v1::AttachSubmitRingResponse resp;
    expect_truncated(daemon_.data().AttachSubmitRing(&ctx, req, &resp),
                     grpc::StatusCode::NOT_FOUND);
  }
  // The fixture's session is still open on the same connection (TearDown runs an op on it).
  grpc::ClientContext ctx;
  v1::StatusResponse status;
  ASSERT_TRUE(daemon_.admin().Status(&ctx, v1::StatusRequest(), &status).ok());
  ASSERT_EQ(status.sessions_size(), 1);
  EXPECT_EQ(status.sessions(0).session_id(), session_.id);
}

class LimitsTest : public ::testing::Test {
 protected:
  static DaemonOptions Small() {
    DaemonOptions o;
    o.limits.max_buffers_per_session = 2;
    o.limits.max_sessions = 2;
    return o;
  }
  TestDaemon daemon_{Small(), /*customise=*/true};
};

TEST_F(LimitsTest, BuffersOverQuotaAreResourceExhausted) {
  OpenSession s = daemon_.Open();
  ShmObject a(4096), b(4096), c(4096);
  daemon_.Register(s, a);
  daemon_.Register(s, b);
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(s.id);
  req.set_shm_name(c.name());
  req.set_size(4096);
  v1::RegisterBufferResponse resp;
  EXPECT_STATUS(daemon_.data().RegisterBuffer(&ctx, req, &resp), RESOURCE_EXHAUSTED,
                "--max_buffers_per_session");
}

TEST_F(LimitsTest, SessionsOverQuotaAreResourceExhausted) {
  OpenSession a = daemon_.Open(), b = daemon_.Open();
  grpc::ClientContext ctx;
  auto stream = daemon_.data().OpenSession(&ctx, v1::OpenSessionRequest());
  v1::SessionEvent ev;
  EXPECT_FALSE(stream->Read(&ev));
  EXPECT_STATUS(stream->Finish(), RESOURCE_EXHAUSTED, "--max_sessions");
}

TEST(DrainTest, DrainingRefusesNewWorkWithUnavailable) {
  TestDaemon d;
  OpenSession s = d.Open();
  grpc::ClientContext ctx;
  v1::DrainResponse resp;
  ASSERT_TRUE(d.admin().Drain(&ctx, v1::DrainRequest(), &resp).ok());
  grpc::ClientContext ctx2;
  v1::SubmitRequest r;
  r.set_session_id(s.id);
  v1::SubmitResponse sr;
  EXPECT_STATUS(d.data().Submit(&ctx2, r, &sr), UNAVAILABLE, "draining");
}

}  // namespace
}  // namespace testing
}  // namespace kd
