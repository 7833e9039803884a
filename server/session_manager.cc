#include "server/session_manager.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kerneld/kernels/client_string.h"
#include "kerneld/kernels/status_macros.h"
#include "server/log.h"

namespace kd {
namespace {

// 128 random bits: a session id is a bearer token on the data socket, so it must not be guessable.
std::string NewSessionId() {
  std::random_device rd;
  uint64_t hi = (static_cast<uint64_t>(rd()) << 32) | rd();
  uint64_t lo = (static_cast<uint64_t>(rd()) << 32) | rd();
  return absl::StrFormat("%016x%016x", hi, lo);
}

}  // namespace

Session::Session(std::string id, std::string client_name, uint32_t lease_seconds,
                 std::optional<PeerCredentials> peer)
    : id_(std::move(id)),
      client_name_(std::move(client_name)),
      lease_seconds_(lease_seconds),
      peer_(std::move(peer)),
      created_(absl::Now()),
      last_activity_ns_(absl::ToUnixNanos(created_)) {}

void Session::SetEndHook(std::function<void(const std::string&)> hook) {
  absl::MutexLock lock(&mu_);
  end_hook_ = std::move(hook);
}

Session::Usage Session::usage() const {
  absl::MutexLock lock(&mu_);
  Usage u;
  u.buffers = buffers_.size();
  for (const auto& [id, entry] : buffers_) {
    u.bytes += entry.region->size();
    if (entry.region->owned()) u.allocated_bytes += entry.region->size();
  }
  return u;
}

absl::StatusOr<BufferEntry> Session::Find(uint64_t buffer_id) const {
  absl::MutexLock lock(&mu_);
  auto it = buffers_.find(buffer_id);
  if (it == buffers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("buffer_id=", buffer_id, " is not a buffer of this session"));
  }
  return it->second;
}

std::shared_ptr<Event> Session::CachedEvent(const std::string& handle) const {
  absl::MutexLock lock(&mu_);
  auto it = events_.find(handle);
  return it == events_.end() ? nullptr : it->second;
}

void Session::CacheEvent(const std::string& handle, std::shared_ptr<Event> event) {
  absl::MutexLock lock(&mu_);
  if (!ended_) events_[handle] = std::move(event);
}

absl::Status Session::Attach(const std::string& kind,
                             std::unique_ptr<SessionAttachment> attachment) {
  bool exists = false;
  {
    absl::MutexLock lock(&mu_);
    if (!ended_ && attachments_.count(kind) == 0) {
      attachments_.emplace(kind, std::move(attachment));
      return absl::OkStatus();
    }
    exists = !ended_;
  }
  attachment->Stop();  // outside the lock: stopping may wait for a thread that takes it
  attachment.reset();
  if (exists)
    return absl::AlreadyExistsError(
        absl::StrCat("session_id=\"", EchoClientString(id_), "\" already has a ", kind));
  return absl::FailedPreconditionError(
      absl::StrCat("session_id=\"", EchoClientString(id_), "\" has ended"));
}

bool Session::HasAttachment(const std::string& kind) const {
  absl::MutexLock lock(&mu_);
  return attachments_.count(kind) > 0;
}

SessionManager::SessionManager(SessionLimits limits) : limits_(limits) {}

SessionManager::~SessionManager() { CloseAll("daemon shutting down"); }

void SessionManager::CloseAll(const std::string& reason) {
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) ids.push_back(id);
  }
  for (const auto& id : ids) Close(id, reason).IgnoreError();
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Open(const std::string& client_name,
                                                              uint32_t lease_seconds,
                                                              std::optional<PeerCredentials> peer) {
  if (client_name.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("client_name has ", client_name.size(), " bytes; at most 128"));
  }
  KD_RETURN_IF_ERROR(CheckNoNul("client_name", client_name));
  const uint32_t lease = std::min(lease_seconds, limits_.max_lease_seconds);
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrCat("the daemon already has ", sessions_.size(),
                                                     " sessions, the limit (--max_sessions)"));
  }
  auto session = std::make_shared<Session>(NewSessionId(), client_name, lease, std::move(peer));
  sessions_[session->id()] = session;
  return session;
}

absl::Status SessionManager::UnknownSession(const std::string& session_id) {
  return absl::NotFoundError(session_id.empty()
                                 ? std::string("session_id is required")
                                 : absl::StrCat("session_id=\"", EchoClientString(session_id),
                                                "\" is not an open session"));
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Find(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return UnknownSession(session_id);
  it->second->Touch();
  return it->second;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::FindForUid(const std::string& session_id,
                                                                    uid_t uid) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end() || !it->second->peer().has_value() || it->second->peer()->uid != uid) {
    return UnknownSession(session_id);
  }
  it->second->Touch();
  return it->second;
}

bool SessionManager::IsOpen(const std::string& session_id) const {
  absl::MutexLock lock(&mu_);
  return sessions_.count(session_id) > 0;
}

absl::StatusOr<uint32_t> SessionManager::Close(const std::string& session_id,
                                               const std::string& reason) {
  std::shared_ptr<Session> session;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) return UnknownSession(session_id);
    session = std::move(it->second);
    sessions_.erase(it);
  }
  std::map<uint64_t, BufferEntry> buffers;
  std::map<std::string, std::shared_ptr<Event>> events;
  std::function<void(const std::string&)> hook;
  std::map<std::string, std::unique_ptr<SessionAttachment>> attachments;
  {
    absl::MutexLock lock(&session->mu_);
    session->ended_ = true;
    buffers.swap(session->buffers_);
    events.swap(session->events_);
    hook.swap(session->end_hook_);
    attachments.swap(session->attachments_);
  }
  // First, so that nothing attached starts another op on the session's buffers.
  for (auto& [kind, attachment] : attachments) attachment->Stop();
  attachments.clear();
  const uint32_t released = buffers.size();
  buffers.clear();  // unmaps / returns to the pool, unless an op in flight still holds a region
  events.clear();
  const absl::string_view tag = SessionTag(session_id);
  Log("session %.*s closed (%s): %s, %u buffers released after %.1f s",
      static_cast<int>(tag.size()), tag.data(), reason.c_str(), PeerText(session->peer()).c_str(),
      released, absl::ToDoubleSeconds(absl::Now() - session->created()));
  if (hook) hook(reason);
  return released;
}

absl::StatusOr<BufferEntry> SessionManager::AddBuffer(Session& session, Backend& backend,
                                                      std::unique_ptr<Region> region,
                                                      bool allocated) {
  absl::MutexLock lock(&session.mu_);
  if (session.ended_)
    return absl::NotFoundError(
        absl::StrCat("session_id=\"", EchoClientString(session.id()), "\" ended"));
  if (session.buffers_.size() >= limits_.max_buffers_per_session) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the session holds ", session.buffers_.size(),
                     " buffers, the limit (--max_buffers_per_session)"));
  }
  if (allocated) {
    uint64_t held = 0;
    for (const auto& [id, e] : session.buffers_) {
      if (e.region->owned()) held += e.region->size();
    }
    if (held + region->size() > limits_.max_allocated_bytes_per_session) {
      return absl::ResourceExhaustedError(
          absl::StrCat("size=", region->size(), " on top of the ", held,
                       " bytes this session allocated exceeds --max_session_bytes=",
                       limits_.max_allocated_bytes_per_session));
    }
  }
  BufferEntry entry;
  entry.id = session.next_buffer_id_++;
  entry.region = std::shared_ptr<const Region>(std::move(region));
  entry.backend = &backend;
  session.buffers_[entry.id] = entry;
  return entry;
}

absl::StatusOr<BufferEntry> SessionManager::Register(Session& session, Backend& backend,
                                                     const MemoryHandle& handle) {
  {
    absl::MutexLock lock(&session.mu_);
    if (session.buffers_.size() >= limits_.max_buffers_per_session) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the session holds ", session.buffers_.size(),
                       " buffers, the limit (--max_buffers_per_session)"));
    }
  }
  KD_ASSIGN_OR_RETURN(std::unique_ptr<Region> region, backend.Import(handle));
  return AddBuffer(session, backend, std::move(region), /*allocated=*/false);
}

absl::StatusOr<Allocation> SessionManager::Allocate(Session& session, Backend& backend, int device,
                                                    uint64_t bytes) {
  {
    const Session::Usage u = session.usage();
    if (u.allocated_bytes + bytes > limits_.max_allocated_bytes_per_session ||
        bytes > limits_.max_allocated_bytes_per_session) {
      return absl::ResourceExhaustedError(
          absl::StrCat("size=", bytes, " on top of the ", u.allocated_bytes,
                       " bytes this session allocated exceeds --max_session_bytes=",
                       limits_.max_allocated_bytes_per_session));
    }
  }
  KD_ASSIGN_OR_RETURN(std::unique_ptr<Region> region, backend.Allocate(device, bytes));
  Allocation allocation;
  KD_ASSIGN_OR_RETURN(allocation.handle, backend.Export(*region));
  allocation.fd.reset(allocation.handle.fd);  // owned from here: closed on every failure below
  KD_ASSIGN_OR_RETURN(allocation.entry, AddBuffer(session, backend, std::move(region), true));
  return allocation;
}

absl::Status SessionManager::Release(Session& session, uint64_t buffer_id) {
  BufferEntry entry;
  {
    absl::MutexLock lock(&session.mu_);
    auto it = session.buffers_.find(buffer_id);
    if (it == session.buffers_.end()) {
      return absl::NotFoundError(
          absl::StrCat("buffer_id=", buffer_id, " is not a buffer of this session"));
    }
    entry = std::move(it->second);
    session.buffers_.erase(it);
  }
  return absl::OkStatus();  // `entry` goes out of scope outside the lock
}

void SessionManager::ReapExpired() {
  std::vector<std::string> expired;
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) {
      if (s->lease_seconds() > 0 && now - s->last_activity() > absl::Seconds(s->lease_seconds())) {
        expired.push_back(id);
      }
    }
  }
  for (const auto& id : expired) Close(id, "lease expired").IgnoreError();
}

ManagerStats SessionManager::Stats() const {
  ManagerStats st;
  for (const auto& s : List()) {
    ++st.sessions;
    absl::MutexLock lock(&s->mu_);
    for (const auto& [id, e] : s->buffers_) {
      ++st.buffers;
      st.buffer_bytes += e.region->size();
      if (!e.region->owned()) ++st.imported_mappings;
    }
  }
  return st;
}

std::vector<std::shared_ptr<Session>> SessionManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Session>> out;
  for (const auto& [id, s] : sessions_) out.push_back(s);
  return out;
}

}  // namespace kd
