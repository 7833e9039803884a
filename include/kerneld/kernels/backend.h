// The one interface every compute backend implements (CPU, CUDA, HIP).
//
// A backend owns memory (its pool and the regions it imported from clients), streams and events,
// runs validated ops (ValidatedOp, ops.h) and may offer tuning harnesses for its kernels. Every
// method is thread-safe unless it says otherwise. Failures are values: no method throws or aborts
// on bad input.
#ifndef KERNELD_KERNELS_BACKEND_H_
#define KERNELD_KERNELS_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/ops.h"
#include "kerneld/kernels/tensor.h"

namespace kd {

struct TuneKey;     // autotune_key.h
class TuneHarness;  // tune_harness.h

// A span of memory a backend can address: pool memory, a mapped shm object, an opened IPC
// mapping. Destroying the Region releases it (returns it to the pool, unmaps, closes the IPC
// mapping). Callers keep it in a shared_ptr while any op may use it.
class Region {
 public:
  virtual ~Region() = default;
  // Address of the first byte the client's buffer spans (for IPC, the tensor's offset inside the
  // exporter's allocation is already added).
  virtual void* data() const = 0;
  virtual uint64_t size() const = 0;
  virtual DeviceLoc loc() const = 0;
  // True for memory the daemon allocated (counted as "used"), false for imported memory.
  virtual bool owned() const = 0;
};

// How a client reaches memory the daemon allocated, or names memory it owns.
struct MemoryHandle {
  // CPU: a descriptor of the memory (a memfd or a tmpfs object). To Import it is lent for the
  // call: the backend maps it and keeps no reference, the caller closes it. From Export it is a
  // new descriptor the caller owns.
  int fd = -1;
  // CPU: what the memory is called in messages (the shm name it was opened by); may be empty.
  std::string shm_name;
  std::string ipc_handle;  // GPU: the raw IPC memory handle bytes
  uint64_t offset = 0;     // GPU: tensor offset inside the exporter's allocation
  uint64_t size = 0;
  int device = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
};

class Event {
 public:
  virtual ~Event() = default;
};

struct DeviceProperties {
  std::string name;
  std::string arch;  // "x86_64", "sm_90", "gfx942"
  uint64_t memory_total = 0;
  // GPU backends: the driver's and the runtime's versions ("13.0"), part of the tune cache's
  // validators; "" on the CPU backend.
  std::string driver_version;
  std::string runtime_version;
};

struct MemoryStats {
  uint64_t used = 0;      // allocated from the pool and handed out
  uint64_t pooled = 0;    // held by the pool, free
  uint64_t imported = 0;  // mapped from clients
};

// Called once per op with its kernel time in seconds. GPU backends call it later, from their own
// thread, once the timing events completed; the CPU backend calls it before Run returns.
using KernelTimingFn = std::function<void(double seconds)>;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const = 0;
  absl::string_view name() const { return BackendName(kind()); }
  virtual int DeviceCount() const = 0;
  virtual DeviceProperties Properties(int device) const = 0;
  virtual MemoryStats Memory(int device) const = 0;
  // False once a sticky device error (illegal address...) was seen; the health check says so.
  virtual bool Healthy() const = 0;

  // Allocates `bytes` on `device` from the pool. RESOURCE_EXHAUSTED over the pool's cap or when
  // the device is out of memory; INVALID_ARGUMENT for a bad device or a zero size.
  virtual absl::StatusOr<std::unique_ptr<Region>> Allocate(int device, uint64_t bytes) = 0;
  // A handle another process can open to reach `region`, which this backend allocated. The CPU
  // backend's handle is the region's descriptor, handed out once: a second Export of the same
  // region is FAILED_PRECONDITION (the daemon gives pool memory to its session only).
  virtual absl::StatusOr<MemoryHandle> Export(const Region& region) = 0;
  // Opens memory a client owns. INVALID_ARGUMENT for a handle that cannot be opened or a size
  // larger than the real object; nothing stays open on failure. The CPU backend opens nothing by
  // name: it maps `handle.fd`, which must be a regular file of a tmpfs or hugetlbfs opened
  // read-write (whoever lends the descriptor decides whose memory it is).
  virtual absl::StatusOr<std::unique_ptr<Region>> Import(const MemoryHandle& handle) = 0;

  // A stream on `device`. Ops on one stream run in submission order.
  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) = 0;
  // Opens an IPC event handle a client exported. UNIMPLEMENTED where the backend has none.
  virtual absl::StatusOr<std::unique_ptr<Event>> OpenEvent(int device,
                                                           absl::string_view handle) = 0;
  // Makes later work on `stream` wait for `event` without blocking the host.
  virtual absl::Status StreamWaitEvent(Stream& stream, Event& event) = 0;
  virtual absl::Status RecordEvent(Stream& stream, Event& event) = 0;
  // Blocks until the work queued on `stream` finished. Returns the first failed device-side
  // check (see CloseChecks) of the ops run on `stream` since its last Synchronize or
  // CloseChecks, and only of those; OK when they all passed.
  virtual absl::Status Synchronize(Stream& stream) = 0;

  // Device-side checks: an op may check data only the device reads (pad/unpad group ends), so
  // its verdict is known once it ran, not when Run returns. The ops run on `stream` since its
  // last Synchronize or CloseChecks form the open group. CloseChecks closes the open group
  // without waiting and calls `done` exactly once with the group's first failed check (OK when
  // none failed) after the group's work completed: on the calling thread when that is already
  // known (always on backends that check on the host, as this default does), else later from a
  // backend thread; `done` must not block or call the backend.
  virtual void CloseChecks(Stream& stream, std::function<void(absl::Status)> done) {
    (void)stream;
    done(absl::OkStatus());
  }

  // OK when this backend runs `op`, else UNIMPLEMENTED saying what is missing (a kernel it does
  // not have, a device it needs). Never checks the op's shapes again: Validate did.
  virtual absl::Status Supports(const ValidatedOp& op) const = 0;
  // Runs (enqueues, on GPU backends) `op` on `stream`, the stream of the device its tensors are
  // on (a GPU backend checks: FAILED_PRECONDITION). `on_timed` may be empty.
  virtual absl::Status Run(const ValidatedOp& op, Stream& stream, KernelTimingFn on_timed) = 0;

  // Tuning. True when this backend can make a tuning harness (CreateTuneHarness) for some of its
  // kernels; the default says no.
  virtual bool CanTune() const { return false; }
  // A harness that runs configs of the kernel `key` names on `device`, checking each output
  // against that of `reference_config` (the config the tuner measures first, its space's
  // default). INVALID_ARGUMENT for a key this backend cannot tune; UNIMPLEMENTED (the default)
  // when it tunes nothing.
  virtual absl::StatusOr<std::unique_ptr<TuneHarness>> CreateTuneHarness(
      const TuneKey& key, absl::string_view reference_config, int device);
};

}  // namespace kd

#endif  // KERNELD_KERNELS_BACKEND_H_
