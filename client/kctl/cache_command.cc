// kctl cache list | export [FILE] | import FILE | pin KEY CONFIG | unpin KEY | clear: the
// daemon's tune cache. export/import move a cache between identical nodes.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/str_join.h"
#include "client/kctl/commands.h"
#include "client/kctl/tune_format.h"
#include "kerneld/client/status.h"

namespace kd {
namespace kctl {
namespace {

namespace v1 = ::kerneld::v1;

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

int Fail(CommandContext& ctx, const std::string& verb, const absl::Status& status) {
  *ctx.err << "kctl: cache " << verb << ": " << status << "\n";
  return kExitFailure;
}

bool WantArgs(CommandContext& ctx, size_t n, const char* usage) {
  if (ctx.args.size() == n + 1) return true;
  *ctx.err << "kctl: usage: kctl cache " << usage << "\n";
  return false;
}

}  // namespace

int RunCache(CommandContext& ctx) {
  const std::string verb = ctx.args.empty() ? "" : ctx.args[0];
  const std::vector<std::string> verbs = {"list", "export", "import", "pin", "unpin", "clear"};
  if (std::find(verbs.begin(), verbs.end(), verb) == verbs.end()) {
    *ctx.err << "kctl: cache needs one of " << absl::StrJoin(verbs, ", ") << "\n";
    return kExitUsage;
  }
  if ((ctx.Has("json") && verb != "list") || (ctx.Has("include_pinned") && verb != "clear")) {
    *ctx.err << "kctl: --json is for cache list, --include_pinned for cache clear\n";
    return kExitUsage;
  }
  if ((verb == "list" || verb == "clear") && !WantArgs(ctx, 0, verb.c_str())) return kExitUsage;
  if (verb == "export" && ctx.args.size() > 2) {
    *ctx.err << "kctl: usage: kctl cache export [FILE]\n";
    return kExitUsage;
  }
  if (verb == "import" && !WantArgs(ctx, 1, "import FILE")) return kExitUsage;
  if (verb == "pin" && !WantArgs(ctx, 2, "pin KEY CONFIG")) return kExitUsage;
  if (verb == "unpin" && !WantArgs(ctx, 1, "unpin KEY")) return kExitUsage;

  std::string import_bytes;
  if (verb == "import") {
    std::ifstream in(ctx.args[1], std::ios::binary);
    if (!in) {
      *ctx.err << "kctl: cache import: cannot read " << ctx.args[1] << "\n";
      return kExitUsage;
    }
    std::stringstream contents;
    contents << in.rdbuf();
    import_bytes = contents.str();
  }

  absl::StatusOr<std::unique_ptr<client::AdminClient>> admin = ctx.ConnectAdmin();
  if (!admin.ok()) return Fail(ctx, verb, admin.status());
  v1::Admin::Stub* stub = (*admin)->stub();
  grpc::ClientContext context;
  SetDeadline(context, ctx.timeout);

  if (verb == "list") {
    v1::ListCacheResponse resp;
    const absl::Status s =
        client::FromGrpcStatus(stub->ListCache(&context, v1::ListCacheRequest(), &resp));
    if (!s.ok()) return Fail(ctx, verb, s);
    *ctx.out << (ctx.Has("json") ? FormatCacheJson(resp) : FormatCacheTable(resp));
    return kExitOk;
  }
  if (verb == "export") {
    v1::ExportCacheResponse resp;
    const absl::Status s =
        client::FromGrpcStatus(stub->ExportCache(&context, v1::ExportCacheRequest(), &resp));
    if (!s.ok()) return Fail(ctx, verb, s);
    if (ctx.args.size() == 1 || ctx.args[1] == "-") {
      *ctx.out << resp.file();
      return kExitOk;
    }
    std::ofstream out(ctx.args[1], std::ios::binary | std::ios::trunc);
    out << resp.file();
    out.close();
    if (!out) return Fail(ctx, verb, absl::InternalError("cannot write " + ctx.args[1]));
    *ctx.err << "wrote " << resp.file().size() << " bytes to " << ctx.args[1] << "\n";
    return kExitOk;
  }
  if (verb == "import") {
    v1::ImportCacheRequest req;
    req.set_file(import_bytes);
    v1::ImportCacheResponse resp;
    const absl::Status s = client::FromGrpcStatus(stub->ImportCache(&context, req, &resp));
    if (!s.ok()) return Fail(ctx, verb, s);
    *ctx.out << "imported " << resp.imported() << ", rejected " << resp.rejected() << "\n";
    for (const std::string& reason : resp.reasons()) *ctx.out << "  " << reason << "\n";
    return resp.rejected() == 0 ? kExitOk : kExitFailure;
  }
  if (verb == "pin") {
    v1::PinCacheRequest req;
    req.set_key(ctx.args[1]);
    req.set_config(ctx.args[2]);
    v1::PinCacheResponse resp;
    const absl::Status s = client::FromGrpcStatus(stub->PinCache(&context, req, &resp));
    if (!s.ok()) return Fail(ctx, verb, s);
    *ctx.out << "pinned " << ctx.args[1] << " to " << ctx.args[2] << "\n";
    return kExitOk;
  }
  if (verb == "unpin") {
    v1::UnpinCacheRequest req;
    req.set_key(ctx.args[1]);
    v1::UnpinCacheResponse resp;
    const absl::Status s = client::FromGrpcStatus(stub->UnpinCache(&context, req, &resp));
    if (!s.ok()) return Fail(ctx, verb, s);
    *ctx.out << "unpinned " << ctx.args[1] << "\n";
    return kExitOk;
  }
  v1::ClearCacheRequest req;
  req.set_include_pinned(ctx.Has("include_pinned"));
  v1::ClearCacheResponse resp;
  const absl::Status s = client::FromGrpcStatus(stub->ClearCache(&context, req, &resp));
  if (!s.ok()) return Fail(ctx, verb, s);
  *ctx.out << "removed " << resp.removed() << " entries\n";
  return kExitOk;
}

}  // namespace kctl
}  // namespace kd
