// Survives a client that truncates a shared-memory object the daemon has mapped.
//
// The daemon maps shared memory that other processes can resize: a trainer's registered
// buffers and submit rings, unless sealed against shrinking (the CPU pool's memfds are). If
// the owner shrinks an object with ftruncate, the daemon's next access past the new end raises
// SIGBUS, which would kill the daemon and every other client's work. A ShmWatch covers one such
// mapping: a SIGBUS inside it replaces the whole watched range with private zero pages (so the
// faulting access completes and reads zeros) and marks the watch faulted; the code that owns the
// mapping then refuses to use it. A SIGBUS anywhere else still kills the process as before (or
// reaches the handler that was installed before the first watch).
//
// The handler is installed on the first ShmWatch and stays. Watches are cheap to create and to
// check: a fault anywhere bumps a process-wide counter, and while it is zero ShmFaultedAt costs
// one atomic load.
#ifndef KERNELD_KERNELS_SHM_GUARD_H_
#define KERNELD_KERNELS_SHM_GUARD_H_

#include <cstddef>
#include <cstdint>

namespace kd {

class ShmWatch {
 public:
  // Watches [base, base + size), a mapping the caller made and unmaps only after destroying
  // this watch. base is page aligned (as mmap returns it).
  ShmWatch(void* base, size_t size);
  ~ShmWatch();
  ShmWatch(const ShmWatch&) = delete;
  ShmWatch& operator=(const ShmWatch&) = delete;

  // True once an access to the range raised SIGBUS: its contents are gone (zeros now).
  bool faulted() const;

  struct Entry;  // internal: the handler's view of a watch

 private:
  Entry* entry_;
};

// True when `p` lies in a watched range that has faulted.
bool ShmFaultedAt(const void* p);

// Faults absorbed by every watch of this process so far.
uint64_t ShmFaultCount();

}  // namespace kd

#endif  // KERNELD_KERNELS_SHM_GUARD_H_
