#include "client/kctl/commands.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kd {
namespace kctl {

const std::vector<Command>& Commands() {
  static const std::vector<Command>* const kCommands = new std::vector<Command>{
      {"status",
       "status [--json]",
       "backends, devices and memory, sessions and their buffers, uptime, version",
       {"json"},
       &RunStatus},
      {"health",
       "health [--socket=PATH] [--service=NAME] [--liveness]",
       "health check of the data socket ($KERNELD_SOCKET): exit 0 when SERVING, or with "
       "--liveness whenever the daemon answers (draining included)",
       {"socket", "service", "liveness"},
       &RunHealth},
      {"tune",
       "tune [SHAPE...] [--shapes=FILE] [--from_misses] [--budget=SECONDS] [--backend=NAME] "
       "[--device=N]",
       "tunes GEMM shapes (nt:4096x7168x2048, m_grouped_nt:16384x4096x7168:g8) and shows "
       "default vs tuned time; --budget is per shape",
       {"shapes", "from_misses", "budget", "backend", "device"},
       &RunTune},
      {"cache",
       "cache list [--json] | export [FILE] | import FILE | pin KEY CONFIG | unpin KEY | "
       "clear [--include_pinned]",
       "the tune cache; export/import move it between identical nodes, a pin is never retuned",
       {"json", "include_pinned"},
       &RunCache},
  };
  return *kCommands;
}

std::string Usage() {
  std::string out =
      "usage: kctl [--admin_socket=PATH] [--timeout=SECONDS] <command> [options]\n\n"
      "commands:\n";
  size_t width = 0;
  for (const Command& c : Commands()) width = std::max(width, c.synopsis.size());
  for (const Command& c : Commands()) {
    absl::StrAppend(&out, "  ", c.synopsis, std::string(width - c.synopsis.size() + 2, ' '),
                    c.summary, "\n");
  }
  absl::StrAppend(&out,
                  "\nglobal options:\n"
                  "  --admin_socket=PATH  the daemon's admin socket (default "
                  "$KERNELD_ADMIN_SOCKET, else ",
                  client::kDefaultAdminSocket,
                  ")\n"
                  "  --timeout=SECONDS    connect and call deadline (default 5)\n"
                  "  --help               this text\n");
  return out;
}

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine line;
  bool options_done = false;
  for (const std::string& arg : args) {
    if (options_done || arg.empty() || arg[0] != '-' || arg == "-") {
      line.words.push_back(arg);
    } else if (arg == "--") {
      options_done = true;
    } else if (arg == "-h") {
      line.options["help"] = "";
    } else if (absl::StartsWith(arg, "--")) {
      const size_t eq = arg.find('=');
      std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("malformed option ", arg));
      line.options[name] = eq == std::string::npos ? "" : arg.substr(eq + 1);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option ", arg, " (options are --name or --name=value)"));
    }
  }
  return line;
}

int RunKctl(const std::vector<std::string>& args, const std::string& env_admin_socket,
            std::ostream& out, std::ostream& err) {
  absl::StatusOr<CommandLine> line = ParseCommandLine(args);
  if (!line.ok()) {
    err << "kctl: " << line.status().message() << "\n\n" << Usage();
    return kExitUsage;
  }
  if (line->options.count("help") != 0 || (!line->words.empty() && line->words[0] == "help")) {
    out << Usage();
    return kExitOk;
  }
  if (line->words.empty()) {
    err << Usage();
    return kExitUsage;
  }
  const Command* command = nullptr;
  for (const Command& c : Commands()) {
    if (c.name == line->words[0]) command = &c;
  }
  if (command == nullptr) {
    err << "kctl: unknown command \"" << line->words[0] << "\"\n\n" << Usage();
    return kExitUsage;
  }

  CommandContext ctx;
  ctx.out = &out;
  ctx.err = &err;
  ctx.args.assign(line->words.begin() + 1, line->words.end());
  ctx.admin_socket = env_admin_socket.empty() ? client::kDefaultAdminSocket : env_admin_socket;
  for (const auto& [name, value] : line->options) {
    if (name == "admin_socket") {
      if (value.empty()) {
        err << "kctl: --admin_socket needs a value (--admin_socket=PATH)\n";
        return kExitUsage;
      }
      ctx.admin_socket = value;
    } else if (name == "timeout") {
      double seconds;
      if (!absl::SimpleAtod(value, &seconds) || !std::isfinite(seconds) || seconds <= 0) {
        err << "kctl: --timeout=" << value << " is not a positive number of seconds\n";
        return kExitUsage;
      }
      ctx.timeout = absl::Seconds(seconds);
    } else if (std::find(command->options.begin(), command->options.end(), name) !=
               command->options.end()) {
      ctx.options[name] = value;
    } else {
      err << "kctl: " << command->name << " has no option --" << name << "\n\n" << Usage();
      return kExitUsage;
    }
  }
  return command->run(ctx);
}

}  // namespace kctl
}  // namespace kd
