// Test support: child processes with their stdout captured, killed on destruction.
#ifndef KERNELD_TESTS_SUPPORT_SUBPROCESS_H_
#define KERNELD_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace kd {
namespace testing {

class Subprocess {
 public:
  // Starts argv[0] with `argv`; stdout is a pipe read by ReadLine/WaitForExit, stderr is the
  // test's.
  explicit Subprocess(const std::vector<std::string>& argv);
  ~Subprocess();  // SIGKILLs the child if it still runs
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // The next line of stdout (without '\n'), or "" at EOF or after `timeout`.
  std::string ReadLine(absl::Duration timeout);
  // Waits for exit; returns the exit code, 128+signal when killed, -1 on timeout.
  int Wait(absl::Duration timeout);
  void Kill(int signal);
  // All stdout read so far plus what remains until EOF (call after Wait).
  std::string Output();

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffered_;
  bool exited_ = false;
  int status_ = 0;
};

// Runs a command to completion (at most `timeout`) and returns its stdout; `exit_code` gets the
// exit status.
std::string RunCommand(const std::vector<std::string>& argv, int* exit_code,
                       absl::Duration timeout = absl::Seconds(30));

}  // namespace testing
}  // namespace kd

#endif  // KERNELD_TESTS_SUPPORT_SUBPROCESS_H_
