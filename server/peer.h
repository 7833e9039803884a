// Who is at the other end of a Unix connection, and what that peer could open itself.
//
// The daemon never opens a client's memory with its own rights alone: memory comes as a
// descriptor the client sent, or as a name the daemon opens and then checks against the
// credentials of the peer it acts for (PeerMayReadWrite). Credentials come from the kernel
// (SO_PEERCRED, SO_PEERGROUPS: the peer's identity when it connected), never from the client.
#ifndef KERNELD_SERVER_PEER_H_
#define KERNELD_SERVER_PEER_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kd {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;              // primary group
  std::vector<gid_t> groups;  // supplementary groups
};

// SO_PEERCRED and SO_PEERGROUPS of the connected Unix socket `fd`. INTERNAL when the kernel
// does not give them (not a Unix socket).
absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd);

// Whether `peer` may open an object with `st`'s owner, group and mode for reading and writing,
// decided as the kernel decides it from the mode bits: uid 0 may; the owner needs both owner
// bits, else a member of the object's group (primary or supplementary) both group bits, else
// everyone else both other bits. POSIX ACLs are not read: callers refuse objects that carry one.
bool PeerMayReadWrite(const PeerCredentials& peer, const struct stat& st);

// The credentials of the connections the daemon accepted itself and handed to gRPC. gRPC names
// such a connection's calls with the peer string "fd:<n>", <n> the connection's descriptor: the
// acceptor records each connection's credentials under <n> before gRPC sees it, so a live
// connection always finds its own. A number is reused only after gRPC closed the connection
// that had it, and the next accept that gets it overwrites the entry. Thread-safe.
class PeerTable {
 public:
  void Set(int fd, PeerCredentials credentials) ABSL_LOCKS_EXCLUDED(mu_);
  // The credentials recorded for a call's `grpc_peer` string; nullopt for any peer the daemon
  // did not accept itself (TCP).
  std::optional<PeerCredentials> Find(const std::string& grpc_peer) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, PeerCredentials> by_fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kd

#endif  // KERNELD_SERVER_PEER_H_
