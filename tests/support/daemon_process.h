// Test support: the real kerneld binary in a child process, and what /proc says about it.
#ifndef KERNELD_TESTS_SUPPORT_DAEMON_PROCESS_H_
#define KERNELD_TESTS_SUPPORT_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kerneld/client/admin_client.h"
#include "kerneld/v1/kerneld.pb.h"
#include "tests/support/subprocess.h"
#include "tests/support/wait.h"

namespace kd {
namespace testing {

// kerneld on "<dir>/kerneld.sock" (and its ".fd" socket) and "<dir>/admin.sock", CPU backend,
// no metrics unless `args` says otherwise. Its stderr is merged into the Subprocess's stdout.
//
// Status calls share one admin connection, kept open from the first that answers: the daemon
// then holds exactly one connection of the test's (Connections() == 1 once every client is
// gone), not a connection per call that it is still closing when the test counts descriptors.
class DaemonProcess {
 public:
  DaemonProcess(const std::string& kerneld, const std::string& dir,
                const std::vector<std::string>& args = {});

  // Polls the admin socket until Status answers; false when `timeout` passed or the process
  // exited first.
  bool WaitServing(absl::Duration timeout = kHangTimeout);
  absl::StatusOr<::kerneld::v1::StatusResponse> Status() const;
  // Polls Status until no session and no buffer is left and the pool and imported memory are
  // back to zero; false after `timeout`.
  bool WaitIdle(absl::Duration timeout = kHangTimeout);

  pid_t pid() const { return process_->pid(); }
  Subprocess& process() { return *process_; }
  const std::string& data_socket() const { return data_socket_; }
  const std::string& admin_socket() const { return admin_socket_; }

 private:
  std::string data_socket_, admin_socket_;
  std::unique_ptr<Subprocess> process_;
  mutable std::unique_ptr<client::AdminClient> admin_;  // once connected
};

// From /proc/<pid>: open descriptors, threads, resident KiB (-1 when unreadable).
int OpenFds(pid_t pid);
// The connected Unix sockets among `pid`'s descriptors (its listening ones left out, from
// /proc/net/unix): the connections a daemon holds.
int Connections(pid_t pid);
int Threads(pid_t pid);
// Threads of `pid` named as the process itself: those its own threads started (a new thread
// takes its creator's name), not gRPC's pools, whose threads gRPC names.
int OwnThreads(pid_t pid);
int64_t ResidentKiB(pid_t pid);
// Mappings of pool memfds ("/memfd:kerneld-pool") in the process.
int PoolMappings(pid_t pid);
// Entry names of /dev/shm.
std::vector<std::string> DevShmNames();

}  // namespace testing
}  // namespace kd

#endif  // KERNELD_TESTS_SUPPORT_DAEMON_PROCESS_H_
