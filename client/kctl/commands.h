// kctl's subcommands: the command line they receive, the table that names them, and the
// functions that run them.
//
// Adding a subcommand (`kctl tune`, `kctl cache list|export|import|pin|unpin|clear`): write
// <name>_command.cc with `int Run<Name>(CommandContext& ctx)`, declare it below, add a row to
// the table in commands.cc (name, synopsis, summary, the options it accepts) and the file to
// kctl's sources in CMakeLists.txt. The dispatcher handles --help, unknown commands and unknown
// options; a command reads its options from ctx.options and its positional words (e.g. the
// `cache` verb) from ctx.args, and returns one of the exit codes below.
#ifndef KERNELD_CLIENT_KCTL_COMMANDS_H_
#define KERNELD_CLIENT_KCTL_COMMANDS_H_

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kerneld/client/admin_client.h"

namespace kd {
namespace kctl {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the daemon answered with an error, or could not be reached
constexpr int kExitUsage = 2;    // unknown command or option, bad option value

// The command line split into words and options. An option takes its value as "--name=value";
// a bare "--name" is a switch with the value "", and the word after it stays a word. "-h" is
// "--help". Everything after "--" is a word.
struct CommandLine {
  std::vector<std::string> words;
  std::map<std::string, std::string> options;
};
// INVALID_ARGUMENT for a single-dash option other than -h, or "--" followed by "=".
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

struct CommandContext {
  std::vector<std::string> args;               // words after the subcommand
  std::map<std::string, std::string> options;  // the command's own options
  std::string admin_socket;                    // --admin_socket, $KERNELD_ADMIN_SOCKET, default
  absl::Duration timeout = absl::Seconds(5);   // --timeout, for connecting and each call
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;

  absl::StatusOr<std::unique_ptr<client::AdminClient>> ConnectAdmin() const {
    return client::AdminClient::Connect(admin_socket, timeout);
  }
  bool Has(const std::string& option) const { return options.count(option) != 0; }
};

struct Command {
  std::string name;
  std::string synopsis;  // "status [--json]"
  std::string summary;
  std::vector<std::string> options;  // the options it accepts besides the global ones
  int (*run)(CommandContext& ctx);
};

// Every subcommand, in the order `kctl --help` lists them.
const std::vector<Command>& Commands();

// The usage text: synopsis of every command and the global options.
std::string Usage();

// Runs kctl with `args` (argv without argv[0]) and `env_admin_socket` (the value of
// $KERNELD_ADMIN_SOCKET, empty when unset); returns the exit code.
int RunKctl(const std::vector<std::string>& args, const std::string& env_admin_socket,
            std::ostream& out, std::ostream& err);

int RunStatus(CommandContext& ctx);
int RunHealth(CommandContext& ctx);
int RunTune(CommandContext& ctx);
int RunCache(CommandContext& ctx);

}  // namespace kctl
}  // namespace kd

#endif  // KERNELD_CLIENT_KCTL_COMMANDS_H_
