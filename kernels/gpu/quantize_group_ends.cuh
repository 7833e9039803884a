// The jagged quantizers' group ends: read from client memory once, checked on the device as
// kd::CheckGroupEnds does (non-decreasing, non-negative, last == M), a violation reported to the
// op's DeviceErrorRecord; and the scratch the jagged kinds keep the checked copy in.
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_GROUP_ENDS_CUH_
#define KERNELD_KERNELS_GPU_QUANTIZE_GROUP_ENDS_CUH_

#include <cstdint>

#include "kernels/gpu/gpu_kernels.h"
#include "kernels/gpu/quantize_common.cuh"
#include "kernels/gpu/quantize_rowcol.cuh"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {

struct Violation {
  int32_t code = DeviceErrorRecord::kNone;
  int64_t group = 0, value = 0, bound = 0;
};

__device__ __forceinline__ int64_t ClientEnd(const RowColKernelArgs& p, int64_t g) {
  return p.group_ends_i64 ? static_cast<const int64_t*>(p.group_ends)[g * p.group_ends_stride]
                          : static_cast<const int32_t*>(p.group_ends)[g * p.group_ends_stride];
}

// The violation kd::CheckGroupEnds reports for the ends `end_at(g)`, g < groups, of `total` rows
// (code kNone if none), found by the whole CTA; every thread gets the same answer.
template <typename EndAt>
__device__ Violation FindViolation(EndAt end_at, int64_t groups, int64_t total) {
  __shared__ unsigned long long first_bad;
  if (gpu::ThreadIdxX() == 0) first_bad = ~0ull;
  gpu::SyncThreads();
  for (int64_t g = gpu::ThreadIdxX(); g < groups; g += gpu::BlockDimX()) {
    const int64_t prev = g == 0 ? 0 : end_at(g - 1);
    if (end_at(g) < prev) atomicMin(&first_bad, static_cast<unsigned long long>(g));
  }
  gpu::SyncThreads();
  Violation v;
  if (first_bad != ~0ull) {
    v.code = DeviceErrorRecord::kGroupEndDecreasing;
    v.group = static_cast<int64_t>(first_bad);
    v.value = end_at(v.group);
    v.bound = v.group == 0 ? 0 : end_at(v.group - 1);
  } else if (groups > 0 && end_at(groups - 1) != total) {
    v.code = DeviceErrorRecord::kGroupEndTotal;
    v.group = groups - 1;
    v.value = end_at(v.group);
    v.bound = total;
  }
  return v;
}

// Writes `v` to the op's record unless the record holds a violation already.
__device__ void ReportViolation(const RowColKernelArgs& p, const Violation& v) {
  volatile DeviceErrorRecord* rec = p.error;
  if (v.code == DeviceErrorRecord::kNone || rec == nullptr ||
      rec->code != DeviceErrorRecord::kNone) {
    return;
  }
  rec->op = 2;
  rec->group = v.group;
  rec->value = v.value;
  rec->bound = v.bound;
  gpu::ThreadFenceSystem();
  rec->code = v.code;
}

// The groups of the column-wise kinds: per_row of Xᵀ is jagged_colwise with one group of every
// row.
__host__ __device__ __forceinline__ int64_t ColGroups(const RowColKernelArgs& p) {
  return p.kind == RowQuantizeKind::kPerRowTransposed ? 1 : p.groups;
}

struct JaggedScratch {
  int32_t* valid;
  int64_t* ends;        // (groups) the checked copy
  uint32_t* cell_amax;  // (groups, k), column kinds; zeroed by CheckGroupEndsKernel
  float* cell_scale;    // (groups, k), column kinds
  int64_t zero_words;   // of cell_amax
};

inline int64_t EndsOffset() { return kScratchAlign; }
inline int64_t CellsOffset(int64_t groups) {
  return kScratchAlign + AlignUp(groups * 8, kScratchAlign);
}

inline JaggedScratch ScratchOf(const RowColKernelArgs& p) {
  char* base = static_cast<char*>(p.scratch);
  const int64_t groups = ColGroups(p);
  const int64_t cell_bytes = AlignUp(groups * p.k * 4, kScratchAlign);
  JaggedScratch s;
  s.valid = reinterpret_cast<int32_t*>(base);
  s.ends = reinterpret_cast<int64_t*>(base + EndsOffset());
  s.cell_amax = reinterpret_cast<uint32_t*>(base + CellsOffset(groups));
  s.cell_scale = reinterpret_cast<float*>(base + CellsOffset(groups) + cell_bytes);
  s.zero_words = groups * p.k;
  return s;
}

// CTA 0 copies the client's ends once into `ends` (for per_row of Xᵀ, the one end m), checks
// the copy as kd::CheckGroupEnds does and writes the verdict to `valid` and a violation to
// p.error; every CTA zeroes its share of `zero` (`zero_words` words; none for null).
__global__ void KD_LAUNCH_BOUNDS(kCheckThreads)
    CheckGroupEndsKernel(RowColKernelArgs p, int64_t* ends, int32_t* valid, uint32_t* zero,
                         int64_t zero_words) {
  for (int64_t i = static_cast<int64_t>(gpu::BlockIdxX()) * kCheckThreads + gpu::ThreadIdxX();
       i < zero_words; i += static_cast<int64_t>(gpu::GridDimX()) * kCheckThreads) {
    zero[i] = 0;
  }
  if (gpu::BlockIdxX() != 0) return;
  const int64_t groups = ColGroups(p);
  const bool single = p.kind == RowQuantizeKind::kPerRowTransposed;
  for (int64_t g = gpu::ThreadIdxX(); g < groups; g += kCheckThreads) {
    ends[g] = single ? p.m : ClientEnd(p, g);
  }
  gpu::SyncThreads();
  const Violation v = FindViolation([&](int64_t g) { return ends[g]; }, groups, p.m);
  if (gpu::ThreadIdxX() != 0) return;
  *valid = v.code == DeviceErrorRecord::kNone;
  ReportViolation(p, v);
}

// First g in [0, n) with ends[g] > r, or n.
__device__ __forceinline__ int64_t GroupOfRow(const int64_t* ends, int64_t n, int64_t r) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (ends[mid] > r)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace quant
}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_GROUP_ENDS_CUH_
