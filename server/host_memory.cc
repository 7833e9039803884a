#include "server/host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/client_string.h"

namespace kd {
namespace {

absl::Status CannotOpen(const std::string& name, int err) {
  return absl::InvalidArgumentError(absl::StrCat("shm_name=\"", EchoClientString(name),
                                                 "\" cannot be opened: ", std::strerror(err)));
}

bool HasAcl(int fd) { return fgetxattr(fd, "system.posix_acl_access", nullptr, 0) >= 0; }

}  // namespace

absl::StatusOr<UniqueFd> OpenShmForPeers(
    const std::string& name, absl::Span<const std::optional<PeerCredentials>* const> peers) {
  if (name.empty()) return absl::InvalidArgumentError("shm_name is required on the cpu backend");
  if (absl::Status s = CheckNoNul("shm_name", name); !s.ok()) return s;
  if (name[0] != '/' || name.size() < 2 || name.size() > 255 ||
      name.find('/', 1) != std::string::npos || name == "/." || name == "/..") {
    return absl::InvalidArgumentError(
        absl::StrCat("shm_name=\"", EchoClientString(name),
                     "\" must be \"/name\" with no other '/' and at most 255 bytes"));
  }
  // O_NONBLOCK: a FIFO planted in /dev/shm must not hang the daemon before the type check.
  UniqueFd fd(shm_open(name.c_str(), O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0));
  if (!fd.valid()) return CannotOpen(name, errno);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return CannotOpen(name, errno);
  bool allowed = S_ISREG(st.st_mode);
  for (const std::optional<PeerCredentials>* peer : peers) {
    allowed = allowed && peer->has_value() && PeerMayReadWrite(**peer, st) &&
              ((*peer)->uid == 0 || !HasAcl(fd.get()));
  }
  if (!allowed) return CannotOpen(name, ENOENT);
  // Back to blocking, as mappings and any later use expect.
  const int flags = fcntl(fd.get(), F_GETFL);
  if (flags >= 0) fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace kd
