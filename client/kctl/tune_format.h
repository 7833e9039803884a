// What `kctl tune` and `kctl cache` read and print: tune shapes on the command line and in
// files, the progress line, the per-shape result table, and the cache listing.
#ifndef KERNELD_CLIENT_KCTL_TUNE_FORMAT_H_
#define KERNELD_CLIENT_KCTL_TUNE_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kd {
namespace kctl {

// A shape as "<variant>:<M>x<N>x<K>[:g<groups>][:<out dtype>]", e.g. "nt:4096x7168x2048",
// "m_grouped_nt:16384x4096x7168:g8", "tn:7168x2048x8192:f32". Variants: nt, nn, tn,
// m_grouped_nt, k_grouped_tn; out dtype bf16 (default) or f32. INVALID_ARGUMENT naming the part.
absl::StatusOr<kerneld::v1::TuneShape> ParseTuneShape(absl::string_view text);
// One shape a line; blank lines and '#' comments are skipped. Errors name the line.
absl::StatusOr<std::vector<kerneld::v1::TuneShape>> ParseTuneShapes(absl::string_view contents);
// The form ParseTuneShape reads (groups and dtype written only when not the default).
std::string FormatTuneShape(const kerneld::v1::TuneShape& shape);

// "812 ns", "45.2 us", "1.23 ms", "2.50 s"; "-" for zero or less.
std::string FormatKernelTime(double seconds);

// "[#######.............] 3/10  nt:4096x7168x2048  eta 1m20s", `width` characters of bar.
std::string ProgressLine(const kerneld::v1::TuneProgress& progress, int width = 20);

// SHAPE, DEFAULT, TUNED, SPEEDUP, CONFIG per shape (and ERROR for a shape that failed).
std::string FormatTuneTable(const std::vector<kerneld::v1::TuneProgress>& results);

// KEY, CONFIG, TUNED, DEFAULT, SPEEDUP, PINNED, and the file path.
std::string FormatCacheTable(const kerneld::v1::ListCacheResponse& list);
// {"path": ..., "entries": [{"key", "config", "seconds", "default_seconds", "pinned"}]}.
std::string FormatCacheJson(const kerneld::v1::ListCacheResponse& list);

}  // namespace kctl
}  // namespace kd

#endif  // KERNELD_CLIENT_KCTL_TUNE_FORMAT_H_
