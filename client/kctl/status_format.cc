#include "client/kctl/status_format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/kctl/json_writer.h"

namespace kd {
namespace kctl {

namespace v1 = ::kerneld::v1;

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatSeconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  if (seconds < 60) return absl::StrFormat("%.1fs", seconds);
  const int64_t s = static_cast<int64_t>(seconds);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

std::string RenderTable(const std::vector<std::string>& headers, const std::vector<bool>& numeric,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(headers.size());
  for (size_t c = 0; c < headers.size(); ++c) width[c] = headers[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < headers.size() && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < headers.size(); ++c) {
      const std::string& cell = c < cells.size() ? cells[c] : std::string();
      const std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) line += "  ";
      const bool right = c < numeric.size() && numeric[c];
      line += right ? pad + cell : cell + pad;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  };
  emit(headers);
  for (const auto& row : rows) emit(row);
  return out;
}

std::string FormatStatusTable(const v1::StatusResponse& status) {
  std::string out = absl::StrFormat(
      "kerneld %s  up %s  %s\n", status.version().empty() ? "(unknown version)" : status.version(),
      FormatSeconds(status.uptime_seconds()), status.draining() ? "DRAINING" : "serving");
  auto field = [](absl::string_view value) {
    return value.empty() ? std::string("-") : std::string(value);
  };
  absl::StrAppend(&out, "data socket  ", field(status.data_socket()), "\n");
  absl::StrAppend(&out, "metrics      ", field(status.metrics_address()), "\n");
  absl::StrAppend(&out, "backends     ",
                  status.backends().empty() ? "-" : absl::StrJoin(status.backends(), ", "), "\n\n");

  if (status.devices().empty()) {
    absl::StrAppend(&out, "no devices\n");
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const v1::DeviceInfo& d : status.devices()) {
      rows.push_back({absl::StrCat(d.backend(), ":", d.ordinal()), field(d.name()), field(d.arch()),
                      d.healthy() ? "ok" : "UNHEALTHY", FormatBytes(d.memory_total_bytes()),
                      FormatBytes(d.memory_used_bytes()), FormatBytes(d.memory_pooled_bytes()),
                      FormatBytes(d.memory_imported_bytes())});
    }
    absl::StrAppend(&out, RenderTable({"DEVICE", "NAME", "ARCH", "HEALTH", "TOTAL", "USED",
                                       "POOLED", "IMPORTED"},
                                      {false, false, false, false, true, true, true, true}, rows));
  }
  absl::StrAppend(&out, "\n");

  if (status.sessions().empty()) {
    absl::StrAppend(&out, "no sessions\n");
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const v1::SessionInfo& s : status.sessions()) {
      rows.push_back(
          {s.session_id(), field(s.client_name()),
           s.pid() > 0 ? absl::StrCat(s.pid()) : std::string("-"),
           s.uid() >= 0 ? absl::StrCat(s.uid()) : std::string("-"), absl::StrCat(s.buffers()),
           FormatBytes(s.buffer_bytes()), FormatSeconds(s.age_seconds()),
           FormatSeconds(s.idle_seconds()),
           s.lease_seconds() == 0 ? std::string("stream") : absl::StrCat(s.lease_seconds(), "s")});
    }
    absl::StrAppend(
        &out,
        RenderTable({"SESSION", "CLIENT", "PID", "UID", "BUFFERS", "BYTES", "AGE", "IDLE", "LEASE"},
                    {false, false, true, true, true, true, true, true, true}, rows));
  }
  absl::StrAppend(&out, "\n");

  absl::StrAppend(
      &out, absl::StrFormat(
                "total  %d session%s, %d buffer%s, %s; ops %d completed, %d failed\n",
                status.sessions_active(), status.sessions_active() == 1 ? "" : "s",
                status.buffers_registered(), status.buffers_registered() == 1 ? "" : "s",
                FormatBytes(status.buffer_bytes()), status.ops_completed(), status.ops_failed()));
  return out;
}

std::string FormatStatusJson(const v1::StatusResponse& status) {
  constexpr int kSecondsDecimals = 3;
  JsonWriter w;
  w.BeginObject();
  w.Key("version").String(status.version());
  w.Key("uptime_seconds").Double(status.uptime_seconds(), kSecondsDecimals);
  w.Key("draining").Bool(status.draining());
  w.Key("data_socket").String(status.data_socket());
  w.Key("metrics_address").String(status.metrics_address());
  w.Key("backends").BeginArray();
  for (const std::string& b : status.backends()) w.String(b);
  w.EndArray();
  w.Key("devices").BeginArray();
  for (const v1::DeviceInfo& d : status.devices()) {
    w.BeginObject();
    w.Key("backend").String(d.backend());
    w.Key("ordinal").Int(d.ordinal());
    w.Key("name").String(d.name());
    w.Key("arch").String(d.arch());
    w.Key("healthy").Bool(d.healthy());
    w.Key("memory_total_bytes").Uint(d.memory_total_bytes());
    w.Key("memory_used_bytes").Uint(d.memory_used_bytes());
    w.Key("memory_pooled_bytes").Uint(d.memory_pooled_bytes());
    w.Key("memory_imported_bytes").Uint(d.memory_imported_bytes());
    w.EndObject();
  }
  w.EndArray();
  w.Key("sessions").BeginArray();
  for (const v1::SessionInfo& s : status.sessions()) {
    w.BeginObject();
    w.Key("session_id").String(s.session_id());
    w.Key("client_name").String(s.client_name());
    w.Key("buffers").Uint(s.buffers());
    w.Key("buffer_bytes").Uint(s.buffer_bytes());
    w.Key("age_seconds").Double(s.age_seconds(), kSecondsDecimals);
    w.Key("idle_seconds").Double(s.idle_seconds(), kSecondsDecimals);
    w.Key("lease_seconds").Uint(s.lease_seconds());
    w.Key("submit_ring").Bool(s.submit_ring());
    w.Key("pid").Int(s.pid());
    w.Key("uid").Int(s.uid());
    w.EndObject();
  }
  w.EndArray();
  w.Key("sessions_active").Uint(status.sessions_active());
  w.Key("buffers_registered").Uint(status.buffers_registered());
  w.Key("buffer_bytes").Uint(status.buffer_bytes());
  w.Key("ops_completed").Uint(status.ops_completed());
  w.Key("ops_failed").Uint(status.ops_failed());
  w.Key("shm_faults").Uint(status.shm_faults());
  w.EndObject();
  return w.str();
}

}  // namespace kctl
}  // namespace kd
