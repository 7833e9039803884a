// The one place the wire contract meets the kernel layer: proto messages become op structs, and
// absl::Status becomes grpc::Status.
#ifndef KERNELD_SERVER_PROTO_CONVERT_H_
#define KERNELD_SERVER_PROTO_CONVERT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/support/status.h"
#include "kerneld/kernels/backend.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/v1/kerneld.pb.h"
#include "server/session_manager.h"

namespace kd {

namespace v1 = ::kerneld::v1;

// Same canonical code, same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Resolves the tensors of one or more ops against a session's buffers. Every tensor of every op
// must live on one backend and device (the batch runs on one queue).
class OpBinder {
 public:
  explicit OpBinder(Session& session) : session_(session) {}

  // An absent TensorRef gives an absent Tensor; `field` names it in errors.
  absl::StatusOr<Tensor> Bind(const v1::TensorRef& ref, bool present, absl::string_view field);

  // The op of one op message of kerneld.v1 (QuantizeOp, GemmOp, PadOp, UnpadOp: the messages of
  // the cases of kerneld.v1.Op, each instantiated in proto_convert.cc), its tensors bound.
  template <typename OpMessage>
  absl::StatusOr<Op> BindOp(const OpMessage& op);
  // The op of whichever case `op` holds; INVALID_ARGUMENT when none is set.
  absl::StatusOr<Op> Any(const v1::Op& op);

  // The backend the bound tensors live on (nullptr before any tensor was bound).
  Backend* backend() const { return backend_; }
  int device() const { return device_; }
  std::vector<std::shared_ptr<const Region>> TakeRegions() { return std::move(regions_); }

 private:
  Session& session_;
  Backend* backend_ = nullptr;
  int device_ = 0;
  std::string first_field_;
  std::vector<std::shared_ptr<const Region>> regions_;
};

}  // namespace kd

#endif  // KERNELD_SERVER_PROTO_CONVERT_H_
