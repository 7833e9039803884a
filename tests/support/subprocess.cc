#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "absl/time/clock.h"

namespace kd {
namespace testing {

Subprocess::Subprocess(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) std::abort();
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
}

Subprocess::~Subprocess() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

std::string Subprocess::ReadLine(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const size_t nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms <= 0) return "";
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return "";
    char buf[4096];
    const ssize_t n = read(out_fd_, buf, sizeof(buf));
    if (n <= 0) return "";
    buffered_.append(buf, n);
  }
}

int Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!exited_) {
    const pid_t r = waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      break;
    }
    if (absl::Now() > deadline) return -1;
    // Drain stdout so a chatty child never blocks on a full pipe.
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, 20) > 0) {
      char buf[4096];
      const ssize_t n = read(out_fd_, buf, sizeof(buf));
      if (n > 0) buffered_.append(buf, n);
    }
  }
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
}

void Subprocess::Kill(int signal) {
  if (!exited_) kill(pid_, signal);
}

std::string Subprocess::Output() {
  char buf[4096];
  for (ssize_t n; (n = read(out_fd_, buf, sizeof(buf))) > 0;) buffered_.append(buf, n);
  return buffered_;
}

std::string RunCommand(const std::vector<std::string>& argv, int* exit_code,
                       absl::Duration timeout) {
  Subprocess p(argv);
  *exit_code = p.Wait(timeout);
  return p.Output();
}

}  // namespace testing
}  // namespace kd
