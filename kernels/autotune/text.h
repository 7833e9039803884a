// The CRC-32C checksum of the cache file. Not part of the public API; the cache file's text
// fields are escaped as the tune key's are (AppendKeyEscaped, autotune_key.h).
#ifndef KERNELD_KERNELS_AUTOTUNE_TEXT_H_
#define KERNELD_KERNELS_AUTOTUNE_TEXT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace kd {
namespace autotune_internal {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI and ext4 use it:
// Crc32c("123456789") == 0xE3069283. `crc` continues an earlier value.
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

}  // namespace autotune_internal
}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_TEXT_H_
