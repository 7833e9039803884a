// TuneKey: what an autotune decision is keyed by, and its canonical string form. Part of the core
// library: the backend interface names it (Backend::CreateTuneHarness).
//
// A key names one problem on one kind of device for one build of a kernel: op, variant, dtypes,
// the problem shape (M, N, K, groups), the architecture, the device name and the kernel version
// of the config space that served it. Two ranks on identical nodes build equal keys for equal
// problems, so they get the same config.
//
// Shape classes. Exact shapes are kept where they are stable for a whole training run and
// bucketed where they vary step to step, which would otherwise explode the cache:
//   - M, N, K of the dense GEMMs (nt, nn, tn) are exact: they are batch*sequence and weight
//     dimensions, fixed for a run.
//   - The token dimension of the grouped GEMMs varies with routing every step: M of
//     m_grouped_nt and K of k_grouped_tn are rounded up to the next power of two, at least
//     kMinTokenBucket. N and K (M and N for k_grouped_tn) are weight dimensions and stay exact.
//   - groups is exact: the best tile differs with the number of groups (short per-group loops
//     want other tiles than one long one), so keys of different group counts never share.
// The rule lives in ClassifyShape(); every key builder applies it, so a key always holds classed
// values and ToString() is the cache's lookup string.
//
// Canonical string, fields separated by ':' (device last; '%', ':' and bytes outside 0x20..0x7e
// in the string fields are written %XX):
//   gemm:nt:e4m3fn.e4m3fn>bf16:m4096:n7168:k2048:g1:sm_90:v1:NVIDIA H100 80GB HBM3
#ifndef KERNELD_KERNELS_AUTOTUNE_KEY_H_
#define KERNELD_KERNELS_AUTOTUNE_KEY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/backend.h"
#include "kerneld/kernels/ops.h"

namespace kd {

// Smallest bucket of a bucketed token dimension.
constexpr int64_t kMinTokenBucket = 128;

struct TuneKey {
  std::string op;              // "gemm", "quantize", "pad"
  std::string variant;         // GemmVariantName() for gemm: "nt", "m_grouped_nt"...
  std::string dtypes;          // inputs '.'-joined, then '>' and the output: "e4m3fn.e4m3fn>bf16"
  int64_t m = 0;               // rows of the output
  int64_t n = 0;               // columns of the output
  int64_t k = 0;               // reduction
  int64_t groups = 1;          // experts of a grouped GEMM, 1 otherwise
  std::string arch;            // exact architecture: "sm_90", "gfx942", "x86_64"
  std::string device;          // DeviceProperties::name
  int32_t kernel_version = 0;  // ConfigSpace::kernel_version of the space that tuned it

  // The canonical string form described above.
  std::string ToString() const;

  bool operator==(const TuneKey& o) const;
  bool operator!=(const TuneKey& o) const { return !(*this == o); }
};

// The family configs are declared for (ConfigSpace::arch_family): "sm_90" for sm_90 and sm_90a;
// "gfx94x" for gfx940, gfx941 and gfx942; "cpu" for x86_64 and aarch64; any other arch is its own
// family.
std::string ArchFamily(absl::string_view arch);

// Appends `s` with '%', ':' and every byte outside 0x20..0x7e written as %XX (upper-case hex),
// so the result holds no separator, tab or newline: the escaping of the key's text fields, which
// the tune cache file uses for its own.
void AppendKeyEscaped(std::string& out, absl::string_view s);
// The reverse. INVALID_ARGUMENT naming `field` for a '%' without two hex digits after it.
absl::StatusOr<std::string> UnescapeKeyField(absl::string_view s, absl::string_view field);

// Parses the canonical string form. INVALID_ARGUMENT naming the part that does not parse. A
// parsed key is not re-classed: a string is trusted to hold classed values only after
// IsClassed() says so.
absl::StatusOr<TuneKey> ParseTuneKey(absl::string_view text);

// Next power of two >= max(x, kMinTokenBucket).
int64_t TokenBucket(int64_t x);

// Applies the shape-class rule above to `key` (by its op and variant) in place.
void ClassifyShape(TuneKey& key);
// True when ClassifyShape() would leave `key` unchanged.
bool IsClassed(const TuneKey& key);

// The key of a GEMM problem given by its dimensions (as in kerneld.v1.TuneShape), classed.
// `kernel_version` comes from the config space (ConfigSpaceRegistry::Find).
TuneKey MakeGemmTuneKey(GemmVariant variant, DType ab_dtype, DType d_dtype, int64_t m, int64_t n,
                        int64_t k, int64_t groups, const DeviceProperties& device,
                        int32_t kernel_version);

// The key of a validated GEMM op: M, N, K read from its tensors per variant (see GemmVariant in
// kerneld.proto), groups from group_ends, classed. INVALID_ARGUMENT for a variant it does not
// know.
absl::StatusOr<TuneKey> GemmTuneKeyFromArgs(const GemmArgs& args, const DeviceProperties& device,
                                            int32_t kernel_version);

}  // namespace kd

#endif  // KERNELD_KERNELS_AUTOTUNE_KEY_H_
