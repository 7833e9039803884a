#include "kerneld/kernels/client_string.h"

#include "absl/strings/str_cat.h"

namespace kd {

std::string EchoClientString(absl::string_view value) {
  if (value.size() <= kEchoBytes) return std::string(value);
  size_t cut = kEchoBytes;
  // Back off over continuation bytes (10xxxxxx) so that the cut starts no partial character.
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(value.substr(0, cut), "...(truncated, ", value.size(), " bytes)");
}

absl::Status CheckNoNul(absl::string_view field, absl::string_view value) {
  const size_t nul = value.find('\0');
  if (nul == absl::string_view::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, "=\"",
                                                 EchoClientString(value.substr(0, nul)),
                                                 "\\0...\" holds a NUL byte at offset ", nul));
}

}  // namespace kd
