#include "kerneld/kernels/autotune_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/autotune.h"
#include "kernels/autotune/text.h"

namespace kd {
namespace {

const ConfigSpaceRegistry& Spaces() { return ConfigSpaceRegistry::Builtin(); }

// The typed CPU GEMM config "tn<tile_n>" resolves to.
CpuGemmConfig Tile(int64_t tile_n) {
  CpuGemmConfig c;
  c.tile_n = tile_n;
  return c;
}

DeviceProperties Cpu() {
  DeviceProperties p;
  p.name = "cpu (test)";
  p.arch = "x86_64";
  return p;
}

CacheValidators Node() {
  CacheValidators v;
  v.kerneld_version = "0.1.0";
  v.driver_version = "";
  v.runtime_version = "";
  v.device = "cpu (test)";
  v.arch = "x86_64";
  return v;
}

TuneKey Key(int64_t m, int64_t n = 256, int64_t k = 512) {
  return MakeGemmTuneKey(GemmVariant::kNT, DType::kE4M3FN, DType::kBF16, m, n, k, 1, Cpu(),
                         Spaces().Find("gemm", "nt", "x86_64")->kernel_version);
}

CacheEntry Entry(int64_t m, absl::string_view config) {
  CacheEntry e;
  e.key = Key(m);
  e.config = std::string(config);
  e.seconds = 1e-3 / static_cast<double>(m);
  e.default_seconds = 2e-3;
  e.noise_seconds = 1e-6;
  e.updated_unix = 1700000000;
  return e;
}

// A fresh directory per test, removed with its files.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/kd_autotune_XXXXXX";
    path_ = mkdtemp(&tmpl[0]);
  }
  ~TempDir() {
    for (const std::string& f : Files()) unlink((path_ + "/" + f).c_str());
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    DIR* d = opendir(path_.c_str());
    while (dirent* e = d ? readdir(d) : nullptr) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    if (d) closedir(d);
    return out;
  }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TuneCacheOptions Options(const std::string& path, std::vector<std::string>* log = nullptr) {
  TuneCacheOptions o;
  o.path = path;
  o.validators = Node();
  o.spaces = &Spaces();
  if (log != nullptr) o.log = [log](absl::string_view line) { log->emplace_back(line); };
  return o;
}

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  EXPECT_EQ(autotune_internal::Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(autotune_internal::Crc32c("6789", autotune_internal::Crc32c("12345")), 0xE3069283u);
}

TEST(TuneCacheTest, LookupCountsHitsAndMissesAndRecordsMisses) {
  TuneCache cache(Options(""));
  ASSERT_TRUE(cache.Put(Entry(64, "tn128")).ok());
  EXPECT_EQ(cache.Lookup(Key(64)), std::optional<GemmKernelConfig>(Tile(128)));
  EXPECT_EQ(cache.Lookup(Key(32)), std::nullopt);
  EXPECT_EQ(cache.Lookup(Key(32)), std::nullopt);
  EXPECT_EQ(cache.Lookup(Key(16)), std::nullopt);
  const CacheStats s = cache.Stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.entries, 1u);
  const std::vector<MissRecord> misses = cache.Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[0].key, Key(32));
  EXPECT_EQ(misses[0].count, 2u);
  EXPECT_EQ(misses[1].key, Key(16));
  // Tuning the key clears its miss record.
  ASSERT_TRUE(cache.Put(Entry(32, "tn32")).ok());
  EXPECT_EQ(cache.Misses().size(), 1u);
}

TEST(TuneCacheTest, RecordedMissesAreBounded) {
  TuneCacheOptions o = Options("");
  o.max_recorded_misses = 3;
  TuneCache cache(o);
  for (int m = 1; m <= 10; ++m) cache.Lookup(Key(m));
  EXPECT_EQ(cache.Misses().size(), 3u);
  EXPECT_EQ(cache.Stats().misses, 10u);
}

TEST(TuneCacheTest, SelectConfigServesTheDefaultOnAMissWithoutTuning) {
  TuneCache cache(Options(""));
  ConfigSelection s = SelectConfig(cache, Spaces(), Key(64));
  EXPECT_FALSE(s.hit);
  EXPECT_EQ(s.config, GemmKernelConfig(Tile(64)));
  ASSERT_TRUE(cache.Put(Entry(64, "tn256")).ok());
  s = SelectConfig(cache, Spaces(), Key(64));
  EXPECT_TRUE(s.hit);
  EXPECT_EQ(s.config, GemmKernelConfig(Tile(256)));
}

TEST(TuneCacheTest, PutRefusesEntriesThisNodeCannotServe) {
  TuneCache cache(Options(""));
  CacheEntry e = Entry(64, "bm128.bn128.s6.c1.r8.p0");
  EXPECT_EQ(cache.Put(e).code(), absl::StatusCode::kInvalidArgument);
  e = Entry(64, "tn32");
  e.key.kernel_version += 1;
  EXPECT_EQ(cache.Put(e).code(), absl::StatusCode::kFailedPrecondition);
  e = Entry(64, "tn32");
  e.key.device = "other";
  EXPECT_EQ(cache.Put(e).code(), absl::StatusCode::kFailedPrecondition);
  e = Entry(64, "tn32");
  e.key.variant = "m_grouped_nt";
  e.key.m = 100;  // not in its shape class
  EXPECT_EQ(cache.Put(e).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Stats().entries, 0u);
}

TEST(TuneCacheTest, TuningNeverReplacesAPin) {
  TuneCache cache(Options(""));
  ASSERT_TRUE(cache.Put(Entry(64, "tn128")).ok());
  ASSERT_TRUE(cache.Pin(Key(64), "tn16").ok());
  EXPECT_EQ(cache.Put(Entry(64, "tn256")).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.Lookup(Key(64)), std::optional<GemmKernelConfig>(Tile(16)));
  EXPECT_TRUE(cache.Get(Key(64))->pinned);
  ASSERT_TRUE(cache.Unpin(Key(64)).ok());
  EXPECT_TRUE(cache.Put(Entry(64, "tn256")).ok());
  EXPECT_EQ(cache.Lookup(Key(64)), std::optional<GemmKernelConfig>(Tile(256)));
  EXPECT_EQ(cache.Unpin(Key(99)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.Pin(Key(99), "tn48").code(), absl::StatusCode::kInvalidArgument);
}

// How the tile GEMM runs on an H100 through the daemon: `kctl cache pin KEY tm128.tn128.ts3` pins
// an sm_90 key to a tile config, which the sm_90 space resolves (but never offers as a candidate
// or default); the backend then runs the tile GEMM for that key. Unpinned, the wgmma default.
TEST(TuneCacheTest, APinRunsTheTileGemmOnSm90) {
  DeviceProperties h100;
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.arch = "sm_90";
  TuneCacheOptions o = Options("");
  o.validators.device = h100.name;
  o.validators.arch = h100.arch;
  TuneCache cache(o);
  const TuneKey key =
      MakeGemmTuneKey(GemmVariant::kNT, DType::kE4M3FN, DType::kBF16, 4096, 4096, 4096, 1, h100,
                      Spaces().Find("gemm", "nt", "sm_90")->kernel_version);
  EXPECT_TRUE(std::holds_alternative<GemmConfig>(SelectConfig(cache, Spaces(), key).config));
  ASSERT_TRUE(cache.Pin(key, "tm128.tn128.ts3").ok());
  const ConfigSelection pinned = SelectConfig(cache, Spaces(), key);
  EXPECT_TRUE(pinned.hit);
  EXPECT_EQ(pinned.config, GemmKernelConfig(TileGemmConfig{128, 128, 3}));
  // A tile no build of the kernel has is refused at the pin.
  EXPECT_EQ(cache.Pin(key, "tm256.tn128.ts3").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(cache.Unpin(key).ok());
}

TEST(TuneCacheTest, PinningTheCurrentConfigKeepsItsTimings) {
  TuneCache cache(Options(""));
  ASSERT_TRUE(cache.Put(Entry(64, "tn128")).ok());
  ASSERT_TRUE(cache.Pin(Key(64), "tn128").ok());
  EXPECT_DOUBLE_EQ(cache.Get(Key(64))->default_seconds, 2e-3);
  ASSERT_TRUE(cache.Pin(Key(64), "tn32").ok());
  EXPECT_DOUBLE_EQ(cache.Get(Key(64))->default_seconds, 0);
}

TEST(TuneCacheTest, ClearKeepsPinsUnlessAsked) {
  TuneCache cache(Options(""));
  for (int m = 1; m <= 4; ++m) ASSERT_TRUE(cache.Put(Entry(m, "tn32")).ok());
  ASSERT_TRUE(cache.Pin(Key(2), "tn16").ok());
  EXPECT_EQ(cache.Clear(false), 3u);
  EXPECT_EQ(cache.List().size(), 1u);
  EXPECT_EQ(cache.Clear(true), 1u);
  EXPECT_TRUE(cache.List().empty());
}

TEST(TuneCacheTest, ListIsSortedByKey) {
  TuneCache cache(Options(""));
  for (int m : {30, 1, 200, 7}) ASSERT_TRUE(cache.Put(Entry(m, "tn32")).ok());
  const std::vector<CacheEntry> list = cache.List();
  ASSERT_EQ(list.size(), 4u);
  for (size_t i = 1; i < list.size(); ++i) {
    EXPECT_LT(list[i - 1].key.ToString(), list[i].key.ToString());
  }
}

TEST(TuneCacheTest, ExportImportMovesACacheToAnIdenticalNode) {
  TuneCache source(Options(""));
  for (int m = 1; m <= 20; ++m) ASSERT_TRUE(source.Put(Entry(m, m % 2 ? "tn32" : "tn128")).ok());
  ASSERT_TRUE(source.Pin(Key(5), "tn256").ok());
  TuneCache target(Options(""));
  absl::StatusOr<ImportResult> r = target.Import(source.Export());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->imported, 20u);
  EXPECT_EQ(r->rejected, 0u);
  const std::vector<CacheEntry> a = source.List(), b = target.List();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].key, b[i].key);
    EXPECT_EQ(a[i].config, b[i].config);
    EXPECT_EQ(a[i].seconds, b[i].seconds);  // exact: %.17g round-trips a double
    EXPECT_EQ(a[i].pinned, b[i].pinned);
  }
}

TEST(TuneCacheTest, ImportRefusesEntriesWhoseValidatorsDoNotMatch) {
  TuneCacheOptions other = Options("");
  other.validators.driver_version = "550.54";
  TuneCache source(other);
  ASSERT_TRUE(source.Put(Entry(1, "tn32")).ok());
  ASSERT_TRUE(source.Put(Entry(2, "tn32")).ok());
  TuneCache target(Options(""));
  absl::StatusOr<ImportResult> r = target.Import(source.Export());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->imported, 0u);
  EXPECT_EQ(r->rejected, 2u);
  ASSERT_EQ(r->reasons.size(), 1u);
  EXPECT_TRUE(absl::StrContains(r->reasons[0], "driver_version")) << r->reasons[0];
  EXPECT_TRUE(target.List().empty());
}

TEST(TuneCacheTest, ImportRejectsStaleOrForeignEntriesAndRespectsLocalPins) {
  CacheFile file;
  file.validators = Node();
  file.entries.push_back(Entry(1, "tn32"));
  CacheEntry stale = Entry(2, "tn32");
  stale.key.kernel_version += 1;
  file.entries.push_back(stale);
  CacheEntry foreign = Entry(3, "tn32");
  foreign.key.device = "cpu (other)";
  file.entries.push_back(foreign);
  file.entries.push_back(Entry(4, "tn128"));
  TuneCache target(Options(""));
  ASSERT_TRUE(target.Pin(Key(4), "tn16").ok());
  absl::StatusOr<ImportResult> r = target.Import(SerializeCacheFile(file));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->imported, 1u);
  EXPECT_EQ(r->rejected, 3u);
  ASSERT_EQ(r->reasons.size(), 3u);
  EXPECT_TRUE(absl::StrContains(r->reasons[0], "kernel version")) << r->reasons[0];
  EXPECT_TRUE(absl::StrContains(r->reasons[1], "cpu (other)")) << r->reasons[1];
  EXPECT_TRUE(absl::StrContains(r->reasons[2], "pinned")) << r->reasons[2];
  EXPECT_EQ(target.Lookup(Key(4)), std::optional<GemmKernelConfig>(Tile(16)));
}

TEST(TuneCacheTest, ImportOfAFileThatDoesNotParseImportsNothing) {
  TuneCache target(Options(""));
  EXPECT_EQ(target.Import("hello").status().code(), absl::StatusCode::kInvalidArgument);
  std::string bytes = TuneCache(Options("")).Export();
  bytes[bytes.size() / 2] ^= 1;
  EXPECT_EQ(target.Import(bytes).status().code(), absl::StatusCode::kDataLoss);
}

TEST(CacheFileTest, ParseErrorsHaveSpecificCodes) {
  CacheFile file;
  file.validators = Node();
  file.entries = {Entry(1, "tn32"), Entry(2, "tn64")};
  const std::string good = SerializeCacheFile(file);
  ASSERT_TRUE(ParseCacheFile(good).ok());
  // Every strict prefix is torn: none may parse.
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(ParseCacheFile(good.substr(0, cut)).ok()) << cut;
  }
  EXPECT_EQ(ParseCacheFile(good.substr(0, good.size() - 1)).status().code(),
            absl::StatusCode::kDataLoss);
  std::string flipped = good;
  flipped[good.find("tn64")] = 'x';
  EXPECT_EQ(ParseCacheFile(flipped).status().code(), absl::StatusCode::kDataLoss);
  file.version = 2;
  EXPECT_EQ(ParseCacheFile(SerializeCacheFile(file)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParseCacheFile("not a cache\n").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CacheFileTest, AMalformedLineWithAValidChecksumIsInvalidArgument) {
  std::string body = absl::StrCat(
      "kerneld-autotune-cache\t1\nkerneld_version\t0.1.0\ndriver_version\t\nruntime_version\t\n"
      "device\tcpu (test)\narch\tx86_64\nentries\t1\n",
      Key(1).ToString(), "\ttn32\tfast\t0\t0\t0\t0\n");
  body += absl::StrFormat("crc32c\t%08x\n", autotune_internal::Crc32c(body));
  absl::Status s = ParseCacheFile(body).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "line 8")) << s;
}

TEST(TuneCacheFileTest, SaveThenLoadRestoresEveryEntry) {
  TempDir dir;
  const std::string path = dir.path() + "/autotune.cache";
  TuneCache a(Options(path));
  for (int m = 1; m <= 50; ++m) ASSERT_TRUE(a.Put(Entry(m, "tn128")).ok());
  ASSERT_TRUE(a.Pin(Key(7), "tn16").ok());
  ASSERT_TRUE(a.Save().ok());
  TuneCache b(Options(path));
  absl::StatusOr<size_t> n = b.Load();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 50u);
  EXPECT_EQ(b.Export(), a.Export());
  EXPECT_TRUE(b.Get(Key(7))->pinned);
  // The loaded entries are resolved once, at load: a lookup serves the typed config.
  EXPECT_EQ(b.Get(Key(7))->resolved, GemmKernelConfig(Tile(16)));
  EXPECT_EQ(b.Lookup(Key(8)), std::optional<GemmKernelConfig>(Tile(128)));
  // Only the file and its lock remain: the temp file was renamed.
  std::vector<std::string> files = dir.Files();
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"autotune.cache", "autotune.cache.lock"}));
}

TEST(TuneCacheFileTest, ALockHeldElsewhereTimesOutWithAClearError) {
  TempDir dir;
  const std::string path = dir.path() + "/autotune.cache";
  // Another holder: flock locks belong to an open file, so a second open conflicts even here.
  const int held = open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  TuneCacheOptions o = Options(path);
  o.lock_timeout = absl::Milliseconds(200);
  TuneCache cache(o);
  // The lock stays held while Load runs: that it returns at all means it gave up by itself. The
  // minute only keeps a Load that waits for the lock from hanging the suite.
  const absl::Time start = absl::Now();
  std::future<absl::StatusOr<size_t>> load =
      std::async(std::launch::async, [&cache] { return cache.Load(); });
  const bool returned = load.wait_for(std::chrono::minutes(1)) == std::future_status::ready;
  const absl::Duration took = absl::Now() - start;
  if (!returned) close(held);  // lets it finish
  ASSERT_TRUE(returned) << "Load still waits for the lock after a minute (timeout 200ms)";
  const absl::StatusOr<size_t> n = load.get();
  EXPECT_EQ(n.status().code(), absl::StatusCode::kDeadlineExceeded) << n.status();
  EXPECT_TRUE(absl::StrContains(n.status().message(), path + ".lock within 200ms")) << n.status();
  EXPECT_GE(took, absl::Milliseconds(200)) << "it gave up before its timeout";
  EXPECT_EQ(cache.Save().code(), absl::StatusCode::kDeadlineExceeded);
  close(held);
  EXPECT_TRUE(cache.Load().ok());
  EXPECT_TRUE(cache.Save().ok());
}

TEST(TuneCacheFileTest, MissingFileLoadsEmpty) {
  TempDir dir;
  TuneCache cache(Options(dir.path() + "/none.cache"));
  absl::StatusOr<size_t> n = cache.Load();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(TuneCache(Options("")).Load().status().code(), absl::StatusCode::kFailedPrecondition);
}

// A damaged file is set aside as *.bad-<time> with a log line, and the cache starts empty.
void ExpectSetAside(const std::string& bytes, absl::string_view why) {
  TempDir dir;
  const std::string path = dir.path() + "/autotune.cache";
  WriteAll(path, bytes);
  std::vector<std::string> log;
  TuneCache cache(Options(path, &log));
  ASSERT_TRUE(cache.Put(Entry(1, "tn32")).ok());
  absl::StatusOr<size_t> n = cache.Load();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
  EXPECT_TRUE(cache.List().empty());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_TRUE(absl::StrContains(log[0], "set aside")) << log[0];
  EXPECT_TRUE(absl::StrContains(log[0], why)) << log[0];
  int bad = 0;
  for (const std::string& f : dir.Files()) {
    if (absl::StartsWith(f, "autotune.cache.bad-")) {
      ++bad;
      EXPECT_EQ(ReadAll(dir.path() + "/" + f), bytes);
    }
  }
  EXPECT_EQ(bad, 1);
  EXPECT_EQ(access(path.c_str(), F_OK), -1);
  // And the daemon carries on: the next save writes a good file.
  ASSERT_TRUE(cache.Put(Entry(2, "tn32")).ok());
  ASSERT_TRUE(cache.Save().ok());
  EXPECT_EQ(*TuneCache(Options(path)).Load(), 1u);
}

TEST(TuneCacheFileTest, ChecksumFailureIsSetAside) {
  TuneCache source(Options(""));
  ASSERT_TRUE(source.Put(Entry(1, "tn32")).ok());
  std::string bytes = source.Export();
  bytes[bytes.find("tn32")] = 'T';
  ExpectSetAside(bytes, "checksum");
}

TEST(TuneCacheFileTest, TruncatedFileIsSetAside) {
  TuneCache source(Options(""));
  ASSERT_TRUE(source.Put(Entry(1, "tn32")).ok());
  const std::string bytes = source.Export();
  ExpectSetAside(bytes.substr(0, bytes.size() - 5), "truncated");
}

TEST(TuneCacheFileTest, ValidatorMismatchIsSetAside) {
  TuneCacheOptions other = Options("");
  other.validators.kerneld_version = "0.0.9";
  TuneCache source(other);
  ExpectSetAside(source.Export(), "kerneld_version");
}

TEST(TuneCacheFileTest, UnknownFormatVersionIsSetAside) {
  CacheFile file;
  file.version = 9;
  file.validators = Node();
  ExpectSetAside(SerializeCacheFile(file), "version 9");
}

TEST(TuneCacheFileTest, EntriesThisBuildCannotServeAreDroppedOnLoad) {
  TempDir dir;
  const std::string path = dir.path() + "/autotune.cache";
  CacheFile file;
  file.validators = Node();
  file.entries = {Entry(1, "tn32"), Entry(2, "tn32")};
  file.entries[1].key.kernel_version += 1;
  WriteAll(path, SerializeCacheFile(file));
  std::vector<std::string> log;
  TuneCache cache(Options(path, &log));
  EXPECT_EQ(*cache.Load(), 1u);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_TRUE(absl::StrContains(log[0], "dropped 1")) << log[0];
  EXPECT_EQ(access(path.c_str(), F_OK), 0);  // the file itself is fine: not set aside
}

// CPU time of the calling thread: what a load costs, whatever else the machine runs (time spent
// preempted does not count; Load runs on the caller's thread).
absl::Duration ThreadCpuTime() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

// The cheapest of `tries` loads of a cache file of `entries` entries, in CPU time.
absl::Duration CheapestLoad(const std::string& dir, int entries, int tries) {
  const std::string path = absl::StrCat(dir, "/autotune-", entries, ".cache");
  CacheFile file;
  file.validators = Node();
  for (int m = 1; m <= entries; ++m) file.entries.push_back(Entry(m, m % 3 ? "tn128" : "tn32"));
  EXPECT_TRUE(WriteFileAtomically(path, SerializeCacheFile(file)).ok());
  absl::Duration cheapest = absl::InfiniteDuration();
  for (int i = 0; i < tries; ++i) {
    TuneCache cache(Options(path));
    const absl::Duration start = ThreadCpuTime();
    absl::StatusOr<size_t> n = cache.Load();
    cheapest = std::min(cheapest, ThreadCpuTime() - start);
    EXPECT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(n.value_or(0), static_cast<size_t>(entries));
    EXPECT_EQ(cache.Lookup(Key(entries)),
              std::optional<GemmKernelConfig>(Tile(entries % 3 ? 128 : 32)));
  }
  return cheapest;
}

TEST(TuneCacheFileTest, LoadingTakesTimeLinearInTheEntries) {
  TempDir dir;
  // The same build on the same machine in the same minute: only the entry count differs.
  const absl::Duration small = CheapestLoad(dir.path(), 500, 5);
  const absl::Duration large = CheapestLoad(dir.path(), 5000, 5);
  RecordProperty("load_500_us", static_cast<int>(absl::ToInt64Microseconds(small)));
  RecordProperty("load_5000_us", static_cast<int>(absl::ToInt64Microseconds(large)));
  // Ten times the entries: linear is 10x, quadratic 100x; 40x leaves room for a larger file
  // falling out of the caches and for caches another process emptied.
  EXPECT_LT(large, 40 * small) << "500 entries: " << small << ", 5000: " << large;
}

TEST(TuneCacheTest, ConcurrentLookupsPutsAndPinsAreSafe) {
  TuneCache cache(Options(""));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 2000; ++i) {
        const int m = 1 + (i * 7 + t) % 97;
        switch ((i + t) % 4) {
          case 0:
            (void)cache.Put(Entry(m, "tn32"));
            break;
          case 1:
            (void)cache.Pin(Key(m), "tn16");
            break;
          case 2:
            (void)cache.Unpin(Key(m));
            break;
          default:
            cache.Lookup(Key(m));
            break;
        }
      }
    });
  }
  for (int i = 0; i < 2000; ++i) cache.Lookup(Key(1 + i % 97));
  for (std::thread& th : threads) th.join();
  const CacheStats s = cache.Stats();
  EXPECT_EQ(s.hits + s.misses, 4u * 500u + 2000u);
  EXPECT_LE(s.entries, 97u);
}

}  // namespace
}  // namespace kd
