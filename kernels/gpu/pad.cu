// Per-group token padding for MoE and its reverse, with the padded offsets computed on the
// device: the group ends are copied once from client memory, checked, and scanned into padded
// ends (in each CTA's shared memory, or by a one-CTA kernel into scratch for very many groups),
// and the row-copy kernel moves 16-byte chunks. No host round trip: a violation is written to a
// host-mapped DeviceErrorRecord that the backend reads when the stream's completion is observed,
// and the copy kernel then writes nothing.
#include <cstdint>

#include "kernels/gpu/device_attributes.h"
#include "kernels/gpu/gpu_kernels.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace {

constexpr int kOffsetsThreads = 1024;
constexpr int kCopyThreads = 256;
constexpr int kRowsPerIteration = 8;
// Group tables up to this many groups are held in shared memory by the copy kernel.
constexpr int64_t kSharedTableGroups = 2048;
constexpr int64_t kScratchHeader = 16;  // the validity word, padded to 16 bytes

struct Scratch {
  int32_t* valid;
  int64_t* ends;
  int64_t* padded;
};
__device__ __forceinline__ Scratch ScratchOf(void* base, int64_t groups) {
  char* bytes = static_cast<char*>(base);
  int64_t* ends = reinterpret_cast<int64_t*>(bytes + kScratchHeader);
  return {reinterpret_cast<int32_t*>(bytes), ends, ends + groups};
}

__device__ __forceinline__ int64_t WarpInclusiveScan(int64_t v) {
  const int lane = gpu::ThreadIdxX() % gpu::kLaneGroup;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const int64_t other = gpu::ShflUp(v, offset);
    if (lane >= offset) v += other;
  }
  return v;
}

// Builds the group table of one CTA: copies the client's ends once into `ends` (the checks and
// the copy read only this copy, so a client rewriting them meanwhile cannot defeat the check),
// finds the first violation, and scans the aligned group sizes into `padded`. `total_rows` is
// what the last end must equal; `padded_limit` (unpad) is the most padded rows the input holds,
// or -1. When `report`, a violation goes to the error record and a valid table's padded ends to
// p.padded_group_ends. Returns whether the ends are valid (the same answer in every thread).
__device__ bool BuildGroupTable(const PadParams& p, int64_t total_rows, int64_t padded_limit,
                                int32_t op, int64_t* ends, int64_t* padded, bool report) {
  const int tid = gpu::ThreadIdxX();
  const int threads = gpu::BlockDimX();
  __shared__ unsigned long long first_bad;
  __shared__ int64_t warp_sums[gpu::kLaneGroup];
  __shared__ int64_t carry;
  __shared__ int valid;
  if (tid == 0) {
    first_bad = ~0ull;
    carry = 0;
  }
  for (int64_t g = tid; g < p.groups; g += threads) {
    ends[g] = p.group_ends_i64 ? static_cast<const int64_t*>(p.group_ends)[g * p.group_ends_stride]
                               : static_cast<const int32_t*>(p.group_ends)[g * p.group_ends_stride];
  }
  gpu::SyncThreads();
  const int64_t align = p.alignment;
  const int warps = threads / gpu::kLaneGroup;
  for (int64_t base = 0; base < p.groups; base += threads) {
    const int64_t g = base + tid;
    int64_t padded_size = 0;
    if (g < p.groups) {
      const int64_t prev = g == 0 ? 0 : ends[g - 1];
      const int64_t end = ends[g];
      if (end < prev) {
        atomicMin(&first_bad, static_cast<unsigned long long>(g));
      } else {
        padded_size = (end - prev + align - 1) / align * align;
      }
    }
    const int64_t inclusive = WarpInclusiveScan(padded_size);
    if (tid % gpu::kLaneGroup == gpu::kLaneGroup - 1) warp_sums[tid / gpu::kLaneGroup] = inclusive;
    gpu::SyncThreads();
    if (tid < 32) {
      const int64_t total = WarpInclusiveScan(tid < warps ? warp_sums[tid] : 0);
      if (tid < warps) warp_sums[tid] = total;  // inclusive over warps 0..tid
    }
    gpu::SyncThreads();
    const int64_t before =
        carry + (tid >= gpu::kLaneGroup ? warp_sums[tid / gpu::kLaneGroup - 1] : 0);
    if (g < p.groups) padded[g] = before + inclusive;
    gpu::SyncThreads();
    if (tid == 0) carry += warp_sums[warps - 1];
    gpu::SyncThreads();
  }
  if (tid == 0) {
    const int64_t last = p.groups - 1;
    int32_t code = DeviceErrorRecord::kNone;
    int64_t group = 0, value = 0, bound = 0;
    if (first_bad != ~0ull) {
      group = static_cast<int64_t>(first_bad);
      code = DeviceErrorRecord::kGroupEndDecreasing;
      value = ends[group];
      bound = group == 0 ? 0 : ends[group - 1];
    } else if (ends[last] != total_rows) {
      code = DeviceErrorRecord::kGroupEndTotal;
      group = last;
      value = ends[last];
      bound = total_rows;
    } else if (padded_limit >= 0 && padded[last] > padded_limit) {
      code = DeviceErrorRecord::kPaddedRowsExceed;
      group = last;
      value = padded[last];
      bound = padded_limit;
    }
    valid = code == DeviceErrorRecord::kNone;
    volatile DeviceErrorRecord* rec = p.error;
    if (report && code != DeviceErrorRecord::kNone && rec->code == DeviceErrorRecord::kNone) {
      rec->op = op;
      rec->group = group;
      rec->value = value;
      rec->bound = bound;
      gpu::ThreadFenceSystem();
      rec->code = code;
    }
  }
  gpu::SyncThreads();
  const bool ok = valid != 0;
  if (ok && report && p.padded_group_ends != nullptr) {
    for (int64_t g = tid; g < p.groups; g += threads) {
      p.padded_group_ends[g * p.padded_group_ends_stride] = static_cast<int32_t>(padded[g]);
    }
  }
  return ok;
}

// For group counts above kSharedTableGroups: one CTA builds the table in scratch for the copy
// kernel, which reads the validity word.
__global__ void KD_LAUNCH_BOUNDS(kOffsetsThreads)
    GroupOffsetsKernel(PadParams p, int64_t total_rows, int64_t padded_limit, int32_t op) {
  const Scratch s = ScratchOf(p.scratch, p.groups);
  const bool ok = BuildGroupTable(p, total_rows, padded_limit, op, s.ends, s.padded, true);
  if (gpu::ThreadIdxX() == 0) *s.valid = ok;
}

// First index g in [0, n) with table[g] > r, or n.
__device__ __forceinline__ int64_t UpperBound(const int64_t* table, int64_t n, int64_t r) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (table[mid] > r)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Copies rows in units of Chunk (16, 4 or 1 bytes). Output row r of pad takes input row
// src(r) or zeros; output row r of unpad takes padded row src(r). With `fused` (up to
// kSharedTableGroups groups) every CTA builds the group table itself in shared memory, so pad is
// one launch; CTA (0, 0) reports. Otherwise GroupOffsetsKernel built it in scratch. Each CTA
// walks row blocks of kRowsPerIteration rows, loading every chunk of a block before storing.
template <typename Chunk, bool kUnpad>
__global__ void KD_LAUNCH_BOUNDS(kCopyThreads)
    CopyGroupRowsKernel(PadParams p, int64_t chunks_per_row, bool fused, int64_t total_rows,
                        int64_t padded_limit) {
  extern __shared__ int64_t table[];  // ends then padded ends, when fused
  const int64_t* ends;
  const int64_t* padded;
  if (fused) {
    const bool report = gpu::BlockIdxX() == 0 && gpu::BlockIdxY() == 0;
    if (!BuildGroupTable(p, total_rows, padded_limit, kUnpad ? 1 : 0, table, table + p.groups,
                         report)) {
      return;
    }
    ends = table;
    padded = table + p.groups;
  } else {
    const Scratch s = ScratchOf(p.scratch, p.groups);
    if (*s.valid == 0) return;
    ends = s.ends;
    padded = s.padded;
  }
  __shared__ int64_t src_row[kRowsPerIteration];
  const int64_t rows = p.out_rows;
  const int64_t col = static_cast<int64_t>(gpu::BlockIdxX()) * gpu::BlockDimX() + gpu::ThreadIdxX();
  const char* input = static_cast<const char*>(p.input);
  char* output = static_cast<char*>(p.output);
  for (int64_t row0 = static_cast<int64_t>(gpu::BlockIdxY()) * kRowsPerIteration; row0 < rows;
       row0 += static_cast<int64_t>(gpu::GridDimY()) * kRowsPerIteration) {
    if (gpu::ThreadIdxX() < kRowsPerIteration) {
      const int64_t r = row0 + gpu::ThreadIdxX();
      int64_t src = -1;
      if (r < rows) {
        const int64_t g = UpperBound(kUnpad ? ends : padded, p.groups, r);
        if (g < p.groups) {
          const int64_t group_start = g == 0 ? 0 : ends[g - 1];
          const int64_t padded_start = g == 0 ? 0 : padded[g - 1];
          if (kUnpad) {
            src = padded_start + (r - group_start);
          } else if (r - padded_start < ends[g] - group_start) {
            src = group_start + (r - padded_start);
          }
        }
      }
      src_row[gpu::ThreadIdxX()] = src;
    }
    gpu::SyncThreads();
    if (col < chunks_per_row) {
      Chunk v[kRowsPerIteration];
#pragma unroll
      for (int i = 0; i < kRowsPerIteration; ++i) {
        const int64_t src = src_row[i];
        v[i] = Chunk{};
        if (src >= 0) {
          v[i] = reinterpret_cast<const Chunk*>(input + src * p.input_stride_bytes)[col];
        }
      }
#pragma unroll
      for (int i = 0; i < kRowsPerIteration; ++i) {
        if (row0 + i < rows) {
          reinterpret_cast<Chunk*>(output + (row0 + i) * p.output_stride_bytes)[col] = v[i];
        }
      }
    }
    gpu::SyncThreads();
  }
}

template <bool kUnpad>
cudaError_t LaunchCopy(const PadParams& p, cudaStream_t stream, int64_t total_rows,
                       int64_t padded_limit) {
  const auto aligned = [&](int64_t a) {
    return reinterpret_cast<uintptr_t>(p.input) % a == 0 &&
           reinterpret_cast<uintptr_t>(p.output) % a == 0 && p.input_stride_bytes % a == 0 &&
           p.output_stride_bytes % a == 0 && p.row_bytes % a == 0;
  };
  int sms = 0;
  const cudaError_t err = CurrentSmCount(&sms);
  if (err != cudaSuccess) return err;
  const bool fused = p.groups <= kSharedTableGroups;
  if (!fused) {
    GroupOffsetsKernel<<<1, kOffsetsThreads, 0, stream>>>(p, total_rows, padded_limit,
                                                          kUnpad ? 1 : 0);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) return launched;
  }
  const size_t smem = fused ? static_cast<size_t>(2 * p.groups) * sizeof(int64_t) : 0;
  auto launch = [&](auto kernel, int64_t chunk_bytes) -> cudaError_t {
    const int64_t chunks_per_row = p.row_bytes / chunk_bytes;
    const int64_t col_blocks = (chunks_per_row + kCopyThreads - 1) / kCopyThreads;
    const int64_t row_blocks = (p.out_rows + kRowsPerIteration - 1) / kRowsPerIteration;
    if (col_blocks > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
    // Enough CTAs for several waves; each walks row blocks so the table load is amortized.
    const int64_t target = static_cast<int64_t>(sms) * 32 / col_blocks + 1;
    const int64_t y = row_blocks < target ? row_blocks : target;
    const dim3 grid(static_cast<unsigned>(col_blocks),
                    static_cast<unsigned>(y < 65535 ? y : 65535));
    if (smem > 48 * 1024) {
      const cudaError_t attr = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      if (attr != cudaSuccess) return attr;
    }
    kernel<<<grid, kCopyThreads, smem, stream>>>(p, chunks_per_row, fused, total_rows,
                                                 padded_limit);
    return cudaGetLastError();
  };
  if (aligned(16)) return launch(CopyGroupRowsKernel<uint4, kUnpad>, 16);
  if (aligned(4)) return launch(CopyGroupRowsKernel<uint32_t, kUnpad>, 4);
  return launch(CopyGroupRowsKernel<uint8_t, kUnpad>, 1);
}

}  // namespace

uint64_t PadScratchBytes(int64_t groups) {
  return static_cast<uint64_t>(kScratchHeader) +
         2 * sizeof(int64_t) * static_cast<uint64_t>(groups);
}

cudaError_t LaunchPad(const PadParams& p, cudaStream_t stream) {
  if (p.groups < 1) return cudaErrorInvalidValue;
  return LaunchCopy<false>(p, stream, p.in_rows, -1);
}

cudaError_t LaunchUnpad(const PadParams& p, cudaStream_t stream) {
  if (p.groups < 1) return cudaErrorInvalidValue;
  PadParams q = p;
  q.padded_group_ends = nullptr;
  return LaunchCopy<true>(q, stream, p.out_rows, p.in_rows);
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
