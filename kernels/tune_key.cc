#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kerneld/kernels/autotune_key.h"
#include "kerneld/kernels/client_string.h"

namespace kd {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

absl::StatusOr<std::string> UnescapeField(absl::string_view s, absl::string_view field) {
  auto out = UnescapeKeyField(s, absl::StrCat("tune key ", field));
  if (out.ok() && out->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tune key ", field, " is empty"));
  }
  return out;
}

absl::StatusOr<int64_t> ParseDim(absl::string_view part, char prefix, absl::string_view field,
                                 int64_t min) {
  int64_t v = 0;
  if (part.empty() || part[0] != prefix || !absl::SimpleAtoi(part.substr(1), &v) || v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("tune key ", field, "=\"", EchoClientString(part), "\" must be '",
                     std::string(1, prefix), "' and an integer >= ", min));
  }
  return v;
}

bool IsTokenBucketed(absl::string_view op, absl::string_view variant, bool& bucket_m) {
  if (op != "gemm") return false;
  if (variant == "m_grouped_nt") {
    bucket_m = true;
    return true;
  }
  if (variant == "k_grouped_tn") {
    bucket_m = false;
    return true;
  }
  return false;
}

}  // namespace

std::string ArchFamily(absl::string_view arch) {
  if (arch == "sm_90" || arch == "sm_90a") return "sm_90";
  if (arch == "gfx940" || arch == "gfx941" || arch == "gfx942") return "gfx94x";
  if (arch == "x86_64" || arch == "aarch64") return "cpu";
  return std::string(arch);
}

void AppendKeyEscaped(std::string& out, absl::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '%' || c == ':' || c < 0x20 || c > 0x7e) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
}

absl::StatusOr<std::string> UnescapeKeyField(absl::string_view s, absl::string_view field) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    const bool complete = i + 2 < s.size();
    const int hi = complete ? HexValue(s[i + 1]) : -1;
    const int lo = complete ? HexValue(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " has a '%' not followed by two hex digits"));
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

std::string TuneKey::ToString() const {
  std::string out;
  out.reserve(96 + device.size());
  AppendKeyEscaped(out, op);
  out.push_back(':');
  AppendKeyEscaped(out, variant);
  out.push_back(':');
  AppendKeyEscaped(out, dtypes);
  absl::StrAppend(&out, ":m", m, ":n", n, ":k", k, ":g", groups, ":");
  AppendKeyEscaped(out, arch);
  absl::StrAppend(&out, ":v", kernel_version, ":");
  AppendKeyEscaped(out, device);
  return out;
}

bool TuneKey::operator==(const TuneKey& o) const {
  return op == o.op && variant == o.variant && dtypes == o.dtypes && m == o.m && n == o.n &&
         k == o.k && groups == o.groups && arch == o.arch && device == o.device &&
         kernel_version == o.kernel_version;
}

absl::StatusOr<TuneKey> ParseTuneKey(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 10) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tune key \"", EchoClientString(text), "\" has ", parts.size(),
        " ':'-separated fields, want 10 (op:variant:dtypes:mM:nN:kK:gG:arch:vV:device)"));
  }
  TuneKey key;
  auto assign = [](std::string& dst, absl::StatusOr<std::string> v) -> absl::Status {
    if (!v.ok()) return v.status();
    dst = *std::move(v);
    return absl::OkStatus();
  };
  absl::Status s;
  if (!(s = assign(key.op, UnescapeField(parts[0], "op"))).ok()) return s;
  if (!(s = assign(key.variant, UnescapeField(parts[1], "variant"))).ok()) return s;
  if (!(s = assign(key.dtypes, UnescapeField(parts[2], "dtypes"))).ok()) return s;
  auto m = ParseDim(parts[3], 'm', "m", 1);
  if (!m.ok()) return m.status();
  auto n = ParseDim(parts[4], 'n', "n", 1);
  if (!n.ok()) return n.status();
  auto k = ParseDim(parts[5], 'k', "k", 1);
  if (!k.ok()) return k.status();
  auto g = ParseDim(parts[6], 'g', "groups", 1);
  if (!g.ok()) return g.status();
  if (!(s = assign(key.arch, UnescapeField(parts[7], "arch"))).ok()) return s;
  auto v = ParseDim(parts[8], 'v', "kernel_version", 0);
  if (!v.ok()) return v.status();
  if (*v > INT32_MAX) return absl::InvalidArgumentError("tune key kernel_version is out of range");
  if (!(s = assign(key.device, UnescapeField(parts[9], "device"))).ok()) return s;
  key.m = *m;
  key.n = *n;
  key.k = *k;
  key.groups = *g;
  key.kernel_version = static_cast<int32_t>(*v);
  return key;
}

int64_t TokenBucket(int64_t x) {
  int64_t b = kMinTokenBucket;
  while (b < x && b < (int64_t{1} << 62)) b <<= 1;
  return b;
}

void ClassifyShape(TuneKey& key) {
  bool bucket_m = false;
  if (!IsTokenBucketed(key.op, key.variant, bucket_m)) return;
  if (bucket_m) {
    key.m = TokenBucket(key.m);
  } else {
    key.k = TokenBucket(key.k);
  }
}

bool IsClassed(const TuneKey& key) {
  TuneKey copy = key;
  ClassifyShape(copy);
  return copy.m == key.m && copy.k == key.k;
}

TuneKey MakeGemmTuneKey(GemmVariant variant, DType ab_dtype, DType d_dtype, int64_t m, int64_t n,
                        int64_t k, int64_t groups, const DeviceProperties& device,
                        int32_t kernel_version) {
  TuneKey key;
  key.op = "gemm";
  key.variant = std::string(GemmVariantName(variant));
  key.dtypes = absl::StrCat(DTypeName(ab_dtype), ".", DTypeName(ab_dtype), ">", DTypeName(d_dtype));
  key.m = m;
  key.n = n;
  key.k = k;
  key.groups = groups < 1 ? 1 : groups;
  key.arch = device.arch;
  key.device = device.name;
  key.kernel_version = kernel_version;
  ClassifyShape(key);
  return key;
}

absl::StatusOr<TuneKey> GemmTuneKeyFromArgs(const GemmArgs& g, const DeviceProperties& device,
                                            int32_t kernel_version) {
  int64_t m = 0, n = 0, k = 0, groups = 1;
  switch (g.variant) {
    case GemmVariant::kNT:  // A (M,K), B (N,K)
      m = g.a.shape[0], k = g.a.shape[1], n = g.b.shape[0];
      break;
    case GemmVariant::kNN:  // dY (M,N') · W (N',K'): output (M,K'), reduction N'
      m = g.a.shape[0], k = g.a.shape[1], n = g.b.shape[1];
      break;
    case GemmVariant::kTN:  // A (N,M) · B (K,M): output (N,K), reduction M
      m = g.a.shape[0], k = g.a.shape[1], n = g.b.shape[0];
      break;
    case GemmVariant::kMGroupedNT:  // A (ΣM,K), B (E,N,K)
      m = g.a.shape[0], k = g.a.shape[1], n = g.b.shape[1];
      groups = g.b.shape[0];
      break;
    case GemmVariant::kKGroupedTN:  // A (N,ΣM), B (K,ΣM), reduction over each group's rows
      m = g.a.shape[0], k = g.a.shape[1], n = g.b.shape[0];
      groups = g.group_ends.present() ? g.group_ends.numel() : 1;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("variant=", static_cast<int>(g.variant), " has no tune key"));
  }
  return MakeGemmTuneKey(g.variant, g.a.dtype, g.d.dtype, m, n, k, groups, device, kernel_version);
}

}  // namespace kd
