// The ops kerneld runs: one plain argument struct per op, shared by every backend. Validation of
// shapes, dtypes and block divisibility happens once, in Validate(), before any backend sees an
// op; backends may assume a validated op. The semantics of each op and field are those of the
// matching message in proto/kerneld/v1/kerneld.proto.
#ifndef KERNELD_KERNELS_OPS_H_
#define KERNELD_KERNELS_OPS_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/tensor.h"

namespace kd {

constexpr int64_t kQuantBlock = 128;
constexpr int64_t kMxBlock = 32;
constexpr float kDefaultQuantEps = 1e-12f;

// Values match kerneld.v1.QuantGranularity.
enum class QuantGranularity : uint8_t {
  kInvalid = 0,
  k1x128 = 1,
  k128x1 = 2,
  k128x128 = 3,
  kPerRow = 4,
  kPerTensor = 5,
  kMx1x32 = 6,
  kJaggedRowwise = 7,
  kJaggedColwise = 8,
};
enum class ScaleFormat : uint8_t { kFp32 = 1, kPow2 = 2 };
enum class ScaleLayout : uint8_t { kRowMajor = 1, kKBlockMajor = 2 };
enum class MxRounding : uint8_t { kFloor = 1, kRceil = 2 };

absl::string_view GranularityName(QuantGranularity g);

struct QuantizeArgs {
  Tensor input;
  Tensor output;
  Tensor scales;
  Tensor output_t;    // dual pass only
  Tensor scales_t;    // dual pass only
  Tensor group_ends;  // jagged only
  QuantGranularity granularity = QuantGranularity::kInvalid;
  bool transpose_output = false;
  ScaleFormat scale_format = ScaleFormat::kFp32;
  ScaleLayout scale_layout = ScaleLayout::kRowMajor;
  float eps = kDefaultQuantEps;
  MxRounding mx_rounding = MxRounding::kFloor;
};

// Values match kerneld.v1.GemmVariant.
enum class GemmVariant : uint8_t {
  kInvalid = 0,
  kNT = 1,
  kNN = 2,
  kTN = 3,
  kMGroupedNT = 4,
  kKGroupedTN = 5,
};
absl::string_view GemmVariantName(GemmVariant v);

struct GemmArgs {
  GemmVariant variant = GemmVariant::kInvalid;
  Tensor a, a_scales, b, b_scales, d;
  Tensor group_ends;
  bool accumulate = false;
  // The kernel config to run with, resolved once from the daemon's tune cache (gemm_config.h);
  // std::monostate, or another backend's config, runs the backend's heuristic default. Never set
  // from a request. The result does not depend on it.
  GemmKernelConfig config;
};

struct PadArgs {
  Tensor input;
  Tensor group_ends;
  Tensor output;
  Tensor padded_group_ends;
  int32_t alignment = 0;
};

struct UnpadArgs {
  Tensor input;
  Tensor group_ends;
  Tensor output;
  int32_t alignment = 0;
};

using Op = std::variant<QuantizeArgs, GemmArgs, PadArgs, UnpadArgs>;

// "quantize", "gemm", "pad", "unpad".
absl::string_view OpName(const Op& op);
// The variant label used in metrics ("1x128", "nt", "a16"...), bounded.
std::string OpVariantLabel(const Op& op);
// The dtype label used in metrics (the input's dtype to the output's: "bf16>e4m3fn").
std::string OpDTypeLabel(const Op& op);
// A bounded size class for metrics: "xs" (< 2^16 elements in the largest tensor), "s" (< 2^20),
// "m" (< 2^24), "l" (< 2^27), "xl".
absl::string_view OpShapeClass(const Op& op);
// The inputs of the three labels above and of OpName packed into one number: two ops have the
// same key exactly when their four labels are the same. For caching a metric series per op
// without building its label strings on every request. It mirrors OpName, OpVariantLabel,
// OpDTypeLabel and OpShapeClass: change it with them (op_labels_test checks the pairing).
uint64_t OpLabelKey(const Op& op);

// Checks the op against its contract: dtypes, shapes, block divisibility, enum values, that
// every tensor of the op lives on one device, and that outputs do not overlap inputs.
// INVALID_ARGUMENT (FAILED_PRECONDITION for mixed devices) with a message naming the field.
absl::Status Validate(const Op& op);

// The present tensors of an op with their field names, for device checks and bookkeeping. An op
// has at most six tensors, so the list never allocates.
struct NamedTensor {
  absl::string_view field;
  const Tensor* tensor;
};
using NamedTensors = absl::InlinedVector<NamedTensor, 6>;
NamedTensors OpTensors(const Op& op);

// Group offsets (end of each group, in rows) read from `ends` (i32 or i64, on the host) are
// checked: monotone non-decreasing, non-negative, last equal to `total_rows`. INVALID_ARGUMENT
// naming `field` otherwise. Backends that can read the offsets on the host call this before use.
absl::Status CheckGroupEnds(const int64_t* ends, int64_t groups, int64_t total_rows,
                            absl::string_view field);

}  // namespace kd

#endif  // KERNELD_KERNELS_OPS_H_
