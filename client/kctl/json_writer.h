// A small streaming JSON writer for kctl's --json output: objects, arrays, strings, numbers,
// booleans and null, pretty-printed with two-space indentation and keys in the order written
// (so the output of a given message is stable and diffable).
#ifndef KERNELD_CLIENT_KCTL_JSON_WRITER_H_
#define KERNELD_CLIENT_KCTL_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kd {
namespace kctl {

// Usage: BeginObject(); Key("a"); Uint(1); Key("b"); BeginArray(); String("x"); EndArray();
// EndObject(); then str(). Every value inside an object must follow a Key(). The writer does not
// check nesting beyond what it needs for separators; callers write well-formed sequences.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(absl::string_view key);
  JsonWriter& String(absl::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  // Finite values with up to `decimals` digits after the point, trailing zeros dropped;
  // NaN and infinities, which JSON cannot hold, as null.
  JsonWriter& Double(double value, int decimals = 6);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // The document so far, with a final newline once the outermost value is closed.
  const std::string& str() const { return out_; }

  // `value` as a JSON string literal, quotes included: ", \ and control characters escaped,
  // other bytes (UTF-8 included) copied.
  static std::string Quote(absl::string_view value);

 private:
  void BeforeValue();
  void Open(char bracket);
  void Close(char bracket);
  void Newline();

  struct Level {
    bool is_object;
    int count;
  };
  std::string out_;
  std::vector<Level> stack_;
  bool after_key_ = false;
};

}  // namespace kctl
}  // namespace kd

#endif  // KERNELD_CLIENT_KCTL_JSON_WRITER_H_
