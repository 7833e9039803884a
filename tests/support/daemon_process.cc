#include "tests/support/daemon_process.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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
  if (admin_ == nullptr) {
    // Short, so that polling a daemon that is not up yet polls; its calls get the hang timeout.
    auto probe = client::AdminClient::Connect(admin_socket_, absl::Milliseconds(500));
    if (!probe.ok()) return probe.status();
    auto admin = client::AdminClient::Connect(admin_socket_, kHangTimeout);
    if (!admin.ok()) return admin.status();
    admin_ = *std::move(admin);
  }
  return admin_->Status();
}

bool DaemonProcess::WaitServing(absl::Duration timeout) {
  return WaitFor([&] { return Status().ok() || kill(pid(), 0) != 0; }, timeout,
                 absl::Milliseconds(50)) &&
         admin_ != nullptr;
}

bool DaemonProcess::WaitIdle(absl::Duration timeout) {
  return WaitFor(
      [&] {
        absl::StatusOr<::kerneld::v1::StatusResponse> s = Status();
        if (!s.ok() || s->sessions_active() != 0 || s->buffers_registered() != 0) return false;
        for (const auto& d : s->devices()) {
          if (d.memory_used_bytes() != 0 || d.memory_imported_bytes() != 0) return false;
        }
        return true;
      },
      timeout, absl::Milliseconds(50));
}

int Connections(pid_t pid) {
  // Inodes of listening Unix sockets: /proc/net/unix lines "Num RefCount Protocol Flags Type St
  // Inode [Path]", Flags 00010000 (__SO_ACCEPTCON) on a listener.
  std::vector<std::string> listening;
  std::ifstream table("/proc/net/unix");
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() >= 7 && f[3] == "00010000") listening.push_back(f[6]);
  }
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  char target[256];
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string link = absl::StrCat("/proc/", pid, "/fd/", e->d_name);
    const ssize_t len = readlink(link.c_str(), target, sizeof(target) - 1);
    if (len <= 0) continue;
    absl::string_view t(target, len);
    if (!absl::ConsumePrefix(&t, "socket:[") || !absl::ConsumeSuffix(&t, "]")) continue;
    n += std::find(listening.begin(), listening.end(), std::string(t)) == listening.end();
  }
  closedir(d);
  return n;
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

int OwnThreads(pid_t pid) {
  auto read_line = [](const std::string& path) {
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return line;
  };
  const std::string name = read_line(absl::StrCat("/proc/", pid, "/comm"));
  if (name.empty()) return -1;
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/task").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    n += read_line(absl::StrCat("/proc/", pid, "/task/", e->d_name, "/comm")) == name;
  }
  closedir(d);
  return n;
}

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
