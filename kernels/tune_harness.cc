#include "kerneld/kernels/tune_harness.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kd {

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ParseConfigFields(
    absl::string_view config) {
  std::vector<std::pair<std::string, int64_t>> out;
  if (config.empty()) return absl::InvalidArgumentError("config is empty");
  for (absl::string_view part : absl::StrSplit(config, '.')) {
    size_t i = 0;
    while (i < part.size() && part[i] >= 'a' && part[i] <= 'z') ++i;
    int64_t v = 0;
    const absl::string_view digits = part.substr(i);
    const bool all_digits =
        !digits.empty() &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (i == 0 || !all_digits || digits.size() > 9 || !absl::SimpleAtoi(digits, &v) ||
        (digits.size() > 1 && digits[0] == '0')) {
      return absl::InvalidArgumentError(
          absl::StrCat("config \"", config, "\" field \"", part,
                       "\" is not a lower-case name followed by a decimal integer"));
    }
    out.emplace_back(std::string(part.substr(0, i)), v);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> ParseConfigFieldValues(
    absl::string_view config, std::initializer_list<const char*> names) {
  auto fields = ParseConfigFields(config);
  if (!fields.ok()) return fields.status();
  std::string want;
  for (const char* n : names) absl::StrAppend(&want, want.empty() ? "" : ".", n, "<int>");
  if (fields->size() != names.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config \"", config, "\" has ", fields->size(), " fields, want ", want));
  }
  std::vector<int64_t> values;
  size_t i = 0;
  for (const char* n : names) {
    if ((*fields)[i].first != n) {
      return absl::InvalidArgumentError(absl::StrCat("config \"", config, "\" field ", i, " is \"",
                                                     (*fields)[i].first, "\", want ", want));
    }
    values.push_back((*fields)[i].second);
    ++i;
  }
  return values;
}

}  // namespace kd
