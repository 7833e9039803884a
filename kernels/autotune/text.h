// Helpers shared by the autotune sources: field escaping for the key and file formats, and the
// CRC-32C checksum of the cache file. Not part of the public API.
#ifndef KERNELD_KERNELS_AUTOTUNE_TEXT_H_
#define KERNELD_KERNELS_AUTOTUNE_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kd {
namespace autotune_internal {

// Appends `s` with '%', ':' and every byte outside 0x20..0x7e written as %XX (upper-case hex),
// so the result holds no separator, tab or newline.
void AppendEscaped(std::string& out, absl::string_view s);
std::string Escaped(absl::string_view s);
// The reverse. INVALID_ARGUMENT naming `field` for a '%' without two hex digits after it.
absl::StatusOr<std::string> Unescape(absl::string_view s, absl::string_view field);

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI and ext4 use it:
// Crc32c("123456789") == 0xE3069283. `crc` continues an earlier value.
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

}  // namespace autotune_internal
}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_TEXT_H_
