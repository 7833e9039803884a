// The admin handlers of the tune cache and of Tune: proto to AutotuneManager and back. The
// admin service calls them only on the trusted (admin) socket.
#ifndef KERNELD_SERVER_AUTOTUNE_ADMIN_H_
#define KERNELD_SERVER_AUTOTUNE_ADMIN_H_

#include "grpcpp/grpcpp.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "server/autotune_manager.h"
#include "server/metrics.h"
#include "server/rpc_call.h"

namespace kd {

grpc::ServerUnaryReactor* HandleListCache(AutotuneManager& tuning, const RpcCall& call,
                                          v1::ListCacheResponse* resp);
grpc::ServerUnaryReactor* HandleExportCache(AutotuneManager& tuning, const RpcCall& call,
                                            v1::ExportCacheResponse* resp);
grpc::ServerUnaryReactor* HandleImportCache(AutotuneManager& tuning, const RpcCall& call,
                                            const v1::ImportCacheRequest& req,
                                            v1::ImportCacheResponse* resp);
grpc::ServerUnaryReactor* HandlePinCache(AutotuneManager& tuning, const RpcCall& call,
                                         const v1::PinCacheRequest& req);
grpc::ServerUnaryReactor* HandleUnpinCache(AutotuneManager& tuning, const RpcCall& call,
                                           const v1::UnpinCacheRequest& req);
grpc::ServerUnaryReactor* HandleClearCache(AutotuneManager& tuning, const RpcCall& call,
                                           const v1::ClearCacheRequest& req,
                                           v1::ClearCacheResponse* resp);

// Streams one TuneProgress per shape, then one with done=true. The tune runs on its own thread
// (a callback never blocks); a cancelled call (the client went away, its deadline passed) stops
// it within one kernel run and finishes with CANCELLED.
grpc::ServerWriteReactor<v1::TuneProgress>* StartTune(AutotuneManager& tuning, Metrics& metrics,
                                                      const v1::TuneRequest& req);

// The wire form of a tune shape and back (from a recorded miss's key).
GemmTuneShape TuneShapeFromProto(const v1::TuneShape& shape);
v1::TuneShape TuneShapeToProto(const TuneKey& key);

}  // namespace kd

#endif  // KERNELD_SERVER_AUTOTUNE_ADMIN_H_
