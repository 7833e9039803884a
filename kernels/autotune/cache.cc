#include <stdio.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "kerneld/kernels/autotune_cache.h"
#include "kerneld/kernels/client_string.h"
#include "kernels/autotune/file_io.h"
#include "kernels/autotune/text.h"

namespace kd {
namespace {

using autotune_internal::Crc32c;

constexpr absl::string_view kMagic = "kerneld-autotune-cache";
constexpr absl::string_view kChecksumTag = "crc32c\t";
constexpr size_t kEntryFields = 7;

int64_t NowUnix() { return static_cast<int64_t>(time(nullptr)); }

// Yields the lines of a text, without their '\n'.
class LineReader {
 public:
  explicit LineReader(absl::string_view text) : text_(text) {}
  bool Next(absl::string_view& line) {
    if (pos_ >= text_.size()) return false;
    const size_t end = text_.find('\n', pos_);
    const size_t stop = end == absl::string_view::npos ? text_.size() : end;
    line = text_.substr(pos_, stop - pos_);
    pos_ = stop + 1;
    ++number_;
    return true;
  }
  int number() const { return number_; }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
  int number_ = 0;
};

absl::Status BadLine(int number, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("cache file line ", number, ": ", why));
}

// "name<TAB>value" with the value unescaped.
absl::StatusOr<std::string> HeaderValue(LineReader& lines, absl::string_view name) {
  absl::string_view line;
  if (!lines.Next(line)) return BadLine(lines.number() + 1, absl::StrCat("missing ", name));
  const size_t tab = line.find('\t');
  if (tab == absl::string_view::npos || line.substr(0, tab) != name) {
    return BadLine(lines.number(), absl::StrCat("want \"", name, "<TAB>value\""));
  }
  return UnescapeKeyField(line.substr(tab + 1), name);
}

absl::StatusOr<CacheEntry> ParseEntry(absl::string_view line, int number) {
  const std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
  if (f.size() != kEntryFields) {
    return BadLine(number, absl::StrCat("has ", f.size(), " fields, want ", kEntryFields));
  }
  CacheEntry e;
  absl::StatusOr<TuneKey> key = ParseTuneKey(f[0]);
  if (!key.ok()) return BadLine(number, key.status().message());
  e.key = *std::move(key);
  absl::StatusOr<std::string> config = UnescapeKeyField(f[1], "config");
  if (!config.ok()) return BadLine(number, config.status().message());
  if (config->empty()) return BadLine(number, "config is empty");
  e.config = *std::move(config);
  if (!absl::SimpleAtod(f[2], &e.seconds) || !absl::SimpleAtod(f[3], &e.default_seconds) ||
      !absl::SimpleAtod(f[4], &e.noise_seconds) || (f[5] != "0" && f[5] != "1") ||
      !absl::SimpleAtoi(f[6], &e.updated_unix)) {
    return BadLine(number, "seconds, default_seconds, noise, pinned (0|1) or updated do not parse");
  }
  e.pinned = f[5] == "1";
  return e;
}

void AppendHeader(std::string& out, absl::string_view name, absl::string_view value) {
  absl::StrAppend(&out, name, "\t");
  AppendKeyEscaped(out, value);
  out.push_back('\n');
}

std::string Truncated(absl::string_view text, size_t max) {
  return text.size() <= max ? std::string(text) : absl::StrCat(text.substr(0, max), "...");
}

}  // namespace

std::string CacheValidators::Mismatch(const CacheValidators& node) const {
  const std::pair<const char*, std::pair<const std::string*, const std::string*>> fields[] = {
      {"kerneld_version", {&kerneld_version, &node.kerneld_version}},
      {"driver_version", {&driver_version, &node.driver_version}},
      {"runtime_version", {&runtime_version, &node.runtime_version}},
      {"device", {&device, &node.device}},
      {"arch", {&arch, &node.arch}},
  };
  for (const auto& [name, values] : fields) {
    if (*values.first != *values.second) {
      return absl::StrCat(name, ": file has \"", *values.first, "\", this node has \"",
                          *values.second, "\"");
    }
  }
  return "";
}

std::string SerializeCacheFile(const CacheFile& file) {
  std::string out;
  out.reserve(256 + file.entries.size() * 160);
  absl::StrAppend(&out, kMagic, "\t", file.version, "\n");
  AppendHeader(out, "kerneld_version", file.validators.kerneld_version);
  AppendHeader(out, "driver_version", file.validators.driver_version);
  AppendHeader(out, "runtime_version", file.validators.runtime_version);
  AppendHeader(out, "device", file.validators.device);
  AppendHeader(out, "arch", file.validators.arch);
  absl::StrAppend(&out, "entries\t", file.entries.size(), "\n");
  for (const CacheEntry& e : file.entries) {
    out += e.key.ToString();
    out.push_back('\t');
    AppendKeyEscaped(out, e.config);
    absl::StrAppendFormat(&out, "\t%.17g\t%.17g\t%.17g\t%d\t%d\n", e.seconds, e.default_seconds,
                          e.noise_seconds, e.pinned ? 1 : 0, e.updated_unix);
  }
  absl::StrAppendFormat(&out, "%s%08x\n", kChecksumTag, Crc32c(out));
  return out;
}

absl::StatusOr<CacheFile> ParseCacheFile(absl::string_view bytes) {
  LineReader lines(bytes);
  absl::string_view line;
  if (!lines.Next(line) || !absl::StartsWith(line, absl::StrCat(kMagic, "\t"))) {
    return absl::InvalidArgumentError("not a kerneld autotune cache file (bad first line)");
  }
  CacheFile file;
  if (!absl::SimpleAtoi(line.substr(kMagic.size() + 1), &file.version)) {
    return BadLine(1, "the format version is not an integer");
  }
  if (file.version != kCacheFileVersion) {
    return absl::FailedPreconditionError(absl::StrCat("cache file format version ", file.version,
                                                      " is not the supported ", kCacheFileVersion));
  }
  // The checksum line is the last; a file cut anywhere lacks it or fails it.
  if (bytes.empty() || bytes.back() != '\n') {
    return absl::DataLossError("cache file is truncated (no final newline)");
  }
  const size_t last = bytes.rfind('\n', bytes.size() - 2);
  const size_t crc_start = last == absl::string_view::npos ? 0 : last + 1;
  const absl::string_view crc_line = bytes.substr(crc_start, bytes.size() - 1 - crc_start);
  uint32_t stored = 0;
  if (!absl::StartsWith(crc_line, kChecksumTag) || crc_line.size() != kChecksumTag.size() + 8 ||
      !absl::SimpleHexAtoi(crc_line.substr(kChecksumTag.size()), &stored)) {
    return absl::DataLossError("cache file is truncated (no checksum line)");
  }
  const absl::string_view payload = bytes.substr(0, crc_start);
  const uint32_t actual = Crc32c(payload);
  if (actual != stored) {
    return absl::DataLossError(absl::StrFormat(
        "cache file checksum %08x does not match its contents (%08x)", stored, actual));
  }

  LineReader body(payload);
  body.Next(line);  // the first line, checked above
  struct {
    const char* name;
    std::string* value;
  } headers[] = {{"kerneld_version", &file.validators.kerneld_version},
                 {"driver_version", &file.validators.driver_version},
                 {"runtime_version", &file.validators.runtime_version},
                 {"device", &file.validators.device},
                 {"arch", &file.validators.arch}};
  for (auto& h : headers) {
    absl::StatusOr<std::string> v = HeaderValue(body, h.name);
    if (!v.ok()) return v.status();
    *h.value = *std::move(v);
  }
  absl::StatusOr<std::string> count_text = HeaderValue(body, "entries");
  if (!count_text.ok()) return count_text.status();
  size_t count = 0;
  if (!absl::SimpleAtoi(*count_text, &count)) {
    return BadLine(body.number(), "entries is not a count");
  }
  file.entries.reserve(std::min<size_t>(count, 1 << 20));
  for (size_t i = 0; i < count; ++i) {
    if (!body.Next(line)) {
      return BadLine(body.number() + 1, absl::StrCat("entries says ", count, ", found ", i));
    }
    absl::StatusOr<CacheEntry> e = ParseEntry(line, body.number());
    if (!e.ok()) return e.status();
    file.entries.push_back(*std::move(e));
  }
  if (body.Next(line)) return BadLine(body.number(), "more lines than entries says");
  return file;
}

TuneCache::TuneCache(TuneCacheOptions options) : options_(std::move(options)) {}

void TuneCache::Log(absl::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    fprintf(stderr, "kerneld autotune: %.*s\n", static_cast<int>(line.size()), line.data());
  }
}

absl::StatusOr<GemmKernelConfig> TuneCache::ResolveEntry(const TuneKey& key,
                                                         absl::string_view config) const {
  if (key.device != options_.validators.device || key.arch != options_.validators.arch) {
    return absl::FailedPreconditionError(
        absl::StrCat("key is for device \"", key.device, "\" (", key.arch, "), this node is \"",
                     options_.validators.device, "\" (", options_.validators.arch, ")"));
  }
  if (!IsClassed(key)) {
    return absl::InvalidArgumentError("key shape is not in its shape class (see autotune_key.h)");
  }
  if (config.empty()) return absl::InvalidArgumentError("config is empty");
  if (options_.spaces != nullptr) return options_.spaces->Resolve(key, config);
  return GemmKernelConfig();
}

absl::Status TuneCache::SetAside(const std::string& why) const {
  std::string bad = absl::StrCat(options_.path, ".bad-", NowUnix());
  struct stat st;
  for (int i = 1; stat(bad.c_str(), &st) == 0; ++i) {
    bad = absl::StrCat(options_.path, ".bad-", NowUnix(), "-", i);
  }
  if (rename(options_.path.c_str(), bad.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot set aside ", options_.path, " (", why,
                                            "): rename: ", autotune_internal::ErrnoText()));
  }
  Log(absl::StrCat("cache file ", options_.path, " set aside as ", bad, ": ", why,
                   "; starting with an empty cache"));
  return absl::OkStatus();
}

absl::StatusOr<size_t> TuneCache::Load() {
  if (options_.path.empty()) return absl::FailedPreconditionError("the cache has no file path");
  absl::StatusOr<autotune_internal::FileLock> lock =
      autotune_internal::FileLock::Acquire(options_.path + ".lock", options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<std::optional<std::string>> bytes =
      autotune_internal::ReadFileIfExists(options_.path);
  if (!bytes.ok()) return bytes.status();

  absl::flat_hash_map<std::string, CacheEntry> loaded;
  if (bytes->has_value()) {
    absl::StatusOr<CacheFile> file = ParseCacheFile(**bytes);
    std::string why;
    if (!file.ok()) {
      why = file.status().ToString();
    } else {
      const std::string mismatch = file->validators.Mismatch(options_.validators);
      if (!mismatch.empty()) why = absl::StrCat("validators differ: ", mismatch);
    }
    if (!why.empty()) {
      const absl::Status s = SetAside(why);
      if (!s.ok()) return s;
    } else {
      size_t dropped = 0;
      std::string first_reason;
      for (CacheEntry& e : file->entries) {
        absl::StatusOr<GemmKernelConfig> resolved = ResolveEntry(e.key, e.config);
        if (!resolved.ok()) {
          if (dropped++ == 0) {
            first_reason = absl::StrCat(e.key.ToString(), ": ", resolved.status().message());
          }
          continue;
        }
        e.resolved = *resolved;
        std::string k = e.key.ToString();
        loaded.insert_or_assign(std::move(k), std::move(e));
      }
      if (dropped > 0) {
        Log(absl::StrCat("cache file ", options_.path, ": dropped ", dropped,
                         " entries this build cannot serve (first: ", first_reason, ")"));
      }
    }
  }
  const size_t n = loaded.size();
  absl::MutexLock l(&mu_);
  entries_ = std::move(loaded);
  return n;
}

absl::Status TuneCache::Save() const {
  if (options_.path.empty()) return absl::FailedPreconditionError("the cache has no file path");
  return WriteFileAtomically(options_.path, Export(), options_.lock_timeout);
}

std::optional<GemmKernelConfig> TuneCache::Lookup(const TuneKey& key) {
  const std::string k = key.ToString();
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = entries_.find(k);
    if (it != entries_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second.resolved;
    }
  }
  misses_count_.fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock l(&misses_mu_);
  auto it = misses_.find(k);
  if (it != misses_.end()) {
    ++it->second.count;
  } else if (misses_.size() < options_.max_recorded_misses) {
    misses_.emplace(k, MissRecord{key, 1});
  }
  return std::nullopt;
}

absl::Status TuneCache::Put(CacheEntry entry) {
  absl::StatusOr<GemmKernelConfig> resolved = ResolveEntry(entry.key, entry.config);
  if (!resolved.ok()) return resolved.status();
  entry.resolved = *resolved;
  if (entry.updated_unix == 0) entry.updated_unix = NowUnix();
  std::string k = entry.key.ToString();
  {
    absl::MutexLock l(&mu_);
    auto it = entries_.find(k);
    if (it != entries_.end() && it->second.pinned) {
      return absl::FailedPreconditionError(
          absl::StrCat("key ", k, " is pinned to ", it->second.config, "; unpin it to retune"));
    }
    entries_.insert_or_assign(k, std::move(entry));
  }
  absl::MutexLock l(&misses_mu_);
  misses_.erase(k);
  return absl::OkStatus();
}

absl::Status TuneCache::Pin(const TuneKey& key, absl::string_view config) {
  absl::StatusOr<GemmKernelConfig> resolved = ResolveEntry(key, config);
  if (!resolved.ok()) return resolved.status();
  std::string k = key.ToString();
  {
    absl::MutexLock l(&mu_);
    CacheEntry& e = entries_[k];
    if (e.config != config) {
      e = CacheEntry();
      e.key = key;
      e.config = std::string(config);
      e.resolved = *resolved;
    }
    e.pinned = true;
    e.updated_unix = NowUnix();
  }
  absl::MutexLock l(&misses_mu_);
  misses_.erase(k);
  return absl::OkStatus();
}

absl::Status TuneCache::Unpin(const TuneKey& key) {
  const std::string k = key.ToString();
  absl::MutexLock l(&mu_);
  auto it = entries_.find(k);
  if (it == entries_.end())
    return absl::NotFoundError(absl::StrCat("no cache entry for ", EchoClientString(k)));
  it->second.pinned = false;
  it->second.updated_unix = NowUnix();
  return absl::OkStatus();
}

size_t TuneCache::Clear(bool include_pinned) {
  absl::MutexLock l(&mu_);
  const size_t before = entries_.size();
  if (include_pinned) {
    entries_.clear();
  } else {
    absl::erase_if(entries_, [](const auto& kv) { return !kv.second.pinned; });
  }
  return before - entries_.size();
}

std::optional<CacheEntry> TuneCache::Get(const TuneKey& key) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = entries_.find(key.ToString());
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<CacheEntry> TuneCache::List() const {
  std::vector<std::pair<std::string, CacheEntry>> sorted;
  {
    absl::ReaderMutexLock l(&mu_);
    sorted.assign(entries_.begin(), entries_.end());
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<CacheEntry> out;
  out.reserve(sorted.size());
  for (auto& kv : sorted) out.push_back(std::move(kv.second));
  return out;
}

CacheStats TuneCache::Stats() const {
  CacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_count_.load(std::memory_order_relaxed);
  absl::ReaderMutexLock l(&mu_);
  s.entries = entries_.size();
  for (const auto& kv : entries_) s.pinned += kv.second.pinned ? 1 : 0;
  return s;
}

std::vector<MissRecord> TuneCache::Misses() const {
  std::vector<std::pair<std::string, MissRecord>> all;
  {
    absl::MutexLock l(&misses_mu_);
    all.assign(misses_.begin(), misses_.end());
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    if (a.second.count != b.second.count) return a.second.count > b.second.count;
    return a.first < b.first;
  });
  std::vector<MissRecord> out;
  out.reserve(all.size());
  for (auto& kv : all) out.push_back(std::move(kv.second));
  return out;
}

std::string TuneCache::Export() const {
  CacheFile file;
  file.validators = options_.validators;
  file.entries = List();
  return SerializeCacheFile(file);
}

absl::StatusOr<ImportResult> TuneCache::Import(absl::string_view bytes) {
  absl::StatusOr<CacheFile> file = ParseCacheFile(bytes);
  if (!file.ok()) return file.status();
  ImportResult result;
  size_t unlisted = 0;
  auto reject = [&](std::string reason) {
    ++result.rejected;
    if (result.reasons.size() < kMaxImportReasons) {
      result.reasons.push_back(std::move(reason));
    } else {
      ++unlisted;
    }
  };
  const std::string mismatch = file->validators.Mismatch(options_.validators);
  if (!mismatch.empty()) {
    result.rejected = static_cast<uint32_t>(file->entries.size());
    result.reasons.push_back(
        absl::StrCat("all ", file->entries.size(), " entries: validators differ: ", mismatch));
    return result;
  }
  absl::MutexLock l(&mu_);
  for (CacheEntry& e : file->entries) {
    std::string k = e.key.ToString();
    absl::StatusOr<GemmKernelConfig> resolved = ResolveEntry(e.key, e.config);
    if (!resolved.ok()) {
      reject(absl::StrCat(Truncated(k, 200), ": ", resolved.status().message()));
      continue;
    }
    e.resolved = *resolved;
    auto it = entries_.find(k);
    if (it != entries_.end() && it->second.pinned && it->second.config != e.config) {
      reject(absl::StrCat(Truncated(k, 200), ": pinned here to ", it->second.config));
      continue;
    }
    if (it != entries_.end() && it->second.pinned) e.pinned = true;
    entries_.insert_or_assign(std::move(k), std::move(e));
    ++result.imported;
  }
  if (unlisted > 0) result.reasons.push_back(absl::StrCat("... and ", unlisted, " more"));
  return result;
}

}  // namespace kd
