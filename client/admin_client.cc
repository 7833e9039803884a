#include "kerneld/client/admin_client.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/channel.h"
#include "kerneld/client/client.h"
#include "kerneld/client/status.h"

namespace kd {
namespace client {

absl::StatusOr<std::unique_ptr<AdminClient>> AdminClient::Connect(absl::string_view target,
                                                                  absl::Duration timeout) {
  std::string normalized = NormalizeTarget(target);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      internal::ConnectChannel(normalized, timeout, /*tag=*/0);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<AdminClient>(
      new AdminClient(std::move(normalized), timeout, *std::move(channel)));
}

AdminClient::AdminClient(std::string target, absl::Duration timeout,
                         std::shared_ptr<grpc::Channel> channel)
    : target_(std::move(target)),
      timeout_(timeout),
      channel_(std::move(channel)),
      stub_(v1::Admin::NewStub(channel_)) {}

absl::StatusOr<v1::StatusResponse> AdminClient::Status() const {
  v1::StatusResponse response;
  grpc::ClientContext context;
  internal::SetTimeout(context, timeout_);
  const grpc::Status status = stub_->Status(&context, v1::StatusRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::string_view HealthStateName(HealthState state) {
  switch (state) {
    case HealthState::kServing:
      return "SERVING";
    case HealthState::kNotServing:
      return "NOT_SERVING";
    case HealthState::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case HealthState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

namespace {

// grpc.health.v1 messages are tiny; they are written and read here by their wire format rather
// than by generated code, which Debian's gRPC packages do not ship for the health protocol.
//   HealthCheckRequest  { string service = 1; }
//   HealthCheckResponse { ServingStatus status = 1; }   (an enum: a varint)
std::string EncodeHealthRequest(absl::string_view service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0A);  // field 1, length-delimited
  uint64_t len = service.size();
  while (len >= 0x80) {
    out.push_back(static_cast<char>((len & 0x7F) | 0x80));
    len >>= 7;
  }
  out.push_back(static_cast<char>(len));
  out.append(service.data(), service.size());
  return out;
}

bool ReadVarint(const std::string& in, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < in.size(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(in[(*pos)++]);
    *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// The status field of a HealthCheckResponse; unknown fields are skipped, a missing status is
// UNKNOWN (proto3 default).
absl::StatusOr<HealthState> DecodeHealthResponse(const std::string& in) {
  const absl::Status malformed =
      absl::InternalError("malformed grpc.health.v1.HealthCheckResponse");
  size_t pos = 0;
  uint64_t state = 0;
  while (pos < in.size()) {
    uint64_t tag, value;
    if (!ReadVarint(in, &pos, &tag)) return malformed;
    switch (tag & 7) {
      case 0:  // varint
        if (!ReadVarint(in, &pos, &value)) return malformed;
        if ((tag >> 3) == 1) state = value;
        break;
      case 2:  // length-delimited
        if (!ReadVarint(in, &pos, &value) || value > in.size() - pos) return malformed;
        pos += value;
        break;
      case 1:  // fixed64
      case 5:  // fixed32
        value = (tag & 7) == 1 ? 8 : 4;
        if (value > in.size() - pos) return malformed;
        pos += value;
        break;
      default:
        return malformed;
    }
  }
  return state <= 3 ? static_cast<HealthState>(state) : HealthState::kUnknown;
}

}  // namespace

absl::StatusOr<HealthState> CheckHealth(absl::string_view target, absl::string_view service,
                                        absl::Duration timeout) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      internal::ConnectChannel(NormalizeTarget(target), timeout, /*tag=*/0);
  if (!channel.ok()) return channel.status();
  grpc::GenericStub stub(*channel);
  grpc::ClientContext context;
  internal::SetTimeout(context, timeout);
  const std::string request_bytes = EncodeHealthRequest(service);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return absl::InternalError("cannot read the health response");
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return DecodeHealthResponse(bytes);
}

}  // namespace client
}  // namespace kd
