// kctl tune: tunes shapes given on the command line, in a file, or recorded as misses by the
// daemon, showing progress on stderr and a table of default vs tuned time on stdout.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "client/kctl/commands.h"
#include "client/kctl/tune_format.h"
#include "kerneld/client/status.h"

namespace kd {
namespace kctl {
namespace {

// Ctrl-C (SIGINT) or SIGTERM during a tune cancels the RPC, so the daemon stops tuning within
// one kernel run instead of finishing the shape for a client that is gone. The handler only
// writes to a pipe (async-signal-safe); a thread reads it and cancels the call.
std::atomic<int> g_interrupt_fd{-1};

void OnInterrupt(int sig) {
  const int fd = g_interrupt_fd.load();
  const char c = static_cast<char>(sig);
  if (fd >= 0) (void)!write(fd, &c, 1);
}

class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(grpc::ClientContext* context) {
    if (pipe2(fds_, O_CLOEXEC) != 0) return;
    g_interrupt_fd.store(fds_[1]);
    struct sigaction sa = {};
    sa.sa_handler = OnInterrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
    watcher_ = std::thread([this, context] {
      char c = 0;
      while (read(fds_[0], &c, 1) < 0 && errno == EINTR) {
      }
      if (c != 0) {
        signal_ = c;
        context->TryCancel();
      }
    });
  }
  ~CancelOnInterrupt() {
    if (!watcher_.joinable()) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_interrupt_fd.store(-1);
    const char done = 0;
    (void)!write(fds_[1], &done, 1);
    watcher_.join();
    close(fds_[0]);
    close(fds_[1]);
  }
  // The signal that cancelled the call, or 0.
  int signal() const { return signal_.load(); }

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_int_ = {}, old_term_ = {};
  std::atomic<int> signal_{0};
  std::thread watcher_;
};

}  // namespace

int RunTune(CommandContext& ctx) {
  kerneld::v1::TuneRequest req;
  for (const std::string& word : ctx.args) {
    absl::StatusOr<kerneld::v1::TuneShape> shape = ParseTuneShape(word);
    if (!shape.ok()) {
      *ctx.err << "kctl: tune: " << shape.status().message() << "\n";
      return kExitUsage;
    }
    *req.add_shapes() = *std::move(shape);
  }
  if (ctx.Has("shapes")) {
    std::ifstream in(ctx.options.at("shapes"));
    if (!in) {
      *ctx.err << "kctl: tune: cannot read --shapes=" << ctx.options.at("shapes") << "\n";
      return kExitUsage;
    }
    std::stringstream contents;
    contents << in.rdbuf();
    absl::StatusOr<std::vector<kerneld::v1::TuneShape>> shapes = ParseTuneShapes(contents.str());
    if (!shapes.ok()) {
      *ctx.err << "kctl: tune: " << ctx.options.at("shapes") << ": " << shapes.status().message()
               << "\n";
      return kExitUsage;
    }
    for (auto& s : *shapes) *req.add_shapes() = std::move(s);
  }
  req.set_from_misses(ctx.Has("from_misses"));
  if (req.shapes_size() == 0 && !req.from_misses()) {
    *ctx.err << "kctl: tune: give shapes (nt:4096x7168x2048 ...), --shapes=FILE or "
                "--from_misses\n";
    return kExitUsage;
  }
  if (ctx.Has("budget")) {
    double budget = 0;
    if (!absl::SimpleAtod(ctx.options.at("budget"), &budget) || !(budget > 0)) {
      *ctx.err << "kctl: tune: --budget=" << ctx.options.at("budget")
               << " is not a positive number of seconds\n";
      return kExitUsage;
    }
    req.set_budget_seconds(budget);
  }
  if (ctx.Has("backend")) req.set_backend(ctx.options.at("backend"));
  if (ctx.Has("device")) {
    int device = 0;
    if (!absl::SimpleAtoi(ctx.options.at("device"), &device) || device < 0) {
      *ctx.err << "kctl: tune: --device=" << ctx.options.at("device")
               << " is not a device ordinal\n";
      return kExitUsage;
    }
    req.set_device(device);
  }

  absl::StatusOr<std::unique_ptr<client::AdminClient>> admin = ctx.ConnectAdmin();
  if (!admin.ok()) {
    *ctx.err << "kctl: tune: " << admin.status() << "\n";
    return kExitFailure;
  }
  // No deadline: a tune takes as long as its shapes need (--budget bounds each one).
  grpc::ClientContext context;
  CancelOnInterrupt interrupt(&context);
  std::unique_ptr<grpc::ClientReader<kerneld::v1::TuneProgress>> reader =
      (*admin)->stub()->Tune(&context, req);
  std::vector<kerneld::v1::TuneProgress> results;
  kerneld::v1::TuneProgress p;
  while (reader->Read(&p)) {
    if (p.done()) continue;
    *ctx.err << "\r" << ProgressLine(p) << "   " << std::flush;
    results.push_back(p);
  }
  if (!results.empty()) *ctx.err << "\n";
  const absl::Status status = client::FromGrpcStatus(reader->Finish());
  if (interrupt.signal() != 0) {
    *ctx.err << "kctl: tune: interrupted; the daemon stops tuning within one kernel run ("
             << results.size() << " shapes finished before)\n";
    return 128 + interrupt.signal();
  }
  if (!status.ok()) {
    *ctx.err << "kctl: tune: " << status << "\n";
    return kExitFailure;
  }
  *ctx.out << FormatTuneTable(results);
  for (const auto& r : results) {
    if (!r.error().empty()) return kExitFailure;
  }
  return kExitOk;
}

}  // namespace kctl
}  // namespace kd
