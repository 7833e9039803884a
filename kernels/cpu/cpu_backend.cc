// The CPU backend: memory is POSIX shared memory, ops run on a thread pool, and it is the
// reference every other backend is tested against.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kerneld/kernels/autotune_space.h"
#include "kerneld/kernels/registry.h"
#include "kerneld/kernels/shm_guard.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"

namespace kd {
namespace {

class CpuBackend;

// A mapping of a shm object. Owned regions were created by the daemon and are unlinked when
// released; imported ones belong to the client and are only unmapped.
class ShmRegion : public Region {
 public:
  ShmRegion(void* data, uint64_t size, bool owned, std::string name, std::atomic<uint64_t>* counter)
      : data_(data),
        size_(size),
        owned_(owned),
        name_(std::move(name)),
        counter_(counter),
        watch_(std::make_unique<ShmWatch>(data, size)) {
    counter_->fetch_add(size_);
  }
  ~ShmRegion() override {
    watch_.reset();  // before the range can be reused by another mapping
    munmap(data_, size_);
    if (owned_) shm_unlink(name_.c_str());
    counter_->fetch_sub(size_);
  }
  void* data() const override { return data_; }
  uint64_t size() const override { return size_; }
  DeviceLoc loc() const override { return {BackendKind::kCpu, 0}; }
  bool owned() const override { return owned_; }
  const std::string& name() const { return name_; }

 private:
  void* data_;
  uint64_t size_;
  bool owned_;
  std::string name_;
  std::atomic<uint64_t>* counter_;
  // Another process can shrink the object under the mapping (ftruncate); then an access past
  // the new end is absorbed instead of killing the daemon, and ops on it fail (CheckNotTruncated).
  std::unique_ptr<ShmWatch> watch_;
};

// FAILED_PRECONDITION naming the first tensor of `op` whose shared memory was truncated by
// another process while mapped (its contents are gone); OK otherwise. One atomic load unless a
// truncation ever happened in this process.
absl::Status CheckNotTruncated(const Op& op) {
  if (ShmFaultCount() == 0) return absl::OkStatus();
  for (const NamedTensor& t : OpTensors(op)) {
    if (t.tensor->data != nullptr && ShmFaultedAt(t.tensor->data)) {
      return absl::FailedPreconditionError(absl::StrCat(
          t.field,
          ": its shared-memory object was truncated by another process while the daemon had it "
          "mapped; the buffer's contents are gone (release it and register a new one)"));
    }
  }
  return absl::OkStatus();
}

class CpuStream : public Stream {};

std::string ErrnoMessage(int err) { return std::string(strerror(err)); }

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads)
      : pool_(threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency())) {
    std::random_device rd;
    name_salt_ = (static_cast<uint64_t>(rd()) << 32) | rd();
  }

  BackendKind kind() const override { return BackendKind::kCpu; }
  int DeviceCount() const override { return 1; }
  DeviceProperties Properties(int) const override {
    DeviceProperties p;
    p.name = absl::StrCat("cpu (", pool_.threads(), " threads)");
    p.arch = "x86_64";
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) p.memory_total = static_cast<uint64_t>(pages) * page;
    return p;
  }
  MemoryStats Memory(int) const override {
    MemoryStats s;
    s.used = used_.load();
    s.imported = imported_.load();
    return s;
  }
  bool Healthy() const override { return true; }

  absl::StatusOr<std::unique_ptr<Region>> Allocate(int device, uint64_t bytes) override {
    if (device != 0)
      return absl::InvalidArgumentError(
          absl::StrCat("device=", device, " does not exist on the cpu backend (only 0)"));
    if (bytes == 0) return absl::InvalidArgumentError("size=0 must be > 0");
    const std::string name =
        absl::StrFormat("/kerneld.%d.%016x.%d", getpid(), name_salt_, next_id_.fetch_add(1));
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0660);
    if (fd < 0)
      return absl::InternalError(absl::StrCat("shm_open ", name, ": ", ErrnoMessage(errno)));
    fchmod(fd, 0660);  // the umask must not hide it from the trainer group
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int err = errno;
      close(fd);
      shm_unlink(name.c_str());
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot size shared memory to ", bytes, " bytes: ", ErrnoMessage(err)));
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      const int err = errno;
      shm_unlink(name.c_str());
      return absl::ResourceExhaustedError(
          absl::StrCat("mmap of ", bytes, " bytes: ", ErrnoMessage(err)));
    }
    return std::make_unique<ShmRegion>(p, bytes, /*owned=*/true, name, &used_);
  }

  absl::StatusOr<MemoryHandle> Export(const Region& region) override {
    const auto* shm = dynamic_cast<const ShmRegion*>(&region);
    if (shm == nullptr || !shm->owned()) {
      return absl::InvalidArgumentError("only memory this backend allocated can be exported");
    }
    MemoryHandle h;
    h.shm_name = shm->name();
    h.size = shm->size();
    return h;
  }

  absl::StatusOr<std::unique_ptr<Region>> Import(const MemoryHandle& handle) override {
    if (handle.shm_name.empty())
      return absl::InvalidArgumentError("shm_name is required on the cpu backend");
    if (handle.shm_name[0] != '/' || handle.shm_name.size() > 255 ||
        handle.shm_name.find('/', 1) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm_name=\"", handle.shm_name,
                       "\" must be \"/name\" with no other '/' and at most 255 bytes"));
    }
    if (handle.size == 0) return absl::InvalidArgumentError("size=0 must be > 0");
    const int fd = shm_open(handle.shm_name.c_str(), O_RDWR, 0);
    if (fd < 0) {
      const int err = errno;
      return absl::InvalidArgumentError(
          absl::StrCat("shm_name=\"", handle.shm_name, "\" cannot be opened: ", ErrnoMessage(err)));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const int err = errno;
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat("fstat of shm_name=\"", handle.shm_name, "\": ", ErrnoMessage(err)));
    }
    if (handle.size > static_cast<uint64_t>(st.st_size)) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat("size=", handle.size,
                                                     " exceeds the real size ", st.st_size,
                                                     " of shm_name=\"", handle.shm_name, "\""));
    }
    void* p = mmap(nullptr, handle.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      const int err = errno;
      return absl::InvalidArgumentError(
          absl::StrCat("mmap of shm_name=\"", handle.shm_name, "\": ", ErrnoMessage(err)));
    }
    return std::make_unique<ShmRegion>(p, handle.size, /*owned=*/false, handle.shm_name,
                                       &imported_);
  }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) override {
    if (device != 0)
      return absl::InvalidArgumentError(
          absl::StrCat("device=", device, " does not exist on the cpu backend"));
    return std::make_unique<CpuStream>();
  }
  absl::StatusOr<std::unique_ptr<Event>> OpenEvent(int, absl::string_view) override {
    return absl::UnimplementedError("the cpu backend has no IPC events; use SYNC completion");
  }
  absl::Status StreamWaitEvent(Stream&, Event&) override {
    return absl::UnimplementedError("the cpu backend has no IPC events");
  }
  absl::Status RecordEvent(Stream&, Event&) override {
    return absl::UnimplementedError("the cpu backend has no IPC events");
  }
  absl::Status Synchronize(Stream&) override { return absl::OkStatus(); }

  absl::Status Supports(const Op& op) const override {
    if (auto* q = std::get_if<QuantizeArgs>(&op)) return CpuSupportsQuantize(*q);
    if (auto* g = std::get_if<GemmArgs>(&op)) return CpuSupportsGemm(*g);
    return absl::OkStatus();
  }

  absl::Status Run(const Op& op, Stream&, KernelTimingFn on_timed) override {
    KD_RETURN_IF_ERROR(CheckNotTruncated(op));
    const auto start = std::chrono::steady_clock::now();
    absl::Status status;
    if (auto* q = std::get_if<QuantizeArgs>(&op))
      status = QuantizeCpu(*q, pool_);
    else if (auto* g = std::get_if<GemmArgs>(&op))
      status = RunGemm(*g);
    else if (auto* p = std::get_if<PadArgs>(&op))
      status = PadCpu(*p, pool_);
    else if (auto* u = std::get_if<UnpadArgs>(&op))
      status = UnpadCpu(*u, pool_);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (status.ok()) status = CheckNotTruncated(op);  // truncated while the op ran
    if (status.ok() && on_timed) on_timed(elapsed.count());
    return status;
  }

 private:
  absl::Status RunGemm(const GemmArgs& g) {
    CpuGemmConfig config;
    if (!g.config.empty()) {
      KD_ASSIGN_OR_RETURN(config.tile_n, ParseCpuGemmConfig(g.config));
    }
    return GemmCpu(g, pool_, config);
  }

  ThreadPool pool_;
  uint64_t name_salt_ = 0;
  std::atomic<int> next_id_{0};
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> imported_{0};
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace kd
