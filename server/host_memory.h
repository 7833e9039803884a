// Host memory a client names instead of sending its descriptor (RegisterBuffer.shm_name,
// AttachSubmitRing.shm_name): opened only if the client could have opened it itself.
#ifndef KERNELD_SERVER_HOST_MEMORY_H_
#define KERNELD_SERVER_HOST_MEMORY_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/peer.h"
#include "server/unique_fd.h"

namespace kd {

// Opens the POSIX shm object `name` ("/name") read-write, then checks the opened object (no
// race with a rename) against every peer in `peers`: it must be a regular file without a POSIX
// ACL that each of them may read and write (PeerMayReadWrite). A peer that is nullopt (not
// known, e.g. over TCP) may open nothing.
//
// INVALID_ARGUMENT 'shm_name="<name>" cannot be opened: No such file or directory' both for a
// missing object and for one that a peer may not open, word for word, so that a refusal tells a
// client nothing an unknown name would not; the errno's text for other open failures of the
// daemon's own. INVALID_ARGUMENT naming the rule for an empty or malformed name, or one holding
// a NUL byte.
absl::StatusOr<UniqueFd> OpenShmForPeers(
    const std::string& name, absl::Span<const std::optional<PeerCredentials>* const> peers);

}  // namespace kd

#endif  // KERNELD_SERVER_HOST_MEMORY_H_
