#include "client/kctl/tune_format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/kctl/json_writer.h"
#include "client/kctl/status_format.h"

namespace kd {
namespace kctl {
namespace {

namespace v1 = ::kerneld::v1;

struct VariantName {
  const char* name;
  v1::GemmVariant variant;
};
constexpr VariantName kVariants[] = {{"nt", v1::GEMM_NT},
                                     {"nn", v1::GEMM_NN},
                                     {"tn", v1::GEMM_TN},
                                     {"m_grouped_nt", v1::GEMM_M_GROUPED_NT},
                                     {"k_grouped_tn", v1::GEMM_K_GROUPED_TN}};

std::string VariantText(v1::GemmVariant v) {
  for (const VariantName& n : kVariants) {
    if (n.variant == v) return n.name;
  }
  return "?";
}

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("shape \"", text, "\": ", why,
                   " (want <variant>:<M>x<N>x<K>[:g<groups>][:bf16|f32], e.g. nt:4096x7168x2048)"));
}

std::string Speedup(double default_seconds, double tuned_seconds) {
  if (default_seconds <= 0 || tuned_seconds <= 0) return "-";
  return absl::StrFormat("%.2fx", default_seconds / tuned_seconds);
}

}  // namespace

absl::StatusOr<v1::TuneShape> ParseTuneShape(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() < 2 || parts.size() > 4) return Bad(text, "wrong number of ':' parts");
  v1::TuneShape shape;
  shape.set_op("gemm");
  for (const VariantName& n : kVariants) {
    if (parts[0] == n.name) shape.set_variant(n.variant);
  }
  if (shape.variant() == v1::GEMM_VARIANT_UNSPECIFIED) {
    return Bad(text, absl::StrCat("unknown variant \"", parts[0], "\""));
  }
  const std::vector<absl::string_view> dims = absl::StrSplit(parts[1], 'x');
  int64_t mnk[3];
  if (dims.size() != 3) return Bad(text, "dimensions must be MxNxK");
  for (int i = 0; i < 3; ++i) {
    if (!absl::SimpleAtoi(dims[i], &mnk[i]) || mnk[i] < 1) {
      return Bad(text, absl::StrCat("\"", dims[i], "\" is not a positive integer"));
    }
  }
  shape.set_m(mnk[0]);
  shape.set_n(mnk[1]);
  shape.set_k(mnk[2]);
  shape.set_groups(1);
  shape.set_out_dtype(v1::DTYPE_BF16);
  for (size_t i = 2; i < parts.size(); ++i) {
    absl::string_view part = parts[i];
    int32_t groups = 0;
    if (part == "bf16") {
      shape.set_out_dtype(v1::DTYPE_BF16);
    } else if (part == "f32") {
      shape.set_out_dtype(v1::DTYPE_F32);
    } else if (absl::ConsumePrefix(&part, "g") && absl::SimpleAtoi(part, &groups) && groups >= 1) {
      shape.set_groups(groups);
    } else {
      return Bad(text, absl::StrCat("\"", parts[i], "\" is neither g<groups> nor an out dtype"));
    }
  }
  return shape;
}

absl::StatusOr<std::vector<v1::TuneShape>> ParseTuneShapes(absl::string_view contents) {
  std::vector<v1::TuneShape> out;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    absl::StatusOr<v1::TuneShape> shape = ParseTuneShape(line);
    if (!shape.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": ", shape.status().message()));
    }
    out.push_back(*std::move(shape));
  }
  return out;
}

std::string FormatTuneShape(const v1::TuneShape& s) {
  std::string out = absl::StrCat(VariantText(s.variant()), ":", s.m(), "x", s.n(), "x", s.k());
  if (s.groups() > 1) absl::StrAppend(&out, ":g", s.groups());
  if (s.out_dtype() == v1::DTYPE_F32) absl::StrAppend(&out, ":f32");
  return out;
}

std::string FormatKernelTime(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return "-";
  if (seconds < 1e-6) return absl::StrFormat("%.0f ns", seconds * 1e9);
  if (seconds < 1e-3) return absl::StrFormat("%.1f us", seconds * 1e6);
  if (seconds < 1.0) return absl::StrFormat("%.2f ms", seconds * 1e3);
  return absl::StrFormat("%.2f s", seconds);
}

std::string ProgressLine(const v1::TuneProgress& p, int width) {
  const int total = std::max(1, p.total());
  const int done = std::min(total, p.index() + 1);
  const int filled = static_cast<int>(static_cast<int64_t>(width) * done / total);
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "] ", done,
                      "/", p.total(), "  ", FormatTuneShape(p.shape()), "  eta ",
                      FormatSeconds(p.eta_seconds()));
}

std::string FormatTuneTable(const std::vector<v1::TuneProgress>& results) {
  std::vector<std::vector<std::string>> rows;
  bool any_error = false;
  for (const v1::TuneProgress& p : results) any_error |= !p.error().empty();
  for (const v1::TuneProgress& p : results) {
    std::vector<std::string> row = {
        FormatTuneShape(p.shape()), FormatKernelTime(p.default_seconds()),
        FormatKernelTime(p.tuned_seconds()), Speedup(p.default_seconds(), p.tuned_seconds()),
        p.config().empty() ? "-" : p.config()};
    if (any_error) row.push_back(p.error());
    rows.push_back(std::move(row));
  }
  std::vector<std::string> headers = {"SHAPE", "DEFAULT", "TUNED", "SPEEDUP", "CONFIG"};
  std::vector<bool> numeric = {false, true, true, true, false};
  if (any_error) {
    headers.push_back("ERROR");
    numeric.push_back(false);
  }
  return RenderTable(headers, numeric, rows);
}

std::string FormatCacheTable(const v1::ListCacheResponse& list) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::CacheEntry& e : list.entries()) {
    rows.push_back({e.key(), e.config(), FormatKernelTime(e.seconds()),
                    FormatKernelTime(e.default_seconds()),
                    Speedup(e.default_seconds(), e.seconds()), e.pinned() ? "pinned" : ""});
  }
  std::string out = RenderTable({"KEY", "CONFIG", "TUNED", "DEFAULT", "SPEEDUP", "PINNED"},
                                {false, false, true, true, true, false}, rows);
  absl::StrAppend(&out, list.entries_size(), " entries, file ",
                  list.path().empty() ? "(none: in memory only)" : list.path(), "\n");
  return out;
}

std::string FormatCacheJson(const v1::ListCacheResponse& list) {
  JsonWriter w;
  w.BeginObject().Key("path").String(list.path()).Key("entries").BeginArray();
  for (const v1::CacheEntry& e : list.entries()) {
    w.BeginObject()
        .Key("key")
        .String(e.key())
        .Key("config")
        .String(e.config())
        .Key("seconds")
        .Double(e.seconds(), 9)
        .Key("default_seconds")
        .Double(e.default_seconds(), 9)
        .Key("pinned")
        .Bool(e.pinned())
        .EndObject();
  }
  w.EndArray().EndObject();
  return w.str();
}

}  // namespace kctl
}  // namespace kd
