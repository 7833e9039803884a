// gRPC service implementations (callback API). Handlers are thin: proto -> op structs ->
// executor -> status -> proto. No handler waits on a device.
#ifndef KERNELD_SERVER_SERVICES_H_
#define KERNELD_SERVER_SERVICES_H_

#include <memory>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "server/connection_acceptor.h"
#include "server/daemon.h"

namespace kd {

// The data plane: its gRPC service and the handler of the fd socket's messages (FdRequest),
// which runs the same calls with descriptors attached.
struct DataPlane {
  std::unique_ptr<grpc::Service> service;
  ConnectionAcceptor::FdHandler fd_handler;
};
DataPlane MakeDataPlane(Daemon* daemon);
// `trusted` is true on the admin socket; on the data socket every method answers
// PERMISSION_DENIED.
std::unique_ptr<grpc::Service> MakeAdminService(Daemon* daemon, bool trusted);

}  // namespace kd

#endif  // KERNELD_SERVER_SERVICES_H_
