// Kill -9 at any point of a cache write leaves the old file or the new one, never a torn one.
// A writer process saves generation after generation; the test SIGKILLs it at random moments,
// then loads the file: it must pass its checksum and validators (nothing set aside) and hold
// exactly one generation, the last one the writer finished or the one it had begun.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/kernels/autotune/cache_writer_common.h"

namespace kd {
namespace {

// At least kKills kills, and more (up to kMaxKills) until kMinMidWrite of them landed inside a
// save: the count holds however slowly a loaded machine runs the writer.
constexpr int kKills = 60;
constexpr int kMaxKills = 400;
constexpr int kMinMidWrite = 12;

struct WriterReport {
  int64_t last_begun = -1;
  int64_t last_ended = -1;
};

// Starts the writer, waits for its first line (it has started its save loop: the delay is not
// spent on exec and start-up), kills it `delay_us` later, and returns what it reported.
WriterReport KillWriterAfter(const std::string& path, int64_t first_generation, int delay_us) {
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  const std::string first = absl::StrCat(first_generation);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execl(KD_CACHE_WRITER, KD_CACHE_WRITER, path.c_str(), first.c_str(), nullptr);
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string out;
  char buf[4096];
  pollfd p = {pipe_fds[0], POLLIN, 0};
  if (poll(&p, 1, 30000) == 1) {
    const ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
    if (n > 0) out.append(buf, n);
  }
  EXPECT_FALSE(out.empty()) << "the writer said nothing in 30 s";
  usleep(delay_us);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the writer exited on its own with status " << status;
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  close(pipe_fds[0]);
  WriterReport run;
  std::istringstream lines(out);
  std::string tag;
  int64_t g;
  while (lines >> tag >> g) (tag == "b" ? run.last_begun : run.last_ended) = g;
  return run;
}

TEST(AutotuneCrashTest, KillNineDuringWritesNeverLeavesATornFile) {
  char tmpl[] = "/tmp/kd_autotune_crash_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/autotune.cache";
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> delay(0, 40000);

  int64_t on_disk = -1;  // the generation the file holds; -1: no file yet
  int killed_mid_write = 0;
  std::set<int64_t> generations_seen;
  int kills = 0;
  for (int i = 0; i < kMaxKills && (i < kKills || killed_mid_write < kMinMidWrite); ++i) {
    ++kills;
    const int64_t first = int64_t{i + 1} * 1000000;
    const WriterReport run = KillWriterAfter(path, first, delay(rng));

    std::vector<std::string> log;
    TuneCacheOptions options;
    options.path = path;
    options.validators = crash_test::Validators();
    options.log = [&log](absl::string_view line) { log.emplace_back(line); };
    TuneCache cache(options);
    absl::StatusOr<size_t> n = cache.Load();
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_TRUE(log.empty()) << "kill " << i << ": " << log[0];

    // The old file (from before this writer, or its last finished save) or the one it began.
    std::set<int64_t> allowed = {run.last_ended >= first ? run.last_ended : on_disk};
    if (run.last_begun >= first) allowed.insert(run.last_begun);
    if (run.last_begun > run.last_ended) ++killed_mid_write;

    int64_t loaded = -1;
    if (*n > 0) {
      const std::vector<CacheEntry> entries = cache.List();
      const std::string& config = entries.front().config;
      loaded = std::strtoll(config.c_str() + 1, nullptr, 10);
      for (const CacheEntry& e : entries) ASSERT_EQ(e.config, config) << "kill " << i;
      ASSERT_EQ(static_cast<int>(entries.size()), crash_test::EntryCount(loaded)) << "kill " << i;
    }
    ASSERT_EQ(allowed.count(loaded), 1u)
        << "kill " << i << ": loaded generation " << loaded << ", writer began " << run.last_begun
        << " and finished " << run.last_ended << ", before it " << on_disk;
    on_disk = loaded;
    generations_seen.insert(loaded);
  }
  RecordProperty("killed_mid_write", killed_mid_write);
  std::printf("%d of %d kills landed between the start and the end of a save\n", killed_mid_write,
              kills);
  // The delays span several saves, so about half the kills land inside one; a dozen is enough
  // for the test to mean something.
  EXPECT_GE(killed_mid_write, kMinMidWrite);
  EXPECT_GT(generations_seen.size(), 1u);

  for (const char* f : {"autotune.cache", "autotune.cache.tmp", "autotune.cache.lock"}) {
    unlink((dir + "/" + f).c_str());
  }
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace kd
