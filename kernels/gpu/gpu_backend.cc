// The GPU backend, one source for both vendors: nvcc's build is the CUDA backend
// (CreateCudaBackend), hipcc's the HIP backend (CreateHipBackend); kernels/gpu/vendor.h maps the
// CUDA names used here to HIP's. A memory pool per GPU, IPC import/export, non-blocking streams,
// IPC events, the pad kernels of gpu_kernels.h and the quantizers of quantize_dispatch.h, every
// launch asynchronous; the FP8 GEMM goes through gpu_gemm.h after the device-capability rule
// of device_caps.h. The CUDA build links the static CUDA runtime and never libcuda; both builds
// report no backend (with the reason) on a machine without a driver or device.
//
// How an error found on the device surfaces: pad/unpad and the jagged quantize granularities
// check group ends on the device (the host never reads them). Each such op gets its own
// host-mapped record; the stream lists the records of its open group (the ops run since its
// last Synchronize or CloseChecks). Synchronize waits
// and returns the first violation of the open group only, as INVALID_ARGUMENT naming the op and
// group ("ops[1].pad: group_ends[3]=10 is less than group_ends[2]=12; ..."); CloseChecks hands
// the group's records to the kernel timer's poller, which reads them once an event recorded
// after the group completed and calls the caller's `done`. So an op's violation is reported to
// the batch that ran it and to no other. The op that found it writes no output rows.
#include <cstdio>

#include "kerneld/kernels/cuda_backend.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/gpu/device_attributes.h"
#include "kernels/gpu/device_caps.h"
#include "kernels/gpu/device_pool.h"
#include "kernels/gpu/gpu_check.h"
#include "kernels/gpu/gpu_gemm.h"
#include "kernels/gpu/gpu_kernels.h"
#include "kernels/gpu/ipc_mappings.h"
#include "kernels/gpu/kernel_timer.h"
#include "kernels/gpu/quantize_dispatch.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace {

#if KD_GPU_AMD
constexpr BackendKind kKind = BackendKind::kHip;
#else
constexpr BackendKind kKind = BackendKind::kCuda;
#endif

// "cuda:0", "hip:1": a device as messages name it.
std::string DeviceName(int device) { return absl::StrCat(BackendName(kKind), ":", device); }

#if KD_GPU_AMD
constexpr const char* kIpcEventOrigin =
    "hipIpcGetEventHandle of an event created with hipEventInterprocess | hipEventDisableTiming";
#else
constexpr const char* kIpcEventOrigin =
    "cudaIpcGetEventHandle of an event created with cudaEventInterprocess | "
    "cudaEventDisableTiming";
#endif

using cuda::DeviceErrorRecord;

// Pool memory handed to a caller; returns to its pool when destroyed.
class PoolRegion : public Region {
 public:
  PoolRegion(DevicePool* pool, DevicePool::Block block, uint64_t size, int device)
      : pool_(pool), block_(block), size_(size), device_(device) {}
  ~PoolRegion() override { pool_->Release(block_); }
  void* data() const override { return block_.ptr; }
  uint64_t size() const override { return size_; }
  DeviceLoc loc() const override { return {kKind, device_}; }
  bool owned() const override { return true; }

 private:
  DevicePool* pool_;
  DevicePool::Block block_;
  uint64_t size_;
  int device_;
};

// A span of a client's allocation reached through an IPC mapping; closes its share of the
// mapping when destroyed.
class IpcRegion : public Region {
 public:
  IpcRegion(IpcMappings* mappings, std::string handle, void* data, uint64_t size, int device)
      : mappings_(mappings),
        handle_(std::move(handle)),
        data_(data),
        size_(size),
        device_(device) {}
  ~IpcRegion() override { mappings_->Close(device_, handle_); }
  void* data() const override { return data_; }
  uint64_t size() const override { return size_; }
  DeviceLoc loc() const override { return {kKind, device_}; }
  bool owned() const override { return false; }

 private:
  IpcMappings* mappings_;
  std::string handle_;
  void* data_;
  uint64_t size_;
  int device_;
};

// Host-mapped DeviceErrorRecords, carved from pinned slabs so that creating a stream does not
// allocate pinned memory (cudaHostAlloc/cudaFreeHost may synchronize the device).
class ErrorRecordSlabs {
 public:
  ~ErrorRecordSlabs() {
    absl::MutexLock lock(&mu_);
    for (void* slab : slabs_) cudaFreeHost(slab);
  }
  absl::StatusOr<DeviceErrorRecord*> Take() {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) {
      void* slab = nullptr;
      KD_GPU_RETURN_IF_ERROR(cudaHostAlloc(&slab, kSlabRecords * sizeof(DeviceErrorRecord),
                                           cudaHostAllocMapped | cudaHostAllocPortable));
      slabs_.push_back(slab);
      auto* records = static_cast<DeviceErrorRecord*>(slab);
      for (int i = 0; i < kSlabRecords; ++i) free_.push_back(&records[i]);
    }
    DeviceErrorRecord* record = free_.back();
    free_.pop_back();
    std::memset(record, 0, sizeof(*record));
    return record;
  }
  void Give(DeviceErrorRecord* record) {
    absl::MutexLock lock(&mu_);
    free_.push_back(record);
  }

 private:
  static constexpr int kSlabRecords = 256;
  absl::Mutex mu_;
  std::vector<void*> slabs_ ABSL_GUARDED_BY(mu_);
  std::vector<DeviceErrorRecord*> free_ ABSL_GUARDED_BY(mu_);
};

class GpuStream : public Stream {
 public:
  // One record of the open group: the op's position in the group and its host-mapped record.
  struct Check {
    int op_index;
    DeviceErrorRecord* record;
  };
  struct Group {
    int ops = 0;  // ops run in the group, checked or not
    std::vector<Check> checks;
  };

  GpuStream(int device, cudaStream_t stream, ErrorRecordSlabs* slabs)
      : device_(device), stream_(stream), slabs_(slabs) {}
  ~GpuStream() override {
    cudaSetDevice(device_);
    if (scratch_ != nullptr) cudaFreeAsync(scratch_, stream_);
    // The records are host memory a queued kernel may still write: wait for the stream first.
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    absl::MutexLock lock(&mu_);
    for (const Check& c : open_.checks) slabs_->Give(c.record);
  }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  absl::Mutex& mu() { return mu_; }

  // A fresh record for the op being launched, listed in the open group.
  absl::StatusOr<DeviceErrorRecord*> TakeCheck() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    KD_ASSIGN_OR_RETURN(DeviceErrorRecord * record, slabs_->Take());
    open_.checks.push_back({open_.ops, record});
    return record;
  }
  void CountOp() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++open_.ops; }
  Group CloseGroup() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return std::exchange(open_, Group{}); }

  // Stream-ordered scratch of at least `bytes`, grown with cudaMallocAsync (no host sync).
  absl::StatusOr<void*> Scratch(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (bytes <= scratch_bytes_) return scratch_;
    if (scratch_ != nullptr) KD_GPU_RETURN_IF_ERROR(cudaFreeAsync(scratch_, stream_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    const uint64_t size = std::max<uint64_t>(bytes, 4096);
    KD_GPU_RETURN_IF_ERROR(cudaMallocAsync(&scratch_, size, stream_));
    scratch_bytes_ = size;
    return scratch_;
  }

 private:
  const int device_;
  const cudaStream_t stream_;
  ErrorRecordSlabs* const slabs_;
  absl::Mutex mu_;
  Group open_ ABSL_GUARDED_BY(mu_);
  void* scratch_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t scratch_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

class GpuEvent : public Event {
 public:
  GpuEvent(int device, cudaEvent_t event) : device_(device), event_(event) {}
  ~GpuEvent() override {
    cudaSetDevice(device_);
    cudaEventDestroy(event_);
  }
  int device() const { return device_; }
  cudaEvent_t event() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_;
};

// The message of a violation a kernel recorded, in the words of kd::CheckGroupEnds.
absl::Status DeviceErrorStatus(const DeviceErrorRecord& r) {
  const absl::string_view op = r.op == 0 ? "pad" : (r.op == 1 ? "unpad" : "quantize");
  switch (r.code) {
    case DeviceErrorRecord::kGroupEndDecreasing:
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": group_ends[", r.group, "]=", r.value, " is less than ",
                       r.group == 0 ? "0" : absl::StrCat("group_ends[", r.group - 1, "]=", r.bound),
                       "; group ends must be non-decreasing and non-negative"));
    case DeviceErrorRecord::kGroupEndTotal:
      return absl::InvalidArgumentError(absl::StrCat(op, ": group_ends[", r.group, "]=", r.value,
                                                     " must equal the row count ", r.bound));
    case DeviceErrorRecord::kPaddedRowsExceed:
      return absl::InvalidArgumentError(absl::StrCat(op, ": input.shape[0]=", r.bound,
                                                     " is less than the padded row count ", r.value,
                                                     " that group_ends and alignment give"));
    default:
      return absl::InternalError(absl::StrCat(op, ": unknown device error code ", r.code));
  }
}

// The first violation among a closed group's records (in op order), prefixed with the op's
// position when the group ran several ops; the records go back to `slabs`. The group's work has
// completed.
absl::Status ReadChecks(const GpuStream::Group& group, ErrorRecordSlabs* slabs) {
  absl::Status first;
  for (const GpuStream::Check& c : group.checks) {
    volatile DeviceErrorRecord* record = c.record;
    if (first.ok() && record->code != DeviceErrorRecord::kNone) {
      DeviceErrorRecord copy;
      copy.code = record->code;
      copy.op = record->op;
      copy.group = record->group;
      copy.value = record->value;
      copy.bound = record->bound;
      first = DeviceErrorStatus(copy);
      if (group.ops > 1) {
        first = absl::Status(first.code(), absl::StrCat("ops[", c.op_index, "].", first.message()));
      }
    }
    slabs->Give(c.record);
  }
  return first;
}

// "sm_90" (compute capability 9.0), "gfx942" (the gfx target without its feature suffix such as
// ":sramecc+:xnack-").
std::string ArchName(const cudaDeviceProp& prop) {
#if KD_GPU_AMD
  const std::string name = prop.gcnArchName;
  return name.substr(0, name.find(':'));
#else
  return absl::StrCat("sm_", prop.major * 10 + prop.minor);
#endif
}

// "13.0" from CUDA's 13000, "5.2" from HIP's 50221153 (major * 10^7 + minor * 10^5 + patch).
std::string VersionName(int version) {
#if KD_GPU_AMD
  return absl::StrCat(version / 10000000, ".", version / 100000 % 100);
#else
  return absl::StrCat(version / 1000, ".", version % 1000 / 10);
#endif
}

class GpuBackend : public Backend {
 public:
  GpuBackend(int device_count, uint64_t pool_cap_bytes)
      : device_count_(device_count), mappings_(device_count), timer_(device_count) {
    for (int d = 0; d < device_count; ++d) {
      pools_.push_back(std::make_unique<DevicePool>(d, pool_cap_bytes));
      cudaDeviceProp prop;
      DeviceProperties p;
      if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) {
        p.name = prop.name;
        p.arch = ArchName(prop);
        p.memory_total = prop.totalGlobalMem;
      }
      int driver = 0, runtime = 0;
      if (cudaDriverGetVersion(&driver) == cudaSuccess) p.driver_version = VersionName(driver);
      if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) p.runtime_version = VersionName(runtime);
      properties_.push_back(p);
    }
  }

  BackendKind kind() const override { return kKind; }
  int DeviceCount() const override { return device_count_; }
  DeviceProperties Properties(int device) const override {
    if (device < 0 || device >= device_count_) return DeviceProperties{};
    return properties_[device];
  }
  MemoryStats Memory(int device) const override {
    MemoryStats s;
    if (device < 0 || device >= device_count_) return s;
    s.used = pools_[device]->used();
    s.pooled = pools_[device]->pooled();
    s.imported = mappings_.mapped_bytes(device);
    return s;
  }
  bool Healthy() const override { return healthy_.load(); }

  absl::StatusOr<std::unique_ptr<Region>> Allocate(int device, uint64_t bytes) override {
    KD_RETURN_IF_ERROR(CheckDevice(device));
    if (bytes == 0) return absl::InvalidArgumentError("size=0 must be > 0");
    KD_ASSIGN_OR_RETURN(DevicePool::Block block, pools_[device]->Acquire(bytes));
    return std::unique_ptr<Region>(new PoolRegion(pools_[device].get(), block, bytes, device));
  }

  absl::StatusOr<MemoryHandle> Export(const Region& region) override {
    const auto* pool_region = dynamic_cast<const PoolRegion*>(&region);
    if (pool_region == nullptr) {
      return absl::InvalidArgumentError("only memory this backend allocated can be exported");
    }
    const int device = pool_region->loc().device;
    KD_ASSIGN_OR_RETURN(cudaIpcMemHandle_t handle, pools_[device]->Export(pool_region->data()));
    MemoryHandle h;
    h.ipc_handle.assign(reinterpret_cast<const char*>(&handle), sizeof(handle));
    h.offset = 0;  // every pool region is the start of its own allocation
    h.size = pool_region->size();
    h.device = device;
    return h;
  }

  absl::StatusOr<std::unique_ptr<Region>> Import(const MemoryHandle& handle) override {
    KD_RETURN_IF_ERROR(CheckDevice(handle.device));
    if (handle.ipc_handle.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ipc_handle is required on the ", BackendName(kKind), " backend"));
    }
    if (handle.size == 0) return absl::InvalidArgumentError("size=0 must be > 0");
    for (const auto& pool : pools_) {
      if (pool->Exported(handle.ipc_handle)) {
        return absl::InvalidArgumentError(
            "ipc_handle names memory of the daemon's own pool; use that buffer directly");
      }
    }
    KD_ASSIGN_OR_RETURN(
        void* data, mappings_.Open(handle.device, handle.ipc_handle, handle.offset, handle.size));
    return std::unique_ptr<Region>(
        new IpcRegion(&mappings_, handle.ipc_handle, data, handle.size, handle.device));
  }

  // The stream reserves the scratch every GEMM on its device takes (GpuGemmStreamScratchBytes),
  // so that its first GEMM does not grow the memory pool; best effort: a GEMM grows it otherwise.
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) override {
    KD_RETURN_IF_ERROR(CheckDevice(device));
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
    cudaStream_t stream = nullptr;
    KD_GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    auto s = std::make_unique<GpuStream>(device, stream, &error_slabs_);
    if (const uint64_t bytes = GpuGemmStreamScratchBytes(properties_[device]); bytes > 0) {
      absl::MutexLock lock(&s->mu());
      if (!s->Scratch(bytes).ok()) cudaGetLastError();
    }
    return std::unique_ptr<Stream>(std::move(s));
  }

  // Does on every device, now, the one-time work that its first request would otherwise pay: the
  // first stream-ordered allocation (which creates the device's memory pool), the SM count, and
  // every quantize and GEMM kernel's shared-memory opt-in and occupancy query (WarmQuantize,
  // WarmGpuGemm). In principle, per device: one pool creation and a small allocation, two driver
  // calls per kernel instantiation (about a hundred), one library handle; no kernel launch. Best
  // effort: a failure is logged, and the launch that needs the value asks for it again.
  void WarmDevices() {
    int current = 0;
    const bool restore = cudaGetDevice(&current) == cudaSuccess;
    for (int d = 0; d < device_count_; ++d) {
      const absl::Status warmed = WarmDevice(d);
      if (!warmed.ok()) {
        cudaGetLastError();
        std::fprintf(stderr, "kerneld: %s warm-up: %s\n", DeviceName(d).c_str(),
                     std::string(warmed.message()).c_str());
      }
    }
    if (restore) cudaSetDevice(current);
  }

  absl::StatusOr<std::unique_ptr<Event>> OpenEvent(int device, absl::string_view handle) override {
    KD_RETURN_IF_ERROR(CheckDevice(device));
    if (handle.size() != sizeof(cudaIpcEventHandle_t)) {
      return absl::InvalidArgumentError(absl::StrCat("event handle has ", handle.size(),
                                                     " bytes; a cudaIpcEventHandle_t has ",
                                                     sizeof(cudaIpcEventHandle_t)));
    }
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
    cudaIpcEventHandle_t h;
    std::memcpy(&h, handle.data(), sizeof(h));
    cudaEvent_t event = nullptr;
    const cudaError_t err = cudaIpcOpenEventHandle(&event, h);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::InvalidArgumentError(absl::StrCat(
          "event handle cannot be opened on ", DeviceName(device), ": ", cudaGetErrorName(err),
          "; it must come from ", kIpcEventOrigin, " in another process"));
    }
    return std::unique_ptr<Event>(new GpuEvent(device, event));
  }

  absl::Status StreamWaitEvent(Stream& stream, Event& event) override {
    KD_ASSIGN_OR_RETURN(GpuStream * s, AsGpu(stream));
    auto* e = dynamic_cast<GpuEvent*>(&event);
    if (e == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the event is not a ", BackendName(kKind), " event"));
    }
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(s->device()));
    return Check(cudaStreamWaitEvent(s->stream(), e->event(), 0), "cudaStreamWaitEvent");
  }

  absl::Status RecordEvent(Stream& stream, Event& event) override {
    KD_ASSIGN_OR_RETURN(GpuStream * s, AsGpu(stream));
    auto* e = dynamic_cast<GpuEvent*>(&event);
    if (e == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the event is not a ", BackendName(kKind), " event"));
    }
    if (e->device() != s->device()) {
      return absl::FailedPreconditionError(absl::StrCat("the event is on ", DeviceName(e->device()),
                                                        " but the stream is on ",
                                                        DeviceName(s->device())));
    }
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(s->device()));
    return Check(cudaEventRecord(e->event(), s->stream()), "cudaEventRecord");
  }

  absl::Status Synchronize(Stream& stream) override {
    KD_ASSIGN_OR_RETURN(GpuStream * s, AsGpu(stream));
    GpuStream::Group group;
    {
      absl::MutexLock lock(&s->mu());
      group = s->CloseGroup();
    }
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(s->device()));
    const absl::Status synced = Check(cudaStreamSynchronize(s->stream()), "cudaStreamSynchronize");
    if (!synced.ok()) {
      // The records may still be written by a queued kernel: they are leaked, not reused.
      return synced;
    }
    // The stream's kernel times reach their callbacks before the caller hears of completion
    // (a SYNC reply carries them).
    timer_.DeliverCompleted(s->stream());
    return ReadChecks(group, &error_slabs_);
  }

  void CloseChecks(Stream& stream, std::function<void(absl::Status)> done) override {
    absl::StatusOr<GpuStream*> s = AsGpu(stream);
    if (!s.ok()) return done(s.status());
    GpuStream::Group group;
    {
      absl::MutexLock lock(&(*s)->mu());
      group = (*s)->CloseGroup();
    }
    if (group.checks.empty()) return done(absl::OkStatus());
    // The group is complete when an event recorded now completes: the kernel timer's poller
    // watches exactly that, and reads the records on its thread.
    auto deliver = [group, slabs = &error_slabs_, done = std::move(done)](double) {
      done(ReadChecks(group, slabs));
    };
    absl::Status watched = cudaSetDevice((*s)->device()) == cudaSuccess
                               ? absl::OkStatus()
                               : absl::InternalError("cudaSetDevice failed");
    absl::StatusOr<KernelTimer::Span> span;
    if (watched.ok()) {
      span = timer_.Begin((*s)->device(), (*s)->stream());
      watched = span.status();
    }
    if (watched.ok()) watched = timer_.End(*span, (*s)->stream(), deliver);
    if (!watched.ok()) {
      // Nothing watches the group: wait for it here rather than lose its verdict.
      const absl::Status synced =
          Check(cudaStreamSynchronize((*s)->stream()), "cudaStreamSynchronize");
      if (!synced.ok()) return done(synced);
      deliver(0.0);
    }
  }

  bool CanTune() const override { return GpuGemmCanTune(); }
  absl::StatusOr<std::unique_ptr<TuneHarness>> CreateTuneHarness(const TuneKey& key,
                                                                 absl::string_view reference_config,
                                                                 int device) override {
    KD_RETURN_IF_ERROR(CheckDevice(device));
    return CreateGpuGemmTuneHarness(key, reference_config, device);
  }

  absl::Status Supports(const ValidatedOp& op) const override {
    return std::visit([this](const auto& args) { return SupportsOp(args); }, op.op());
  }

  absl::Status Run(const ValidatedOp& op, Stream& stream, KernelTimingFn on_timed) override {
    if (!healthy_.load()) {
      return absl::UnavailableError(absl::StrCat(
          "the ", BackendName(kKind), " backend saw a sticky device error and is unhealthy"));
    }
    KD_ASSIGN_OR_RETURN(GpuStream * s, AsGpu(stream));
    KD_RETURN_IF_ERROR(Supports(op));
    for (const NamedTensor& t : OpTensors(op.op())) {
      if (t.tensor->loc != DeviceLoc{kKind, s->device()}) {
        return absl::FailedPreconditionError(
            absl::StrCat(t.field, " is on ", BackendName(t.tensor->loc.kind), ":",
                         t.tensor->loc.device, " but the stream is on ", DeviceName(s->device())));
      }
    }
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(s->device()));
    absl::MutexLock lock(&s->mu());
    KernelTimer::Span span;
    if (on_timed) {
      KD_ASSIGN_OR_RETURN(span, timer_.Begin(s->device(), s->stream()));
    }
    const absl::Status launched =
        std::visit([this, s](const auto& args) { return Launch(args, *s); }, op.op());
    s->CountOp();
    if (!launched.ok()) {
      if (on_timed) timer_.Abandon(span);
      return launched;
    }
    if (on_timed) return timer_.End(span, s->stream(), std::move(on_timed));
    return absl::OkStatus();
  }

 private:
  absl::Status CheckDevice(int device) const {
    if (device < 0 || device >= device_count_) {
      return absl::InvalidArgumentError(absl::StrCat("device=", device, " does not exist on the ",
                                                     BackendName(kKind), " backend (",
                                                     device_count_, " devices)"));
    }
    return absl::OkStatus();
  }

  static absl::StatusOr<GpuStream*> AsGpu(Stream& stream) {
    auto* s = dynamic_cast<GpuStream*>(&stream);
    if (s == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the stream is not a ", BackendName(kKind), " stream"));
    }
    return s;
  }

  absl::Status WarmDevice(int device) {
    KD_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
    // NOTE: a device's default memory pool is created by its first cudaMallocAsync, which the
    // first request needing scratch would pay; the memset is that of the GEMM's split flags.
    cudaStream_t stream = nullptr;
    KD_GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    constexpr size_t kBytes = 4096;
    void* p = nullptr;
    cudaError_t err = cudaMallocAsync(&p, kBytes, stream);
    if (err == cudaSuccess) err = cudaMemsetAsync(p, 0, kBytes, stream);
    if (p != nullptr) {
      const cudaError_t freed = cudaFreeAsync(p, stream);
      if (err == cudaSuccess) err = freed;
    }
    const cudaError_t synced = cudaStreamSynchronize(stream);
    if (err == cudaSuccess) err = synced;
    cudaStreamDestroy(stream);
    KD_GPU_RETURN_IF_ERROR(err);
    KD_GPU_RETURN_IF_ERROR(cuda::WarmQuantize());
    return WarmGpuGemm(properties_[device]);
  }

  // A Status for `err`; a sticky error marks the backend unhealthy.
  absl::Status Check(cudaError_t err, absl::string_view what) {
    if (err == cudaSuccess) return absl::OkStatus();
    if (IsStickyCudaError(err))
      healthy_.store(false);
    else
      cudaGetLastError();
    return CudaStatus(err, what);
  }

  // The quantize op: its params filled once and its kernel family chosen in quantize_dispatch.h;
  // the stream lends the error record (jagged group ends) and the scratch.
  // Per op, by overload on its args: whether this backend runs it (SupportsOp) and its launch
  // (Launch), which turns the validated args into its kernels' parameters (cuda_kernels.h,
  // quantize_dispatch.h). An op with neither has no GPU kernel: the templates answer
  // UNIMPLEMENTED for it.
  template <typename Args>
  absl::Status SupportsOp(const Args&) const {
    return absl::UnimplementedError(
        absl::StrCat(OpTraits<Args>::kName, " has no ", BackendName(kKind), " kernel"));
  }
  template <typename Args>
  absl::Status Launch(const Args& args, GpuStream&) {
    return SupportsOp(args);
  }

  absl::Status SupportsOp(const QuantizeArgs&) const { return absl::OkStatus(); }
  absl::Status SupportsOp(const PadArgs&) const { return absl::OkStatus(); }
  absl::Status SupportsOp(const UnpadArgs&) const { return absl::OkStatus(); }
  absl::Status SupportsOp(const RowAmaxArgs&) const { return absl::OkStatus(); }
  // On the op's device (where its output is; Run checks every tensor is on the stream's): the
  // device-capability rule (device_caps.h), then what the build's kernels implement (gpu_gemm.h).
  absl::Status SupportsOp(const GemmArgs& g) const {
    const int device = g.d.loc.device;
    if (device < 0 || device >= device_count_) return CheckDevice(device);
    const DeviceProperties& p = properties_[device];
    KD_RETURN_IF_ERROR(CheckFp8MatrixOperands(
        p.arch, absl::StrCat(DeviceName(device), " (", p.name, ")"), g.a.dtype, g.b.dtype));
    return GpuGemmSupports(g, p);
  }

  absl::Status Launch(const GemmArgs& g, GpuStream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu()) {
    return LaunchGpuGemm(g, properties_[s.device()], s.stream(),
                         [&s](uint64_t bytes)
                             ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu()) { return s.Scratch(bytes); });
  }

  absl::Status Launch(const QuantizeArgs& q, GpuStream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu()) {
    KD_ASSIGN_OR_RETURN(cuda::QuantizeParams p, cuda::MakeQuantizeParams(q));
    if (cuda::QuantizeNeedsErrorRecord(p)) {
      KD_ASSIGN_OR_RETURN(p.error, s.TakeCheck());
    }
    if (const uint64_t bytes = cuda::QuantizeScratchBytes(p); bytes > 0) {
      KD_ASSIGN_OR_RETURN(p.scratch, s.Scratch(bytes));
    }
    return Check(cuda::LaunchQuantize(p, s.stream()), "quantize launch");
  }

  absl::Status Launch(const PadArgs& a, GpuStream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu()) {
    cuda::PadParams p = PadParamsOf(a.input, a.output, a.group_ends, a.alignment);
    p.padded_group_ends = a.padded_group_ends.as<int32_t>();
    p.padded_group_ends_stride = a.padded_group_ends.strides[0];
    KD_ASSIGN_OR_RETURN(p.scratch, s.Scratch(cuda::PadScratchBytes(p.groups)));
    KD_ASSIGN_OR_RETURN(p.error, s.TakeCheck());
    return Check(cuda::LaunchPad(p, s.stream()), "pad launch");
  }

  absl::Status Launch(const UnpadArgs& a, GpuStream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu()) {
    cuda::PadParams p = PadParamsOf(a.input, a.output, a.group_ends, a.alignment);
    KD_ASSIGN_OR_RETURN(p.scratch, s.Scratch(cuda::PadScratchBytes(p.groups)));
    KD_ASSIGN_OR_RETURN(p.error, s.TakeCheck());
    return Check(cuda::LaunchUnpad(p, s.stream()), "unpad launch");
  }

  absl::Status Launch(const RowAmaxArgs& a, GpuStream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu()) {
    cuda::RowAmaxParams p;
    p.input = a.input.data;
    p.input_dtype = a.input.dtype == DType::kF32 ? 0 : a.input.dtype == DType::kBF16 ? 1 : 2;
    p.rows = a.input.shape[0];
    p.cols = a.input.shape[1];
    p.input_row_stride = a.input.strides[0];
    p.output = a.output.as<float>();
    p.output_stride = a.output.strides[0];
    return Check(cuda::LaunchRowAmax(p, s.stream()), "row_amax launch");
  }

  // The parameters pad and unpad share.
  static cuda::PadParams PadParamsOf(const Tensor& input, const Tensor& output, const Tensor& ends,
                                     int32_t alignment) {
    const int64_t esize = static_cast<int64_t>(DTypeSize(input.dtype));
    cuda::PadParams p;
    p.input = input.data;
    p.input_stride_bytes = input.strides[0] * esize;
    p.output = output.data;
    p.output_stride_bytes = output.strides[0] * esize;
    p.in_rows = input.shape[0];
    p.out_rows = output.shape[0];
    p.row_bytes = input.shape[1] * esize;
    p.group_ends = ends.data;
    p.group_ends_stride = ends.strides[0];
    p.group_ends_i64 = ends.dtype == DType::kI64;
    p.groups = ends.shape[0];
    p.alignment = alignment;
    return p;
  }

  const int device_count_;
  std::vector<std::unique_ptr<DevicePool>> pools_;
  std::vector<DeviceProperties> properties_;
  IpcMappings mappings_;
  ErrorRecordSlabs error_slabs_;
  KernelTimer timer_;
  std::atomic<bool> healthy_{true};
};

// The backend over every device found, or FAILED_PRECONDITION saying why there is none.
absl::StatusOr<std::unique_ptr<Backend>> OpenGpuBackend(uint64_t pool_cap_bytes) {
#if KD_GPU_NVIDIA
  // NOTE: the driver loads a kernel's module at its first launch by default (lazy loading,
  // ~250 us on H100), which the first request of each kernel would pay. Eager loading at
  // context creation moves that cost to start-up. It covers exactly kerneld's own kernels: the
  // runtime is static and no other CUDA library is linked. Read once, when the driver
  // initialises (the call below), so it is set before; an operator's explicit
  // CUDA_MODULE_LOADING is kept.
  setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
  constexpr const char* kNeeds = "an NVIDIA GPU and its driver";
#else
  constexpr const char* kNeeds =
      "an AMD GPU, the amdgpu driver and access to /dev/kfd and /dev/dri/renderD*";
#endif
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    // HIP's error string is often its name again.
    const std::string name = cudaGetErrorName(err), text = cudaGetErrorString(err);
    return absl::FailedPreconditionError(
        absl::StrCat("the ", BackendName(kKind), " backend found no device (", name,
                     name == text ? "" : ": " + text, "); it needs ", kNeeds));
  }
#if KD_GPU_AMD && defined(KD_HIP_BUILT_ARCHS)
  // A code object runs only on its exact gfx target: a device this build has no kernels for is
  // refused here, not at its first launch (hipErrorNoBinaryForGpu).
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    const std::string arch = ArchName(prop);
    const std::string built = KD_HIP_BUILT_ARCHS;
    if (absl::StrCat(",", built, ",").find(absl::StrCat(",", arch, ",")) == std::string::npos) {
      return absl::FailedPreconditionError(
          absl::StrCat(DeviceName(d), " (", prop.name, ") is ", arch,
                       " but this kerneld's hip kernels were "
                       "built for ",
                       built, " (KD_HIP_ARCHITECTURES; gfx942 needs a ROCm 6 hipcc)"));
    }
  }
#endif
  PrepareGpuGemm();
  auto backend = std::make_unique<GpuBackend>(count, pool_cap_bytes);
  backend->WarmDevices();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace
}  // namespace KD_GPU_NS

#if KD_GPU_AMD
absl::StatusOr<std::unique_ptr<Backend>> OpenHipBackend(uint64_t pool_cap_bytes) {
  return OpenGpuBackend(pool_cap_bytes);
}
#else
absl::StatusOr<std::unique_ptr<Backend>> OpenCudaBackend(uint64_t pool_cap_bytes) {
  return OpenGpuBackend(pool_cap_bytes);
}

std::unique_ptr<Backend> CreateCudaBackend(uint64_t pool_cap_bytes) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenCudaBackend(pool_cap_bytes);
  return backend.ok() ? std::move(*backend) : nullptr;
}
#endif

}  // namespace kd
