// gRPC service implementations (callback API). Handlers are thin: proto -> op structs ->
// executor -> status -> proto. No handler waits on a device.
#ifndef KERNELD_SERVER_SERVICES_H_
#define KERNELD_SERVER_SERVICES_H_

#include <memory>

#include "kerneld/server/daemon.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kd {

std::unique_ptr<grpc::Service> MakeDataPlaneService(Daemon* daemon);
// `trusted` is true on the admin socket; on the data socket every method answers
// PERMISSION_DENIED.
std::unique_ptr<grpc::Service> MakeAdminService(Daemon* daemon, bool trusted);

}  // namespace kd

#endif  // KERNELD_SERVER_SERVICES_H_
