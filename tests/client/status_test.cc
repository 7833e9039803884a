#include "kerneld/client/status.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kd {
namespace client {
namespace {

TEST(FromGrpcStatusTest, OkIsOk) { EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok()); }

TEST(FromGrpcStatusTest, EveryCanonicalCodeKeepsItsCodeAndMessage) {
  const std::vector<std::pair<grpc::StatusCode, absl::StatusCode>> pairs = {
      {grpc::StatusCode::CANCELLED, absl::StatusCode::kCancelled},
      {grpc::StatusCode::UNKNOWN, absl::StatusCode::kUnknown},
      {grpc::StatusCode::INVALID_ARGUMENT, absl::StatusCode::kInvalidArgument},
      {grpc::StatusCode::DEADLINE_EXCEEDED, absl::StatusCode::kDeadlineExceeded},
      {grpc::StatusCode::NOT_FOUND, absl::StatusCode::kNotFound},
      {grpc::StatusCode::ALREADY_EXISTS, absl::StatusCode::kAlreadyExists},
      {grpc::StatusCode::PERMISSION_DENIED, absl::StatusCode::kPermissionDenied},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, absl::StatusCode::kResourceExhausted},
      {grpc::StatusCode::FAILED_PRECONDITION, absl::StatusCode::kFailedPrecondition},
      {grpc::StatusCode::ABORTED, absl::StatusCode::kAborted},
      {grpc::StatusCode::OUT_OF_RANGE, absl::StatusCode::kOutOfRange},
      {grpc::StatusCode::UNIMPLEMENTED, absl::StatusCode::kUnimplemented},
      {grpc::StatusCode::INTERNAL, absl::StatusCode::kInternal},
      {grpc::StatusCode::UNAVAILABLE, absl::StatusCode::kUnavailable},
      {grpc::StatusCode::DATA_LOSS, absl::StatusCode::kDataLoss},
      {grpc::StatusCode::UNAUTHENTICATED, absl::StatusCode::kUnauthenticated},
  };
  for (const auto& [grpc_code, absl_code] : pairs) {
    const absl::Status s =
        FromGrpcStatus(grpc::Status(grpc_code, "ops[3].gemm.a.shape[1]=100 is not a multiple"));
    EXPECT_EQ(s.code(), absl_code) << "grpc code " << grpc_code;
    EXPECT_EQ(s.message(), "ops[3].gemm.a.shape[1]=100 is not a multiple");
  }
}

TEST(FromGrpcStatusTest, TypedPredicatesWork) {
  EXPECT_TRUE(absl::IsNotFound(FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "x"))));
  EXPECT_TRUE(absl::IsPermissionDenied(
      FromGrpcStatus(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "admin"))));
}

TEST(FromGrpcStatusTest, CodeOutsideTheCanonicalRangeIsUnknownNamingTheNumber) {
  const absl::Status s = FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(42), "odd"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown);
  EXPECT_NE(s.message().find("42"), absl::string_view::npos);
  EXPECT_NE(s.message().find("odd"), absl::string_view::npos);
}

TEST(FromGrpcStatusTest, ErrorDetailsBecomeAPayload) {
  const absl::Status s =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "boom", "\x08\x01 details"));
  const auto payload = s.GetPayload("type.googleapis.com/grpc.status.details");
  ASSERT_TRUE(payload.has_value());
  EXPECT_EQ(std::string(*payload), "\x08\x01 details");
}

TEST(FromGrpcStatusTest, NoDetailsMeansNoPayload) {
  const absl::Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "boom"));
  EXPECT_FALSE(s.GetPayload("type.googleapis.com/grpc.status.details").has_value());
}

}  // namespace
}  // namespace client
}  // namespace kd
