// The CPU backend: memory is host shared memory (the pool's memfds, descriptors clients lend),
// ops run on a thread pool, and it is the reference every other backend is tested against.
#include "kerneld/kernels/cpu_backend.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kerneld/kernels/client_string.h"
#include "kerneld/kernels/shm_guard.h"
#include "kerneld/kernels/status_macros.h"
#include "kerneld/kernels/tune_harness.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_harness.h"

namespace kd {
namespace {

class CpuBackend;

// A mapping of host shared memory. Owned regions are the daemon's pool (a sealed memfd whose
// descriptor is kept only until Export hands it to the session); imported ones belong to the
// client and are only unmapped.
class ShmRegion : public Region {
 public:
  ShmRegion(void* data, uint64_t size, bool owned, std::string name, int export_fd,
            std::atomic<uint64_t>* counter)
      : data_(data),
        size_(size),
        owned_(owned),
        name_(std::move(name)),
        export_fd_(export_fd),
        counter_(counter),
        watch_(std::make_unique<ShmWatch>(data, size)) {
    counter_->fetch_add(size_);
  }
  ~ShmRegion() override {
    watch_.reset();  // before the range can be reused by another mapping
    munmap(data_, size_);
    const int fd = export_fd_.exchange(-1);
    if (fd >= 0) close(fd);
    counter_->fetch_sub(size_);
  }
  void* data() const override { return data_; }
  uint64_t size() const override { return size_; }
  DeviceLoc loc() const override { return {BackendKind::kCpu, 0}; }
  bool owned() const override { return owned_; }
  const std::string& name() const { return name_; }
  // The descriptor of an owned region, once; -1 after.
  int TakeExportFd() const { return export_fd_.exchange(-1); }

 private:
  void* data_;
  uint64_t size_;
  bool owned_;
  std::string name_;
  mutable std::atomic<int> export_fd_;
  std::atomic<uint64_t>* counter_;
  // Another process can shrink an unsealed object under the mapping (ftruncate); then an access
  // past the new end is absorbed instead of killing the daemon, and ops on it fail
  // (CheckNotTruncated).
  std::unique_ptr<ShmWatch> watch_;
};

// FAILED_PRECONDITION naming the first tensor of `op` whose shared memory was truncated by
// another process while mapped (its contents are gone); OK otherwise. One atomic load unless a
// truncation ever happened in this process.
absl::Status CheckNotTruncated(const ValidatedOp& op) {
  if (ShmFaultCount() == 0) return absl::OkStatus();
  for (const NamedTensor& t : OpTensors(op.op())) {
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
      : pool_(threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency())) {}

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
    // A memfd has no name: nothing is left in /dev/shm if the daemon dies, and nobody reaches it
    // but whoever is given its descriptor (the session it is allocated to).
    const int fd = memfd_create("kerneld-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
      return absl::ResourceExhaustedError(absl::StrCat("memfd_create: ", ErrnoMessage(errno)));
    auto fail = [fd](absl::string_view what) {
      const int err = errno;
      close(fd);
      return absl::ResourceExhaustedError(absl::StrCat(what, ": ", ErrnoMessage(err)));
    };
    if (bytes > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
      errno = EFBIG;
      return fail(absl::StrCat("cannot size shared memory to ", bytes, " bytes"));
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      return fail(absl::StrCat("cannot size shared memory to ", bytes, " bytes"));
    }
    // Sealed at its size: the session's process cannot shrink it under the daemon's mapping.
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      return fail("sealing the pool memfd");
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fail(absl::StrCat("mmap of ", bytes, " bytes"));
    return std::make_unique<ShmRegion>(p, bytes, /*owned=*/true, "kerneld-pool", fd, &used_);
  }

  absl::StatusOr<MemoryHandle> Export(const Region& region) override {
    const auto* shm = dynamic_cast<const ShmRegion*>(&region);
    if (shm == nullptr || !shm->owned()) {
      return absl::InvalidArgumentError("only memory this backend allocated can be exported");
    }
    MemoryHandle h;
    h.fd = shm->TakeExportFd();
    if (h.fd < 0) {
      return absl::FailedPreconditionError(
          "this pool region was exported already; its descriptor goes to one session only");
    }
    h.size = shm->size();
    return h;
  }

  absl::StatusOr<std::unique_ptr<Region>> Import(const MemoryHandle& handle) override {
    const std::string what =
        handle.shm_name.empty()
            ? std::string("the descriptor")
            : absl::StrCat("shm_name=\"", EchoClientString(handle.shm_name), "\"");
    if (handle.fd < 0) {
      return absl::InvalidArgumentError(
          "the cpu backend imports host memory by descriptor (fd), and none was given");
    }
    if (handle.size == 0) return absl::InvalidArgumentError("size=0 must be > 0");
    struct stat st;
    if (fstat(handle.fd, &st) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("fstat of ", what, ": ", ErrnoMessage(errno)));
    }
    struct statfs fs;
    if (!S_ISREG(st.st_mode) || fstatfs(handle.fd, &fs) != 0 ||
        (fs.f_type != TMPFS_MAGIC && fs.f_type != HUGETLBFS_MAGIC)) {
      // A file of another filesystem could block the daemon's threads in a page fault (FUSE,
      // NFS) or be no memory at all (a device, a pipe).
      return absl::InvalidArgumentError(absl::StrCat(
          what, " is not shared memory: it must be a memfd or a tmpfs or hugetlbfs file"));
    }
    if (handle.size > static_cast<uint64_t>(st.st_size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("size=", handle.size, " exceeds the real size ", st.st_size, " of ", what));
    }
    void* p = mmap(nullptr, handle.size, PROT_READ | PROT_WRITE, MAP_SHARED, handle.fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      return absl::InvalidArgumentError(absl::StrCat(
          "mmap of ", what, ": ", ErrnoMessage(err),
          err == EACCES ? " (it must be opened read-write and not sealed against writes)" : ""));
    }
    return std::make_unique<ShmRegion>(p, handle.size, /*owned=*/false, handle.shm_name, -1,
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

  bool CanTune() const override { return true; }
  absl::StatusOr<std::unique_ptr<TuneHarness>> CreateTuneHarness(const TuneKey& key,
                                                                 absl::string_view reference_config,
                                                                 int device) override {
    if (device != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("device=", device, " does not exist on the cpu backend (only 0)"));
    }
    CpuGemmHarnessOptions options;
    options.reference_config = std::string(reference_config);
    return CreateCpuGemmHarness(key, options);
  }

  // The reference runs every valid op.
  absl::Status Supports(const ValidatedOp&) const override { return absl::OkStatus(); }

  absl::Status Run(const ValidatedOp& op, Stream&, KernelTimingFn on_timed) override {
    KD_RETURN_IF_ERROR(CheckNotTruncated(op));
    const auto start = std::chrono::steady_clock::now();
    absl::Status status =
        std::visit([this](const auto& args) { return RunCpu(args, pool_); }, op.op());
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (status.ok()) status = CheckNotTruncated(op);  // truncated while the op ran
    if (status.ok() && on_timed) on_timed(elapsed.count());
    return status;
  }

 private:
  ThreadPool pool_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> imported_{0};
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace kd
