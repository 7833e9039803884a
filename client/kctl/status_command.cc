#include "client/kctl/commands.h"
#include "client/kctl/status_format.h"

namespace kd {
namespace kctl {

int RunStatus(CommandContext& ctx) {
  if (!ctx.args.empty()) {
    *ctx.err << "kctl: status takes no arguments (got \"" << ctx.args[0] << "\")\n";
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<client::AdminClient>> admin = ctx.ConnectAdmin();
  if (!admin.ok()) {
    *ctx.err << "kctl: status: " << admin.status() << "\n";
    return kExitFailure;
  }
  absl::StatusOr<kerneld::v1::StatusResponse> status = (*admin)->Status();
  if (!status.ok()) {
    *ctx.err << "kctl: status: " << status.status() << "\n";
    return kExitFailure;
  }
  *ctx.out << (ctx.Has("json") ? FormatStatusJson(*status) : FormatStatusTable(*status));
  return kExitOk;
}

}  // namespace kctl
}  // namespace kd
