// Sessions and the buffers they hold.
//
// Every buffer belongs to the session that registered or allocated it; a buffer id is looked up
// only among the caller's own buffers, so another session's buffer is NOT_FOUND exactly like an
// unknown id. A session ends on CloseSession, on lease expiry, or when its OpenSession stream
// ends (the client cancelled it or its process died and the socket closed); ending it releases
// every buffer it held. Regions are held through shared_ptr, so an op in flight keeps its memory
// mapped even if the session ends underneath it; the mapping goes when the op completes.
//
// Thread-safe.
#ifndef KERNELD_SERVER_SESSION_MANAGER_H_
#define KERNELD_SERVER_SESSION_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kerneld/kernels/backend.h"
#include "server/peer.h"
#include "server/unique_fd.h"

namespace kd {

struct SessionLimits {
  uint32_t max_sessions = 1024;
  uint32_t max_buffers_per_session = 4096;
  uint64_t max_allocated_bytes_per_session = uint64_t{64} << 30;
  uint32_t max_lease_seconds = 3600;
};

// Something a session owns besides buffers and events, such as a submit ring's serving thread.
// Stop() is called once when the session ends, outside every lock of the session manager.
class SessionAttachment {
 public:
  virtual ~SessionAttachment() = default;
  virtual void Stop() = 0;
};

// The attachment kind of a session's submit ring (AttachSubmitRing).
inline constexpr char kSubmitRingAttachment[] = "submit ring";

struct BufferEntry {
  uint64_t id = 0;
  std::shared_ptr<const Region> region;
  Backend* backend = nullptr;
};

class Session {
 public:
  Session(std::string id, std::string client_name, uint32_t lease_seconds,
          std::optional<PeerCredentials> peer);

  const std::string& id() const { return id_; }
  const std::string& client_name() const { return client_name_; }
  // The peer that opened the session (the credentials of its data-socket connection); nullopt
  // for a session opened over TCP.
  const std::optional<PeerCredentials>& peer() const { return peer_; }
  uint32_t lease_seconds() const { return lease_seconds_; }
  absl::Time created() const { return created_; }
  absl::Time last_activity() const { return absl::FromUnixNanos(last_activity_ns_.load()); }
  void Touch() { last_activity_ns_.store(absl::ToUnixNanos(absl::Now())); }

  // Called once when the session ends, with the reason; set by whoever holds the stream.
  void SetEndHook(std::function<void(const std::string&)> hook) ABSL_LOCKS_EXCLUDED(mu_);

  struct Usage {
    uint32_t buffers = 0;
    uint64_t bytes = 0;
    uint64_t allocated_bytes = 0;
  };
  Usage usage() const ABSL_LOCKS_EXCLUDED(mu_);

  // NOT_FOUND unless this session holds `buffer_id`.
  absl::StatusOr<BufferEntry> Find(uint64_t buffer_id) const ABSL_LOCKS_EXCLUDED(mu_);

  // Cached IPC events opened for this session, keyed by the handle bytes.
  std::shared_ptr<Event> CachedEvent(const std::string& handle) const ABSL_LOCKS_EXCLUDED(mu_);
  void CacheEvent(const std::string& handle, std::shared_ptr<Event> event) ABSL_LOCKS_EXCLUDED(mu_);

  // Adds an attachment under `kind` (e.g. "submit ring"). ALREADY_EXISTS if the session has one
  // of that kind; FAILED_PRECONDITION if the session has ended (the attachment is stopped then).
  absl::Status Attach(const std::string& kind, std::unique_ptr<SessionAttachment> attachment)
      ABSL_LOCKS_EXCLUDED(mu_);
  bool HasAttachment(const std::string& kind) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class SessionManager;

  const std::string id_;
  const std::string client_name_;
  const uint32_t lease_seconds_;
  const std::optional<PeerCredentials> peer_;
  const absl::Time created_;
  std::atomic<int64_t> last_activity_ns_;

  mutable absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_buffer_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, BufferEntry> buffers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Event>> events_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<SessionAttachment>> attachments_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&)> end_hook_ ABSL_GUARDED_BY(mu_);
};

// Pool memory handed to its session: the buffer, how a client reaches it (GPU: an IPC handle),
// and for host memory the one descriptor of it (a sealed memfd) that the daemon hands out.
struct Allocation {
  BufferEntry entry;
  MemoryHandle handle;
  UniqueFd fd;
};

struct ManagerStats {
  uint32_t sessions = 0;
  uint32_t buffers = 0;
  uint64_t buffer_bytes = 0;
  uint32_t imported_mappings = 0;
};

class SessionManager {
 public:
  explicit SessionManager(SessionLimits limits);
  ~SessionManager();

  // RESOURCE_EXHAUSTED past max_sessions. The lease is capped at max_lease_seconds.
  // INVALID_ARGUMENT for a client_name over 128 bytes or holding a NUL byte. `peer`: who opened
  // it (nullopt over TCP).
  absl::StatusOr<std::shared_ptr<Session>> Open(const std::string& client_name,
                                                uint32_t lease_seconds,
                                                std::optional<PeerCredentials> peer = std::nullopt);
  // NOT_FOUND for an unknown (or already ended) session. Marks it active.
  absl::StatusOr<std::shared_ptr<Session>> Find(const std::string& session_id);
  // Find, for a request that came from a peer with user id `uid` (the fd socket): a session
  // opened by another user, or with no known peer, is NOT_FOUND exactly as an unknown one.
  absl::StatusOr<std::shared_ptr<Session>> FindForUid(const std::string& session_id, uid_t uid);
  // Whether the session is open, without counting as activity (leases are not renewed).
  bool IsOpen(const std::string& session_id) const;
  // Ends the session and releases its buffers; returns how many. Idempotent: NOT_FOUND when the
  // session is already gone.
  absl::StatusOr<uint32_t> Close(const std::string& session_id, const std::string& reason);

  // Opens client memory through `backend` and adds it to the session.
  absl::StatusOr<BufferEntry> Register(Session& session, Backend& backend,
                                       const MemoryHandle& handle);
  // Allocates pool memory through `backend` and adds it to the session.
  absl::StatusOr<Allocation> Allocate(Session& session, Backend& backend, int device,
                                      uint64_t bytes);
  // NOT_FOUND unless the session holds `buffer_id`.
  absl::Status Release(Session& session, uint64_t buffer_id);

  // Ends sessions whose lease expired. Called periodically by the daemon.
  void ReapExpired();
  // Ends every session (daemon shutdown).
  void CloseAll(const std::string& reason);

  ManagerStats Stats() const;
  std::vector<std::shared_ptr<Session>> List() const;

 private:
  absl::StatusOr<BufferEntry> AddBuffer(Session& session, Backend& backend,
                                        std::unique_ptr<Region> region, bool allocated);
  static absl::Status UnknownSession(const std::string& session_id);

  const SessionLimits limits_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kd

#endif  // KERNELD_SERVER_SESSION_MANAGER_H_
