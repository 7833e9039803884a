// Readiness and stopping notifications to the service manager (systemd's Type=notify protocol),
// without libsystemd: one datagram to the Unix socket named by $NOTIFY_SOCKET.
#ifndef KERNELD_SERVER_SERVICE_NOTIFY_H_
#define KERNELD_SERVER_SERVICE_NOTIFY_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kd {

// Sends `state` (newline-separated assignments such as "READY=1" or "STOPPING=1", see
// sd_notify(3)) to $NOTIFY_SOCKET: a path, or an abstract address written with a leading '@'.
// OK and nothing sent when the variable is unset or empty (not run by a service manager).
// INVALID_ARGUMENT for an address that is neither form or too long; UNAVAILABLE when the
// datagram cannot be sent (errno's text).
absl::Status NotifyServiceManager(absl::string_view state);

}  // namespace kd

#endif  // KERNELD_SERVER_SERVICE_NOTIFY_H_
