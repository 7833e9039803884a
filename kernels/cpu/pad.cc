// CPU per-group token padding and its reverse. Group ends are copied out of the (client-owned)
// tensor before they are checked, so a client rewriting them mid-op cannot defeat the check.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"

namespace kd {
namespace {

std::vector<int64_t> PaddedEnds(const std::vector<int64_t>& ends, int64_t alignment) {
  std::vector<int64_t> padded(ends.size());
  int64_t prev = 0, prev_padded = 0;
  for (size_t g = 0; g < ends.size(); ++g) {
    const int64_t size = ends[g] - prev;
    prev_padded += (size + alignment - 1) / alignment * alignment;
    padded[g] = prev_padded;
    prev = ends[g];
  }
  return padded;
}

}  // namespace

std::vector<int64_t> ReadGroupEnds(const Tensor& ends) {
  std::vector<int64_t> out(ends.shape[0]);
  for (int64_t g = 0; g < ends.shape[0]; ++g) {
    out[g] = ends.dtype == DType::kI64 ? ends.as<const int64_t>()[g * ends.strides[0]]
                                       : ends.as<const int32_t>()[g * ends.strides[0]];
  }
  return out;
}

absl::Status RunCpu(const PadArgs& a, ThreadPool& pool) {
  const std::vector<int64_t> ends = ReadGroupEnds(a.group_ends);
  KD_RETURN_IF_ERROR(CheckGroupEnds(ends.data(), ends.size(), a.input.shape[0], "group_ends"));
  const std::vector<int64_t> padded = PaddedEnds(ends, a.alignment);
  const size_t row_bytes = a.input.shape[1] * DTypeSize(a.input.dtype);
  const size_t in_stride = a.input.strides[0] * DTypeSize(a.input.dtype);
  const size_t out_stride = a.output.strides[0] * DTypeSize(a.output.dtype);
  const char* in = a.input.as<const char>();
  char* out = a.output.as<char>();
  // Map each output row to its source row (or -1 for a zero row) and copy rows in parallel.
  const int64_t out_rows = a.output.shape[0];
  pool.ParallelFor(out_rows, 256, [&](int64_t r0, int64_t r1) {
    size_t g = std::upper_bound(padded.begin(), padded.end(), r0) - padded.begin();
    for (int64_t r = r0; r < r1; ++r) {
      while (g < padded.size() && r >= padded[g]) ++g;
      int64_t src = -1;
      if (g < padded.size()) {
        const int64_t group_start = g == 0 ? 0 : ends[g - 1];
        const int64_t padded_start = g == 0 ? 0 : padded[g - 1];
        const int64_t i = r - padded_start;
        if (i < ends[g] - group_start) src = group_start + i;
      }
      if (src >= 0)
        std::memcpy(out + r * out_stride, in + src * in_stride, row_bytes);
      else
        std::memset(out + r * out_stride, 0, row_bytes);
    }
  });
  int32_t* pe = a.padded_group_ends.as<int32_t>();
  for (size_t g = 0; g < padded.size(); ++g) pe[g * a.padded_group_ends.strides[0]] = padded[g];
  return absl::OkStatus();
}

absl::Status RunCpu(const UnpadArgs& a, ThreadPool& pool) {
  const std::vector<int64_t> ends = ReadGroupEnds(a.group_ends);
  KD_RETURN_IF_ERROR(CheckGroupEnds(ends.data(), ends.size(), a.output.shape[0], "group_ends"));
  const std::vector<int64_t> padded = PaddedEnds(ends, a.alignment);
  if (!padded.empty() && padded.back() > a.input.shape[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("input.shape[0]=", a.input.shape[0], " is less than the padded row count ",
                     padded.back(), " that group_ends and alignment=", a.alignment, " give"));
  }
  const size_t row_bytes = a.input.shape[1] * DTypeSize(a.input.dtype);
  const size_t in_stride = a.input.strides[0] * DTypeSize(a.input.dtype);
  const size_t out_stride = a.output.strides[0] * DTypeSize(a.output.dtype);
  const char* in = a.input.as<const char>();
  char* out = a.output.as<char>();
  pool.ParallelFor(a.output.shape[0], 256, [&](int64_t r0, int64_t r1) {
    size_t g = std::upper_bound(ends.begin(), ends.end(), r0) - ends.begin();
    for (int64_t r = r0; r < r1; ++r) {
      while (g < ends.size() && r >= ends[g]) ++g;
      const int64_t group_start = g == 0 ? 0 : ends[g - 1];
      const int64_t padded_start = g == 0 ? 0 : padded[g - 1];
      std::memcpy(out + r * out_stride, in + (padded_start + r - group_start) * in_stride,
                  row_bytes);
    }
  });
  return absl::OkStatus();
}

}  // namespace kd
