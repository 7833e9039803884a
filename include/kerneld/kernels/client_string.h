// Strings a client sent, as they may appear in a status message or a log line.
//
// A status message travels back in gRPC metadata, whose default limit is 8 KiB: a message that
// echoed a 16 KiB session id whole would make the reply exceed it, and gRPC then tears down the
// caller's connection with every other session on it. Every message that repeats a string from
// a request (session ids, shm names, backend names, tune keys...) passes it through
// EchoClientString, so that the echo is bounded whatever the client sent.
#ifndef KERNELD_KERNELS_CLIENT_STRING_H_
#define KERNELD_KERNELS_CLIENT_STRING_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kd {

// The most bytes of a client string a message repeats.
inline constexpr size_t kEchoBytes = 128;

// `value` whole when it has at most kEchoBytes bytes; else its first kEchoBytes bytes (fewer
// when that would split a UTF-8 sequence) followed by "...(truncated, N bytes)", N the full size.
std::string EchoClientString(absl::string_view value);

// INVALID_ARGUMENT naming `field` when `value` holds a NUL byte (a C API would read it as the
// end of the string, so "/name\0x" would name "/name"); OK otherwise.
absl::Status CheckNoNul(absl::string_view field, absl::string_view value);

}  // namespace kd

#endif  // KERNELD_KERNELS_CLIENT_STRING_H_
