// Deterministic test data shared by the GPU tests and their peer processes: element i of
// pattern `seed` is a finite bf16 of moderate magnitude (so that quantizing it is meaningful),
// and a buffer's bytes are those elements in little-endian order.
#ifndef KERNELD_TESTS_GPU_PATTERN_H_
#define KERNELD_TESTS_GPU_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace kd {
namespace testing {

inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint16_t PatternBF16(uint64_t seed, uint64_t i) {
  const uint64_t r = Mix64(seed * 0x100000001B3ull + i);
  const uint16_t sign = static_cast<uint16_t>((r & 1) << 15);
  const uint16_t exp = static_cast<uint16_t>(112 + (r >> 8) % 24);  // 2^-15 .. 2^8
  const uint16_t man = static_cast<uint16_t>((r >> 16) & 0x7F);
  return static_cast<uint16_t>(sign | (exp << 7) | man);
}

inline void FillPattern(uint64_t seed, void* data, size_t bytes) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t b = 0; b < bytes; ++b) {
    const uint16_t v = PatternBF16(seed, b / 2);
    p[b] = static_cast<uint8_t>(b % 2 == 0 ? v & 0xFF : v >> 8);
  }
}

inline uint64_t Fnv1a(const void* data, size_t bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

inline std::string ToHex(const void* data, size_t bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

inline std::string FromHex(const std::string& hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return 0;
  };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
  }
  return out;
}

}  // namespace testing
}  // namespace kd

#endif  // KERNELD_TESTS_GPU_PATTERN_H_
