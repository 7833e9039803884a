#include <cstdlib>

#include "client/kctl/commands.h"
#include "kerneld/client/client.h"

namespace kd {
namespace kctl {

int RunHealth(CommandContext& ctx) {
  if (!ctx.args.empty()) {
    *ctx.err << "kctl: health takes no arguments (got \"" << ctx.args[0] << "\")\n";
    return kExitUsage;
  }
  std::string socket = client::kDefaultDataSocket;
  if (const char* env = std::getenv("KERNELD_SOCKET"); env != nullptr && *env != '\0') {
    socket = env;
  }
  if (ctx.Has("socket")) socket = ctx.options.at("socket");
  const std::string service = ctx.Has("service") ? ctx.options.at("service") : "";
  absl::StatusOr<client::HealthState> state = client::CheckHealth(socket, service, ctx.timeout);
  if (!state.ok()) {
    *ctx.err << "kctl: health: " << state.status() << "\n";
    return kExitFailure;
  }
  *ctx.out << client::HealthStateName(*state) << "\n";
  // A draining daemon answers NOT_SERVING: not ready for new work, but alive.
  if (ctx.Has("liveness")) return kExitOk;
  return *state == client::HealthState::kServing ? kExitOk : kExitFailure;
}

}  // namespace kctl
}  // namespace kd
