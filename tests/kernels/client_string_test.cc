#include "kerneld/kernels/client_string.h"

#include <string>

#include "gtest/gtest.h"

namespace kd {
namespace {

TEST(EchoClientStringTest, ShortValuesComeBackWhole) {
  EXPECT_EQ(EchoClientString(""), "");
  EXPECT_EQ(EchoClientString(std::string(128, 'a')), std::string(128, 'a'));
}

TEST(EchoClientStringTest, LongValuesAreCutAt128BytesAndMarkedWithTheirSize) {
  EXPECT_EQ(EchoClientString(std::string(16384, 'a')),
            std::string(128, 'a') + "...(truncated, 16384 bytes)");
  EXPECT_EQ(EchoClientString(std::string(129, 'a')),
            std::string(128, 'a') + "...(truncated, 129 bytes)");
}

TEST(EchoClientStringTest, TheCutNeverSplitsAUtf8Character) {
  // 127 ASCII bytes, then a 3-byte character straddling the 128-byte mark.
  const std::string value = std::string(127, 'a') + "\xe2\x82\xac" + std::string(100, 'b');
  EXPECT_EQ(EchoClientString(value), std::string(127, 'a') + "...(truncated, 230 bytes)");
}

TEST(CheckNoNulTest, NamesTheFieldAndTheOffset) {
  EXPECT_TRUE(CheckNoNul("shm_name", "/name").ok());
  const absl::Status s = CheckNoNul("shm_name", std::string("/name\0x", 7));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "shm_name=\"/name\\0...\" holds a NUL byte at offset 5");
}

}  // namespace
}  // namespace kd
