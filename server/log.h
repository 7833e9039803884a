// Timestamped, levelled logging to stderr (Debian's Abseil 20220623 predates absl/log). One line
// per event, "<UTC time> kerneld <level>: <text>", so that journald and `kubectl logs` keep each
// event whole. Thread-safe: each line is one fprintf to unbuffered stderr.
#ifndef KERNELD_SERVER_LOG_H_
#define KERNELD_SERVER_LOG_H_

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/peer.h"

namespace kd {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

namespace log_internal {
inline std::atomic<int>& Threshold() {
  static std::atomic<int> level{static_cast<int>(LogLevel::kInfo)};
  return level;
}
inline const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}
inline void Write(LogLevel level, const char* fmt, va_list ap) {
  char line[2048];
  vsnprintf(line, sizeof(line), fmt, ap);
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::fprintf(stderr, "%s kerneld %s: %s\n", ts.c_str(), LevelName(level), line);
}
}  // namespace log_internal

// Lines below `level` are dropped. The default is kInfo.
inline void SetLogLevel(LogLevel level) {
  log_internal::Threshold().store(static_cast<int>(level), std::memory_order_relaxed);
}
inline bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= log_internal::Threshold().load(std::memory_order_relaxed);
}
// "debug", "info", "warning" or "error"; false for anything else.
inline bool ParseLogLevel(absl::string_view name, LogLevel* level) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (name == log_internal::LevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

inline void LogAt(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline void LogAt(LogLevel level, const char* fmt, ...) {
  if (!LogEnabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  log_internal::Write(level, fmt, ap);
  va_end(ap);
}

// Info level: what an operator wants in the journal by default (start, stop, sessions, tunes).
inline void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void Log(const char* fmt, ...) {
  if (!LogEnabled(LogLevel::kInfo)) return;
  va_list ap;
  va_start(ap, fmt);
  log_internal::Write(LogLevel::kInfo, fmt, ap);
  va_end(ap);
}

// `text` with every control character (newline included) as '?', so that a string a client
// sent cannot forge or split log lines.
inline std::string OneLine(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

// `text` with every run of 32 hex digits (a session id, as status messages quote it) cut to its
// first 8 and "...": see SessionTag.
inline std::string RedactSessionIds(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && absl::ascii_isxdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j - i >= 32) {
      out.append(text.data() + i, 8);
      out.append("...");
    } else {
      out.append(text.data() + i, j - i);
    }
    if (j < text.size()) out.push_back(text[j]);
    i = j + 1;
  }
  return out;
}

// How a session appears in the log: the first 8 hex digits of its id. A session id is a bearer
// token on the data socket, and logs are read by more people than may use it.
inline absl::string_view SessionTag(absl::string_view session_id) {
  return session_id.substr(0, 8);
}

// "pid=1234 uid=1000" of the process that opened a session (its data-socket connection's
// SO_PEERCRED), or "pid=? uid=?" when the connection's credentials are not known (TCP).
inline std::string PeerText(const std::optional<PeerCredentials>& peer) {
  if (!peer.has_value()) return "pid=? uid=?";
  return "pid=" + std::to_string(peer->pid) + " uid=" + std::to_string(peer->uid);
}

// A request's outcome, once it is known: a refusal (any error a client caused: bad argument,
// unknown buffer, over quota, draining) at debug level, and an error of the daemon itself
// (INTERNAL, UNKNOWN, DATA_LOSS) at error level, with the request's context. OK logs nothing.
// `session` may be empty (calls without one); `detail` names the op or the batch when known.
inline void LogRequestOutcome(absl::string_view method, absl::string_view session,
                              absl::string_view detail, const absl::Status& status) {
  if (status.ok()) return;
  const absl::StatusCode code = status.code();
  const bool daemon_error = code == absl::StatusCode::kInternal ||
                            code == absl::StatusCode::kUnknown ||
                            code == absl::StatusCode::kDataLoss;
  const LogLevel level = daemon_error ? LogLevel::kError : LogLevel::kDebug;
  if (!LogEnabled(level)) return;
  const std::string code_name = absl::StatusCodeToString(code);
  const std::string tag = session.empty() ? "-" : OneLine(SessionTag(session));
  const std::string message = OneLine(RedactSessionIds(status.message()));
  LogAt(level, "%s %.*s session=%s%s%.*s: %s: %s", daemon_error ? "failed" : "refused",
        static_cast<int>(method.size()), method.data(), tag.c_str(),
        detail.empty() ? "" : " op=", static_cast<int>(detail.size()), detail.data(),
        code_name.c_str(), message.c_str());
}

}  // namespace kd

#endif  // KERNELD_SERVER_LOG_H_
