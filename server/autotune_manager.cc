#include "server/autotune_manager.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kerneld/kernels/client_string.h"
#include "server/daemon.h"
#include "server/log.h"

namespace kd {

struct AutotuneManager::ModelCache {
  Backend* backend = nullptr;
  std::vector<int> devices;
  DeviceProperties properties;
  std::string path;
  std::unique_ptr<TuneCache> cache;
  HarnessFactory harness;  // empty: this backend cannot tune yet
  std::unique_ptr<BackgroundTuner> background;
  absl::Mutex save_mu;  // saves in order, so an older snapshot never overwrites a newer one
};

namespace {

// 1 ms .. ~500 s: a tune measures every candidate of one shape.
prometheus::Histogram::BucketBoundaries TuneBuckets() { return DoublingBuckets(1e-3, 600.0); }

// A file-name-safe form of a device model: letters and digits kept, runs of others as '_'.
std::string FileSafe(absl::string_view s) {
  std::string out;
  for (const char c : s) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (keep) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != '_') {
      out.push_back('_');
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// FP8 inputs of a tune shape: the fnuz format on MI300 (gfx94x), OCP e4m3 elsewhere.
DType InputDType(absl::string_view arch) {
  return ArchFamily(arch) == "gfx94x" ? DType::kE4M3FNUZ : DType::kE4M3FN;
}

// The harness that tunes keys on `device` of `backend`, its output checked against the space's
// default config; empty when that backend tunes nothing.
HarnessFactory HarnessFor(Backend* backend, int device) {
  if (!backend->CanTune()) return {};
  return [backend, device](const TuneKey& key) -> absl::StatusOr<std::unique_ptr<TuneHarness>> {
    absl::StatusOr<std::string> reference = ConfigSpaceRegistry::Builtin().Default(key);
    if (!reference.ok()) return reference.status();
    return backend->CreateTuneHarness(key, *reference, device);
  };
}

// A harness that counts its kernel's runs, by whether the tune had been cancelled when the run
// started (the tuner polls the cancellation before every run, so at most one run per cancelled
// tune, one whose start raced the cancel, is counted as cancelled), and that is one of the
// shapes being tuned while it lives: a tune makes one harness per shape.
class CountedHarness final : public TuneHarness {
 public:
  CountedHarness(std::unique_ptr<TuneHarness> inner, prometheus::Counter& runs,
                 prometheus::Counter& cancelled_runs, prometheus::Gauge& active, CancelFn cancelled)
      : inner_(std::move(inner)),
        runs_(runs),
        cancelled_runs_(cancelled_runs),
        active_(active),
        cancelled_(std::move(cancelled)) {
    active_.Increment();
  }
  ~CountedHarness() override { active_.Decrement(); }

  absl::Status Run(absl::string_view config) override {
    (cancelled_ && cancelled_() ? cancelled_runs_ : runs_).Increment();
    return inner_->Run(config);
  }
  absl::Status CheckOutput() override { return inner_->CheckOutput(); }
  void EvictCaches() override { inner_->EvictCaches(); }
  std::optional<double> DeviceSeconds() const override { return inner_->DeviceSeconds(); }

 private:
  const std::unique_ptr<TuneHarness> inner_;
  prometheus::Counter& runs_;
  prometheus::Counter& cancelled_runs_;
  prometheus::Gauge& active_;
  const CancelFn cancelled_;
};

absl::Status CheckShape(const GemmTuneShape& s, size_t index) {
  const std::string field = absl::StrCat("shapes[", index, "].");
  if (s.variant == GemmVariant::kInvalid) {
    return absl::InvalidArgumentError(absl::StrCat(field, "variant is unspecified"));
  }
  if (s.m < 1 || s.n < 1 || s.k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "m, n and k must be >= 1 (got ", s.m, ", ", s.n, ", ", s.k, ")"));
  }
  if (s.groups < 1) {
    return absl::InvalidArgumentError(absl::StrCat(field, "groups=", s.groups, " must be >= 1"));
  }
  if (s.out_dtype != DType::kBF16 && s.out_dtype != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "out_dtype=", DTypeName(s.out_dtype), " must be bf16 or f32"));
  }
  return absl::OkStatus();
}

}  // namespace

AutotuneManager::AutotuneManager(BackendRegistry* backends, Metrics* metrics,
                                 AutotuneOptions options)
    : backends_(backends), options_(std::move(options)) {
  prometheus::Registry& r = *metrics->registry();
  auto& lookups = prometheus::BuildCounter()
                      .Name("kerneld_autotune_lookups_total")
                      .Help("Tune-cache lookups of tunable ops, by result (hit, miss).")
                      .Register(r);
  hits_ = &lookups.Add({{"result", "hit"}});
  misses_ = &lookups.Add({{"result", "miss"}});
  runs_ = &prometheus::BuildCounter()
               .Name("kerneld_autotune_runs_total")
               .Help("Shapes tuned (background and kctl tune), failed ones included.")
               .Register(r)
               .Add({});
  duration_ = &prometheus::BuildHistogram()
                   .Name("kerneld_autotune_duration_seconds")
                   .Help("Time to tune one shape (every candidate measured).")
                   .Register(r)
                   .Add({}, TuneBuckets());
  entries_ = &prometheus::BuildGauge()
                  .Name("kerneld_autotune_cache_entries")
                  .Help("Entries in the tune caches.")
                  .Register(r)
                  .Add({});
  auto& kernel_runs =
      prometheus::BuildCounter()
          .Name("kerneld_autotune_kernel_runs_total")
          .Help(
              "Kernel runs of the tuning harnesses (correctness, warm-up and timed; kctl tune and "
              "background), by whether the tune had been cancelled when the run started "
              "(state=cancelled: at most one per cancelled tune, the run whose start raced the "
              "cancel).")
          .Register(r);
  kernel_runs_ = &kernel_runs.Add({{"state", "tuning"}});
  cancelled_kernel_runs_ = &kernel_runs.Add({{"state", "cancelled"}});
  tunes_active_ = &prometheus::BuildGauge()
                       .Name("kerneld_autotune_tunes_active")
                       .Help("Shapes being tuned now (kctl tune and background).")
                       .Register(r)
                       .Add({});
}

AutotuneManager::~AutotuneManager() {
  Stop();
  for (auto& c : caches_) c->background.reset();
}

void AutotuneManager::Stop() {
  if (stopping_.exchange(true)) return;
  // kctl tunes poll stopping_; the executor may still Enqueue into a stopped tuner (refused).
  for (auto& c : caches_) {
    if (c->background) c->background->Stop();
  }
}

absl::Status AutotuneManager::Start() {
  if (!options_.cache_dir.empty() && mkdir(options_.cache_dir.c_str(), 0755) != 0 &&
      errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("autotune_cache_dir=", options_.cache_dir, ": ", strerror(errno)));
  }
  const auto start = std::chrono::steady_clock::now();
  size_t loaded = 0;
  for (Backend* b : backends_->All()) {
    for (int d = 0; d < b->DeviceCount(); ++d) {
      const DeviceProperties p = b->Properties(d);
      ModelCache* existing = nullptr;
      for (auto& c : caches_) {
        if (c->backend == b && c->properties.name == p.name && c->properties.arch == p.arch) {
          existing = c.get();
        }
      }
      if (existing != nullptr) {
        existing->devices.push_back(d);
        continue;
      }
      auto c = std::make_unique<ModelCache>();
      c->backend = b;
      c->devices.push_back(d);
      c->properties = p;
      if (!options_.cache_dir.empty()) {
        c->path = absl::StrCat(options_.cache_dir, "/autotune-", b->name(), "-", FileSafe(p.name),
                               ".cache");
      }
      TuneCacheOptions o;
      o.path = c->path;
      o.validators.kerneld_version = KerneldVersion();
      o.validators.device = p.name;
      o.validators.arch = p.arch;
      o.validators.driver_version = p.driver_version;
      o.validators.runtime_version = p.runtime_version;
      o.lock_timeout = options_.lock_timeout;
      o.spaces = &ConfigSpaceRegistry::Builtin();
      o.log = [](absl::string_view line) {
        Log("autotune: %.*s", static_cast<int>(line.size()), line.data());
      };
      c->cache = std::make_unique<TuneCache>(o);
      if (!c->path.empty()) {
        absl::StatusOr<size_t> n = c->cache->Load();
        if (absl::IsDeadlineExceeded(n.status())) return n.status();
        if (n.ok()) {
          loaded += *n;
        } else {
          Log("autotune: cannot load %s, starting empty: %s", c->path.c_str(),
              n.status().ToString().c_str());
        }
      }
      c->harness = HarnessFor(b, d);
      if (options_.background && c->harness) {
        ModelCache* raw = c.get();
        c->background = std::make_unique<BackgroundTuner>(
            *c->cache, ConfigSpaceRegistry::Builtin(),
            Counted(c->harness, [this] { return stopping_.load(std::memory_order_relaxed); }),
            std::make_unique<WallTimer>(), options_.tune, [this, raw](const TuneProgressEvent& e) {
              Record(e);
              if (e.status.ok()) Persist(*raw);
            });
      }
      caches_.push_back(std::move(c));
    }
  }
  entries_->Set(static_cast<double>(Entries()));
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  Log("autotune: %zu cached configs loaded in %.1f ms%s", loaded, took.count() * 1e3,
      options_.cache_dir.empty() ? " (caches in memory only)" : "");
  if (!options_.import_path.empty()) return ImportAtStart(options_.import_path);
  return absl::OkStatus();
}

absl::Status AutotuneManager::ImportAtStart(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("autotune_import=", path, ": ", strerror(errno)));
  }
  std::vector<std::string> files;
  if (S_ISDIR(st.st_mode)) {
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat("autotune_import=", path, ": ", strerror(errno)));
    }
    while (dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      // A ConfigMap volume also holds ..data and ..<timestamp> links: only *.cache counts.
      if (name.size() > 6 && name[0] != '.' && absl::EndsWith(name, ".cache")) {
        files.push_back(absl::StrCat(path, "/", name));
      }
    }
    closedir(dir);
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return absl::PermissionDeniedError(absl::StrCat("autotune_import: cannot read ", file));
    }
    std::stringstream bytes;
    bytes << in.rdbuf();
    absl::StatusOr<CacheFile> parsed = ParseCacheFile(bytes.str());
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat("autotune_import: ", file, ": ", parsed.status().message()));
    }
    ModelCache* target = nullptr;
    for (const auto& c : caches_) {
      if (c->cache->options().validators.Mismatch(parsed->validators).empty()) target = c.get();
    }
    if (target == nullptr) {
      const ModelCache* def = Find(backends_->Default(), 0);
      Log("autotune: import %s skipped: no device of this node matches it (%s)", file.c_str(),
          def == nullptr ? "no tune cache"
                         : parsed->validators.Mismatch(def->cache->options().validators).c_str());
      continue;
    }
    absl::StatusOr<ImportResult> r = target->cache->Import(bytes.str());
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat("autotune_import: ", file, ": ", r.status().message()));
    }
    Log("autotune: import %s: %u entries imported, %u rejected%s%s", file.c_str(), r->imported,
        r->rejected, r->reasons.empty() ? "" : " (first: ",
        r->reasons.empty() ? "" : (r->reasons.front() + ")").c_str());
    if (r->imported > 0) Persist(*target);
  }
  return absl::OkStatus();
}

AutotuneManager::ModelCache* AutotuneManager::Find(Backend* backend, int device) const {
  for (const auto& c : caches_) {
    if (c->backend != backend) continue;
    for (int d : c->devices) {
      if (d == device) return c.get();
    }
  }
  return nullptr;
}

AutotuneManager::ModelCache* AutotuneManager::FindForKey(const TuneKey& key) const {
  for (const auto& c : caches_) {
    if (c->properties.name == key.device && c->properties.arch == key.arch) return c.get();
  }
  return nullptr;
}

void AutotuneManager::Configure(Backend* backend, int device, ValidatedOp& op) {
  const GemmArgs* gemm = op.get_if<GemmArgs>();
  if (gemm == nullptr) return;
  ModelCache* c = Find(backend, device);
  if (c == nullptr) return;
  const ConfigSpaceRegistry& spaces = ConfigSpaceRegistry::Builtin();
  const ConfigSpace* space =
      spaces.Find("gemm", GemmVariantName(gemm->variant), c->properties.arch);
  if (space == nullptr) return;  // not tunable here: the kernel's own default
  absl::StatusOr<TuneKey> key = GemmTuneKeyFromArgs(*gemm, c->properties, space->kernel_version);
  if (!key.ok()) return;
  const ConfigSelection selection = SelectConfig(*c->cache, spaces, *key);
  (selection.hit ? hits_ : misses_)->Increment();
  *op.mutable_gemm_config() = selection.config;
  if (!selection.hit && c->background) c->background->Enqueue(*key);
}

std::vector<CacheEntry> AutotuneManager::List() const {
  std::vector<CacheEntry> out;
  for (const auto& c : caches_) {
    std::vector<CacheEntry> entries = c->cache->List();
    out.insert(out.end(), entries.begin(), entries.end());
  }
  return out;
}

std::string AutotuneManager::DefaultPath() const {
  ModelCache* c = Find(backends_->Default(), 0);
  return c == nullptr ? "" : c->path;
}

std::string AutotuneManager::Export() const {
  ModelCache* c = Find(backends_->Default(), 0);
  return c == nullptr ? "" : c->cache->Export();
}

absl::StatusOr<ImportResult> AutotuneManager::Import(absl::string_view bytes) {
  absl::StatusOr<CacheFile> file = ParseCacheFile(bytes);
  if (!file.ok()) return file.status();
  for (const auto& c : caches_) {
    if (!c->cache->options().validators.Mismatch(file->validators).empty()) continue;
    absl::StatusOr<ImportResult> r = c->cache->Import(bytes);
    if (r.ok() && r->imported > 0) Persist(*c);
    return r;
  }
  // No device model matches: the default cache's import says why, entry by entry.
  ModelCache* c = Find(backends_->Default(), 0);
  if (c == nullptr) return absl::FailedPreconditionError("this daemon has no tune cache");
  return c->cache->Import(bytes);
}

absl::Status AutotuneManager::Pin(absl::string_view key_text, absl::string_view config) {
  absl::StatusOr<TuneKey> key = ParseTuneKey(key_text);
  if (!key.ok()) return key.status();
  ModelCache* c = FindForKey(*key);
  if (c == nullptr) {
    return absl::NotFoundError(absl::StrCat("no device of this node is a \"",
                                            EchoClientString(key->device), "\" (",
                                            EchoClientString(key->arch), ")"));
  }
  const absl::Status s = c->cache->Pin(*key, config);
  if (s.ok()) Persist(*c);
  return s;
}

absl::Status AutotuneManager::Unpin(absl::string_view key_text) {
  absl::StatusOr<TuneKey> key = ParseTuneKey(key_text);
  if (!key.ok()) return key.status();
  ModelCache* c = FindForKey(*key);
  if (c == nullptr) {
    return absl::NotFoundError(absl::StrCat("no device of this node is a \"",
                                            EchoClientString(key->device), "\" (",
                                            EchoClientString(key->arch), ")"));
  }
  const absl::Status s = c->cache->Unpin(*key);
  if (s.ok()) Persist(*c);
  return s;
}

uint32_t AutotuneManager::Clear(bool include_pinned) {
  uint32_t removed = 0;
  for (const auto& c : caches_) {
    const size_t n = c->cache->Clear(include_pinned);
    removed += static_cast<uint32_t>(n);
    if (n > 0) Persist(*c);
  }
  return removed;
}

size_t AutotuneManager::Entries() const {
  size_t n = 0;
  for (const auto& c : caches_) n += c->cache->Stats().entries;
  return n;
}

TuneKey AutotuneManager::GemmKey(const ModelCache& c, const GemmTuneShape& s) const {
  const ConfigSpace* space =
      ConfigSpaceRegistry::Builtin().Find("gemm", GemmVariantName(s.variant), c.properties.arch);
  return MakeGemmTuneKey(s.variant, InputDType(c.properties.arch), s.out_dtype, s.m, s.n, s.k,
                         s.groups, c.properties, space == nullptr ? 0 : space->kernel_version);
}

absl::Status AutotuneManager::Tune(const TuneJob& job,
                                   const std::function<void(const TuneProgressEvent&)>& progress,
                                   const std::function<bool()>& cancelled) {
  if (stopping_.load()) return absl::UnavailableError("the daemon is shutting down");
  Backend* backend = job.backend.empty() ? backends_->Default() : backends_->GetByName(job.backend);
  if (backend == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("backend=\"", EchoClientString(job.backend), "\" is not present"));
  }
  ModelCache* c = Find(backend, job.device);
  if (c == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("device=", job.device, " does not exist on ", backend->name()));
  }
  if (job.shapes.empty() && !job.from_misses) {
    return absl::InvalidArgumentError("shapes is empty and from_misses is false: nothing to tune");
  }
  if (!(job.budget_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget_seconds=", job.budget_seconds, " must be >= 0"));
  }
  std::vector<TuneKey> keys;
  for (size_t i = 0; i < job.shapes.size(); ++i) {
    const absl::Status s = CheckShape(job.shapes[i], i);
    if (!s.ok()) return s;
    keys.push_back(GemmKey(*c, job.shapes[i]));
  }
  if (job.from_misses) {
    for (const MissRecord& m : c->cache->Misses()) keys.push_back(m.key);
  }
  TuneOptions options = options_.tune;
  if (job.budget_seconds > 0) options.budget_seconds = job.budget_seconds;
  const HarnessFactory harness =
      c->harness ? c->harness : HarnessFactory([backend, device = job.device](const TuneKey& key) {
        return backend->CreateTuneHarness(key, "", device);  // UNIMPLEMENTED: it tunes nothing
      });
  const CancelFn stop = [&] {
    return stopping_.load(std::memory_order_relaxed) || (cancelled && cancelled());
  };
  WallTimer timer;
  const TuneBatchSummary summary = TuneKeys(
      keys, *c->cache, ConfigSpaceRegistry::Builtin(), Counted(harness, stop), timer, options,
      [&](const TuneProgressEvent& e) {
        Record(e);
        if (progress) progress(e);
      },
      stop);
  if (summary.tuned > 0) Persist(*c);
  if (summary.cancelled) {
    Log("autotune: tune cancelled after %d of %zu shapes (%s)", summary.tuned, keys.size(),
        stopping_.load() ? "the daemon is shutting down" : "the caller went away");
    if (stopping_.load()) {
      return absl::UnavailableError("the daemon is shutting down; the tune was cancelled");
    }
    return absl::CancelledError("the tune was cancelled");
  }
  return absl::OkStatus();
}

HarnessFactory AutotuneManager::Counted(HarnessFactory make, CancelFn cancelled) const {
  return [this, make = std::move(make), cancelled = std::move(cancelled)](
             const TuneKey& key) -> absl::StatusOr<std::unique_ptr<TuneHarness>> {
    absl::StatusOr<std::unique_ptr<TuneHarness>> harness = make(key);
    if (!harness.ok()) return harness.status();
    return std::make_unique<CountedHarness>(*std::move(harness), *kernel_runs_,
                                            *cancelled_kernel_runs_, *tunes_active_, cancelled);
  };
}

void AutotuneManager::Persist(ModelCache& c) const {
  entries_->Set(static_cast<double>(Entries()));
  if (c.path.empty()) return;
  absl::MutexLock l(&c.save_mu);
  const absl::Status s = c.cache->Save();
  if (!s.ok()) Log("autotune: cannot save %s: %s", c.path.c_str(), s.ToString().c_str());
}

void AutotuneManager::Record(const TuneProgressEvent& event) {
  runs_->Increment();
  if (event.status.ok()) duration_->Observe(event.result.elapsed_seconds);
}

}  // namespace kd
