#include "client/channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kd {
namespace client {
namespace internal {

absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectChannel(const std::string& target,
                                                              absl::Duration timeout, int tag) {
  grpc::ChannelArguments args;
  // The peer is local: after a daemon restart, reconnect within a second rather than backing
  // off for minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (tag != 0) {
    args.SetInt("kerneld.channel_tag", tag);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", target, " within ",
                                               absl::FormatDuration(timeout),
                                               " (is kerneld running there?)"));
  }
  return channel;
}

void SetTimeout(grpc::ClientContext& context, absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return;
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMicroseconds(timeout));
}

}  // namespace internal
}  // namespace client
}  // namespace kd
