// A small JSON reader for test manifests (tests/data/golden/manifest.json): objects, arrays,
// strings (with \" \\ \/ \n \t and \u00XX escapes), numbers, true/false/null. Not for untrusted or
// large input; malformed text gives std::nullopt.
#ifndef KERNELD_TESTS_KERNELS_MINI_JSON_H_
#define KERNELD_TESTS_KERNELS_MINI_JSON_H_

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kd {
namespace testing_json {

struct Value {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  bool Has(const std::string& key) const { return kind == kObject && object.count(key) > 0; }
  const Value& operator[](const std::string& key) const {
    static const Value kMissing;
    auto it = object.find(key);
    return it == object.end() ? kMissing : it->second;
  }
  const Value& operator[](size_t i) const { return array[i]; }
  size_t size() const { return kind == kArray ? array.size() : object.size(); }
  int64_t AsInt() const { return static_cast<int64_t>(number); }
  std::vector<int64_t> AsInts() const {
    std::vector<int64_t> out;
    for (const Value& v : array) out.push_back(v.AsInt());
    return out;
  }
};

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}
  std::optional<Value> Parse() {
    Value v;
    if (!ParseValue(v)) return std::nullopt;
    SkipSpace();
    if (pos_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Literal(const char* word) {
    const std::string w(word);
    if (s_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }
  bool ParseString(std::string& out) {
    if (s_[pos_] != '"') return false;
    ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) return false;
        const char e = s_[pos_++];
        switch (e) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'u': {
            if (pos_ + 4 > s_.size()) return false;
            const long code = std::strtol(s_.substr(pos_, 4).c_str(), nullptr, 16);
            pos_ += 4;
            if (code < 0x80) {
              c = static_cast<char>(code);
            } else if (code < 0x800) {
              out += static_cast<char>(0xC0 | (code >> 6));
              c = static_cast<char>(0x80 | (code & 0x3F));
            } else {
              out += static_cast<char>(0xE0 | (code >> 12));
              out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
              c = static_cast<char>(0x80 | (code & 0x3F));
            }
            break;
          }
          default:
            c = e;
            break;
        }
      }
      out += c;
    }
    if (pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  bool ParseValue(Value& v) {
    SkipSpace();
    if (pos_ >= s_.size()) return false;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Value::kObject;
      ++pos_;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      for (;;) {
        SkipSpace();
        std::string key;
        if (pos_ >= s_.size() || !ParseString(key)) return false;
        SkipSpace();
        if (pos_ >= s_.size() || s_[pos_++] != ':') return false;
        if (!ParseValue(v.object[key])) return false;
        SkipSpace();
        if (pos_ >= s_.size()) return false;
        if (s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (s_[pos_] == '}') return ++pos_, true;
        return false;
      }
    }
    if (c == '[') {
      v.kind = Value::kArray;
      ++pos_;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      for (;;) {
        v.array.emplace_back();
        if (!ParseValue(v.array.back())) return false;
        SkipSpace();
        if (pos_ >= s_.size()) return false;
        if (s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (s_[pos_] == ']') return ++pos_, true;
        return false;
      }
    }
    if (c == '"') {
      v.kind = Value::kString;
      return ParseString(v.string);
    }
    if (Literal("true")) {
      v.kind = Value::kBool;
      v.boolean = true;
      return true;
    }
    if (Literal("false")) {
      v.kind = Value::kBool;
      return true;
    }
    if (Literal("null")) return true;
    const char* begin = s_.c_str() + pos_;
    char* end = nullptr;
    v.number = std::strtod(begin, &end);
    if (end == begin) return false;
    v.kind = Value::kNumber;
    pos_ += static_cast<size_t>(end - begin);
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

inline std::optional<Value> Parse(const std::string& text) { return Parser(text).Parse(); }

}  // namespace testing_json
}  // namespace kd

#endif  // KERNELD_TESTS_KERNELS_MINI_JSON_H_
