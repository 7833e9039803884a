// Channel creation and deadlines shared by Client and AdminClient. Internal to the library.
#ifndef KERNELD_CLIENT_CHANNEL_H_
#define KERNELD_CLIENT_CHANNEL_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kd {
namespace client {
namespace internal {

// A channel to `target` (already normalized) that is connected, or UNAVAILABLE naming the
// target after `timeout`. Channels with different `tag`s do not share connections.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectChannel(const std::string& target,
                                                              absl::Duration timeout, int tag);

// Sets `context`'s deadline to now + `timeout` (none for an infinite duration).
void SetTimeout(grpc::ClientContext& context, absl::Duration timeout);

}  // namespace internal
}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_CHANNEL_H_
