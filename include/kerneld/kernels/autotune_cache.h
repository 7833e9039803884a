// The autotune cache: tuned configs by key, served warm, persisted in a versioned file.
//
// File format (version 1), text, one record a line, fields tab-separated and written with
// TuneKey's %XX escaping (so no field holds a tab or newline):
//   kerneld-autotune-cache<TAB>1
//   kerneld_version<TAB>0.1.0
//   driver_version<TAB>...          ("" on the CPU backend)
//   runtime_version<TAB>...
//   device<TAB>NVIDIA H100 80GB HBM3
//   arch<TAB>sm_90
//   entries<TAB><count>
//   <key><TAB><config><TAB><seconds><TAB><default_seconds><TAB><noise_seconds><TAB><pinned 0|1>
//        <TAB><updated, unix seconds>                                     (count lines)
//   crc32c<TAB><8 lower-case hex digits>
// The checksum is CRC-32C of every byte before the "crc32c" line. A file is valid only when it
// ends with that line and the checksum matches, so a torn file never loads.
//
// Writes go to <path>.tmp, are fsync'ed, renamed over <path>, and the directory is fsync'ed,
// all under an exclusive flock on <path>.lock: a crash (kill -9, power loss after the rename is
// durable) leaves the old file or the new one, never a torn one.
#ifndef KERNELD_KERNELS_AUTOTUNE_CACHE_H_
#define KERNELD_KERNELS_AUTOTUNE_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kerneld/kernels/autotune_key.h"
#include "kerneld/kernels/autotune_space.h"
#include "kerneld/kernels/gemm_config.h"

namespace kd {

constexpr int kCacheFileVersion = 1;

// What a cache file must match to be served on this node.
struct CacheValidators {
  std::string kerneld_version;
  std::string driver_version;
  std::string runtime_version;
  std::string device;
  std::string arch;

  // "" when every field equals `node`'s; else the first differing field, as
  // "driver_version: file has \"535.1\", this node has \"550.2\"".
  std::string Mismatch(const CacheValidators& node) const;
  bool operator==(const CacheValidators& o) const { return Mismatch(o).empty(); }
};

struct CacheEntry {
  TuneKey key;
  std::string config;  // the string form, as stored and listed
  // The typed form of `config`, resolved once by the cache (from options.spaces) when the entry
  // is loaded, put, pinned or imported; std::monostate in a cache without spaces.
  GemmKernelConfig resolved;
  double seconds = 0;          // median of `config` when tuned; 0 for a pin never measured
  double default_seconds = 0;  // median of the heuristic default, same run; 0 if unknown
  double noise_seconds = 0;    // robust noise of `seconds`
  bool pinned = false;         // tuning and import never replace a pinned entry
  int64_t updated_unix = 0;
};

struct CacheFile {
  int version = kCacheFileVersion;
  CacheValidators validators;
  std::vector<CacheEntry> entries;
};

// The file format above.
std::string SerializeCacheFile(const CacheFile& file);
// DATA_LOSS for a file that is truncated or fails its checksum; FAILED_PRECONDITION for another
// format version; INVALID_ARGUMENT for a malformed line (with its line number).
absl::StatusOr<CacheFile> ParseCacheFile(absl::string_view bytes);
// Writes `bytes` to `path` as described above. INTERNAL naming the failed call and path;
// DEADLINE_EXCEEDED when the lock was not had within `lock_timeout`.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes,
                                 absl::Duration lock_timeout = absl::InfiniteDuration());

struct TuneCacheOptions {
  std::string path;            // the cache file; "" keeps the cache in memory only
  CacheValidators validators;  // this node's
  // When set, every entry that is loaded, imported, put or pinned must pass
  // spaces->CheckEntry (a known space, this build's kernel version, a config the kernel parses).
  const ConfigSpaceRegistry* spaces = nullptr;
  size_t max_recorded_misses = 4096;
  // How long Load and Save wait for <path>.lock before DEADLINE_EXCEEDED.
  absl::Duration lock_timeout = absl::Seconds(30);
  // Where notes go (a file set aside, entries dropped). Empty: stderr.
  std::function<void(absl::string_view line)> log;
};

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  size_t entries = 0;
  size_t pinned = 0;
};

struct MissRecord {
  TuneKey key;
  uint64_t count = 0;
};

struct ImportResult {
  uint32_t imported = 0;
  uint32_t rejected = 0;
  std::vector<std::string> reasons;  // "<key>: <why>", at most kMaxImportReasons, then a summary
};
constexpr size_t kMaxImportReasons = 32;

// Thread-safe. Lookups (the request path) take a shared lock; everything else an exclusive one.
class TuneCache {
 public:
  explicit TuneCache(TuneCacheOptions options);
  TuneCache(const TuneCache&) = delete;
  TuneCache& operator=(const TuneCache&) = delete;

  // Replaces the contents with options.path's entries and returns how many were loaded. A
  // missing file loads nothing. A file that fails its checksum, format or validators is renamed
  // to <path>.bad-<unix seconds> with a log line, and the cache starts empty: both are OK, the
  // daemon starts anyway. Entries spaces->CheckEntry refuses are dropped with one log line.
  // Errors: FAILED_PRECONDITION without a path; DEADLINE_EXCEEDED when the lock is not had
  // within options.lock_timeout; INTERNAL when the file exists but cannot be read or set aside.
  absl::StatusOr<size_t> Load();
  // Writes every entry to options.path (see WriteFileAtomically, options.lock_timeout).
  // FAILED_PRECONDITION without a path.
  absl::Status Save() const;

  // The request path: the resolved config for `key` (CacheEntry::resolved) and a counted hit, or
  // nullopt and a counted miss, recording the key (up to max_recorded_misses distinct keys) for
  // later tuning. Parses nothing.
  std::optional<GemmKernelConfig> Lookup(const TuneKey& key);

  // Stores a tuning result. FAILED_PRECONDITION when a pinned entry holds the key (tuning never
  // replaces a pin); INVALID_ARGUMENT/FAILED_PRECONDITION/NOT_FOUND from spaces->CheckEntry.
  // Clears the key's miss record.
  absl::Status Put(CacheEntry entry);
  // Pins `config` for `key`, creating or replacing its entry (an unchanged config keeps its
  // timings). Errors from spaces->CheckEntry.
  absl::Status Pin(const TuneKey& key, absl::string_view config);
  // NOT_FOUND when no entry holds `key`; unpinning an unpinned entry is OK.
  absl::Status Unpin(const TuneKey& key);
  // Removes the entries (pinned ones too only with `include_pinned`); returns how many.
  size_t Clear(bool include_pinned);

  std::optional<CacheEntry> Get(const TuneKey& key) const;
  // Every entry, sorted by key string.
  std::vector<CacheEntry> List() const;
  CacheStats Stats() const;
  // Recorded misses, most frequent first (ties by key string).
  std::vector<MissRecord> Misses() const;

  // The cache as a file (this node's validators), for moving it to an identical node.
  std::string Export() const;
  // Merges a file from Export(). DATA_LOSS/FAILED_PRECONDITION/INVALID_ARGUMENT when it does not
  // parse (nothing imported). Otherwise each entry is imported or rejected with a reason: all of
  // them when the file's validators differ from this node's; an entry whose key names another
  // device or arch, or that spaces->CheckEntry refuses; one whose key a local pin holds.
  absl::StatusOr<ImportResult> Import(absl::string_view bytes);

  const TuneCacheOptions& options() const { return options_; }

 private:
  void Log(absl::string_view line) const;
  // The typed config of an entry this cache may hold, or why not.
  absl::StatusOr<GemmKernelConfig> ResolveEntry(const TuneKey& key, absl::string_view config) const;
  absl::Status SetAside(const std::string& why) const;

  const TuneCacheOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, CacheEntry> entries_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex misses_mu_;
  absl::flat_hash_map<std::string, MissRecord> misses_ ABSL_GUARDED_BY(misses_mu_);
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_count_{0};
};

}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_CACHE_H_
