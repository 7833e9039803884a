#include "kerneld/kernels/shm_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

namespace kd {

// A watched range. Entries are never freed (a signal handler may be reading one); a released
// entry goes back to a free list with begin == end == 0.
struct ShmWatch::Entry {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<uint32_t> faulted{0};
};

namespace {

constexpr size_t kChunkEntries = 1024;
constexpr size_t kMaxChunks = 1024;  // a million watches

struct Chunk {
  ShmWatch::Entry entries[kChunkEntries];
};

// Read by the handler without a lock: chunk pointers are published once and never change.
std::atomic<Chunk*> g_chunks[kMaxChunks];
std::atomic<size_t> g_chunk_count{0};
std::atomic<uint64_t> g_faults{0};
struct sigaction g_previous;

std::mutex g_mu;  // entry allocation and handler installation
std::vector<ShmWatch::Entry*>* g_free = nullptr;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const size_t chunks = g_chunk_count.load(std::memory_order_acquire);
  for (size_t c = 0; c < chunks; ++c) {
    Chunk* chunk = g_chunks[c].load(std::memory_order_acquire);
    for (ShmWatch::Entry& e : chunk->entries) {
      const uintptr_t begin = e.begin.load(std::memory_order_acquire);
      const uintptr_t end = e.end.load(std::memory_order_acquire);
      if (begin == 0 || addr < begin || addr >= end) continue;
      // mmap is async-signal-safe (a system call). MAP_FIXED replaces the shared pages with
      // private zero pages; the faulting instruction then runs again and succeeds.
      void* p = mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (p != MAP_FAILED) {
        e.faulted.store(1, std::memory_order_release);
        g_faults.fetch_add(1, std::memory_order_release);
        return;
      }
    }
  }
  // Not a watched range: what would have happened without us.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &dfl, nullptr);  // the access faults again and the default action runs
}

ShmWatch::Entry* TakeEntry() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_free == nullptr) {
    g_free = new std::vector<ShmWatch::Entry*>();
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
  }
  if (g_free->empty()) {
    const size_t c = g_chunk_count.load();
    if (c == kMaxChunks) return nullptr;
    auto* chunk = new Chunk();
    g_chunks[c].store(chunk, std::memory_order_release);
    g_chunk_count.store(c + 1, std::memory_order_release);
    for (size_t i = kChunkEntries; i-- > 0;) g_free->push_back(&chunk->entries[i]);
  }
  ShmWatch::Entry* e = g_free->back();
  g_free->pop_back();
  return e;
}

}  // namespace

ShmWatch::ShmWatch(void* base, size_t size) : entry_(TakeEntry()) {
  if (entry_ == nullptr) return;  // a million watches: unguarded, as before this existed
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  entry_->faulted.store(0);
  entry_->end.store(b + (size + page - 1) / page * page, std::memory_order_release);
  entry_->begin.store(b, std::memory_order_release);
}

ShmWatch::~ShmWatch() {
  if (entry_ == nullptr) return;
  entry_->begin.store(0, std::memory_order_release);
  entry_->end.store(0, std::memory_order_release);
  std::lock_guard<std::mutex> lock(g_mu);
  g_free->push_back(entry_);
}

bool ShmWatch::faulted() const {
  return entry_ != nullptr && entry_->faulted.load(std::memory_order_acquire) != 0;
}

bool ShmFaultedAt(const void* p) {
  if (g_faults.load(std::memory_order_acquire) == 0) return false;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const size_t chunks = g_chunk_count.load(std::memory_order_acquire);
  for (size_t c = 0; c < chunks; ++c) {
    Chunk* chunk = g_chunks[c].load(std::memory_order_acquire);
    for (ShmWatch::Entry& e : chunk->entries) {
      const uintptr_t begin = e.begin.load(std::memory_order_acquire);
      if (begin != 0 && addr >= begin && addr < e.end.load(std::memory_order_acquire)) {
        return e.faulted.load(std::memory_order_acquire) != 0;
      }
    }
  }
  return false;
}

uint64_t ShmFaultCount() { return g_faults.load(std::memory_order_acquire); }

}  // namespace kd
