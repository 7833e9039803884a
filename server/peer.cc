#include "server/peer.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kd {

absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::InternalError(absl::StrCat("SO_PEERCRED: ", std::strerror(errno)));
  }
  PeerCredentials peer;
  peer.pid = cred.pid;
  peer.uid = cred.uid;
  peer.gid = cred.gid;
  std::vector<gid_t> groups(64);
  for (;;) {
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) break;
    if (errno != ERANGE) {
      return absl::InternalError(absl::StrCat("SO_PEERGROUPS: ", std::strerror(errno)));
    }
    groups.resize(std::max<size_t>(len / sizeof(gid_t), groups.size() * 2));  // len: what it needs
  }
  groups.resize(len / sizeof(gid_t));
  peer.groups = std::move(groups);
  return peer;
}

bool PeerMayReadWrite(const PeerCredentials& peer, const struct stat& st) {
  if (peer.uid == 0) return true;
  if (st.st_uid == peer.uid) return (st.st_mode & 0600) == 0600;
  const bool in_group = st.st_gid == peer.gid || std::find(peer.groups.begin(), peer.groups.end(),
                                                           st.st_gid) != peer.groups.end();
  if (in_group) return (st.st_mode & 0060) == 0060;
  return (st.st_mode & 0006) == 0006;
}

void PeerTable::Set(int fd, PeerCredentials credentials) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = std::move(credentials);
}

std::optional<PeerCredentials> PeerTable::Find(const std::string& grpc_peer) const {
  int fd = -1;
  if (!absl::StartsWith(grpc_peer, "fd:") || !absl::SimpleAtoi(grpc_peer.substr(3), &fd)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

}  // namespace kd
