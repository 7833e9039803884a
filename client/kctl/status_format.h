// What `kctl status` prints for a StatusResponse: a table for people and JSON for scripts.
#ifndef KERNELD_CLIENT_KCTL_STATUS_FORMAT_H_
#define KERNELD_CLIENT_KCTL_STATUS_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kerneld/v1/kerneld.pb.h"

namespace kd {
namespace kctl {

// A header line (version, uptime, state), the sockets and backends, a devices table with
// memory, a sessions table with buffers, bytes, age, idle time and lease, and a totals line.
std::string FormatStatusTable(const kerneld::v1::StatusResponse& status);

// The same content as a JSON object whose keys are the StatusResponse field names (snake case)
// and whose shape follows the message: every field is present, even at its default value; 64-bit
// counts are JSON numbers (not strings as in the proto3 JSON mapping); seconds are numbers with
// millisecond precision. Scripts may rely on these keys:
//   version, uptime_seconds, draining, data_socket, metrics_address, backends[],
//   devices[]{backend, ordinal, name, arch, healthy, memory_total_bytes, memory_used_bytes,
//             memory_pooled_bytes, memory_imported_bytes},
//   sessions[]{session_id, client_name, buffers, buffer_bytes, age_seconds, idle_seconds,
//              lease_seconds},
//   sessions_active, buffers_registered, buffer_bytes, ops_completed, ops_failed, shm_faults.
std::string FormatStatusJson(const kerneld::v1::StatusResponse& status);

// "0 B", "512 B", "1.5 KiB", "3.0 MiB", "15.6 GiB", "2.0 TiB".
std::string FormatBytes(uint64_t bytes);
// "0.4s", "12.3s", "4m05s", "2h03m", "3d04h"; "-" for a negative or non-finite value.
std::string FormatSeconds(double seconds);

// Columns padded to their widest cell, two spaces apart; columns flagged numeric are
// right-aligned. Every row has one cell per header.
std::string RenderTable(const std::vector<std::string>& headers, const std::vector<bool>& numeric,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace kctl
}  // namespace kd

#endif  // KERNELD_CLIENT_KCTL_STATUS_FORMAT_H_
