#include "tests/support/daemon_process.h"

#include <dirent.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "kerneld/client/admin_client.h"

namespace kd {
namespace testing {

DaemonProcess::DaemonProcess(const std::string& kerneld, const std::string& dir,
                             const std::vector<std::string>& args)
    : data_socket_(dir + "/kerneld.sock"), admin_socket_(dir + "/admin.sock") {
  std::vector<std::string> argv = {"/bin/sh",
                                   "-c",
                                   "exec \"$0\" \"$@\" 2>&1",
                                   kerneld,
                                   "--socket=" + data_socket_,
                                   "--admin_socket=" + admin_socket_,
                                   "--backend=cpu",
                                   "--cpu_threads=2",
                                   "--metrics_address="};
  argv.insert(argv.end(), args.begin(), args.end());
  process_ = std::make_unique<Subprocess>(argv);
}

absl::StatusOr<::kerneld::v1::StatusResponse> DaemonProcess::Status() const {
  auto admin = client::AdminClient::Connect(admin_socket_, absl::Milliseconds(500));
  if (!admin.ok()) return admin.status();
  return (*admin)->Status();
}

bool DaemonProcess::WaitServing(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Status().ok()) return true;
    if (kill(pid(), 0) != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool DaemonProcess::WaitIdle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<::kerneld::v1::StatusResponse> s = Status();
    if (s.ok() && s->sessions_active() == 0 && s->buffers_registered() == 0) {
      bool memory_settled = true;
      for (const auto& d : s->devices()) {
        memory_settled =
            memory_settled && d.memory_used_bytes() == 0 && d.memory_imported_bytes() == 0;
      }
      if (memory_settled) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int OpenFds(pid_t pid) {
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

namespace {

int64_t StatusField(pid_t pid, absl::string_view field) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(f, line);) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, field) || !absl::ConsumePrefix(&rest, ":")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, " kB");
    int64_t v = 0;
    return absl::SimpleAtoi(rest, &v) ? v : -1;
  }
  return -1;
}

}  // namespace

int Threads(pid_t pid) { return static_cast<int>(StatusField(pid, "Threads")); }

int64_t ResidentKiB(pid_t pid) { return StatusField(pid, "VmRSS"); }

int PoolMappings(pid_t pid) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    n += line.find("/memfd:kerneld-pool") != std::string::npos;
  }
  return n;
}

std::vector<std::string> DevShmNames() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

}  // namespace testing
}  // namespace kd
