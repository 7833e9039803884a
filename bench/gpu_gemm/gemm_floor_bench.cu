// gemm_floor_bench: what the consumer warpgroups' per-K-block loop of the FP8 GEMM can reach on
// this GPU with nothing else in the kernel: no TMA, no mbarriers, no scale loads, no epilogue,
// no tile scheduling. Every CTA (one per SM) loops over resident shared-memory tiles, so the
// figure is the floor that the loop's structure (wgmma waits, promotion FFMAs, turn barriers)
// sets, to compare with the real kernel's cycles per block (bench/README.md, "GEMM floor").
//
// Loops (per consumer warpgroup of 64 rows, one K block = four wgmma m64nNk32 from shared
// memory, the same descriptors and swizzle as kernels/cuda/gemm):
//   queue      two partials, block g+1 issued before the wait for block g (wait_group 1), no
//              promotion: the tensor core's own rate with two blocks queued per warpgroup.
// NOTE: a loop that waits for each block without reading its partial ran faster than the
// tensor core's peak on the H100 (ptxas drops wgmmas whose results are never read), so there is
// none: every loop here reads every partial.
//   promote    one partial: issue, wait_group 0, acc += part * scale (N / 2 FFMA per thread).
//   turns      as promote, the warpgroups issuing in a ring of named barriers (the kernel's
//              loops run without turns: docs/decisions/0008-gemm-yield-hints.md).
// NOTE: the two-partial loop with promotion (the kernel's ConsumerLoop) is not here: written
// this way ptxas serialized its wgmmas (C7514) whatever was tried; the kernel's trace covers it.
// Output: one JSON object per line: loop, warpgroups, n, cycles per K block (median over CTAs of
// the first consumer thread's clock64 span), the tensor core's ideal cycles per block (FP8
// dense: 4096 MACs per cycle per SM), and the device-wide TFLOP/s of the launch.
//
// Usage: gemm_floor_bench [--blocks=N] [--reps=N] [--random]
//   --random: the copied stages (producer 2 and 3) hold random finite e4m3 codes, not 1.0.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/gemm/wgmma_ops.cuh"

namespace {

using kd::cuda_gemm::WgmmaM64N128K32;
using kd::cuda_gemm::WgmmaM64N128K32First;
using kd::cuda_gemm::WgmmaM64N192K32;
using kd::cuda_gemm::WgmmaM64N192K32First;

constexpr int kBlockK = 128;
constexpr int kStages = 4;  // tiles rotate through 4 stage buffers, as in the kernel

enum Loop { kQueue = 0, kPromote = 1, kTurns = 2 };
const char* LoopName(int l) {
  static const char* names[] = {"queue", "promote", "turns"};
  return names[l];
}

#define CHECK_CUDA(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

constexpr uint32_t kDescHi = (1024 >> 4) | (1u << 30);  // 1024-byte 8-row stride, 128B swizzle

__device__ __forceinline__ uint64_t Desc(uint32_t addr) {
  uint64_t d;
  asm("mov.b64 %0, {%1, %2};" : "=l"(d) : "r"((addr >> 4) | (1u << 16)), "r"(kDescHi));
  return d;
}
__device__ __forceinline__ void Fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void Commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void Wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void FenceOperand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void BarSync(int id, int n) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void BarArrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ float LoadF32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}
constexpr int kScaleRow = 64;  // floats between two rows' scales: K = 8192

__device__ __forceinline__ void CpAsync4(uint32_t dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
constexpr int kMapBlocks = 64;  // K blocks of the tensor-map operands (K = 8192)

__device__ __forceinline__ void TmaTile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0,
                                        int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void MbarInit(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void MbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
// A non-tensor bulk copy global -> shared (the TMA unit, as the kernel's tensor loads).
__device__ __forceinline__ void BulkCopy(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

template <int kN>
__device__ __forceinline__ void Issue(float (&part)[kN / 2], uint32_t a, uint32_t b) {
  Fence();
  if constexpr (kN == 192) {
    WgmmaM64N192K32First(part, Desc(a), Desc(b));
  } else {
    WgmmaM64N128K32First(part, Desc(a), Desc(b));
  }
#pragma unroll
  for (int k = 1; k < kBlockK / 32; ++k) {
    if constexpr (kN == 192) {
      WgmmaM64N192K32(part, Desc(a + 32 * k), Desc(b + 32 * k), true);
    } else {
      WgmmaM64N128K32(part, Desc(a + 32 * k), Desc(b + 32 * k), true);
    }
  }
  Commit();
}

template <int kN>
__device__ __forceinline__ void Promote(float (&acc)[kN / 2], float (&part)[kN / 2], float s0,
                                        float s1) {
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) FenceOperand(part[i]);
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    acc[4 * j + 0] += part[4 * j + 0] * s0;
    acc[4 * j + 1] += part[4 * j + 1] * s0;
    acc[4 * j + 2] += part[4 * j + 2] * s1;
    acc[4 * j + 3] += part[4 * j + 3] * s1;
  }
}

template <int kWgs, int kN>
struct Layout {
  static constexpr int kTileA = kWgs * 64 * kBlockK;
  static constexpr int kTileB = kN * kBlockK;
  static constexpr int kStage = kTileA + kTileB;  // multiple of 1024
  static constexpr int kFull = kStages * kStage;  // kStages full then kStages empty mbarriers
  static constexpr int kScales = kFull + 2 * kStages * 8;  // per stage: A rows' then B's scales
  static constexpr int kScaleStage = (kWgs * 64 + kN) * 4;
  static constexpr int kBytes = kScales + kStages * kScaleStage + 1024;
};

// kProd: 0 no producer (the tiles stay resident); 1 a producer warpgroup and the kernel's
// full/empty mbarrier ring, no data moved; 2 as 1, and the producer refills each stage by bulk
// copies from an L2-resident global buffer (A and B bytes of a stage, as the kernel's TMA loads);
// 3 as 2, and each block's two scale products come from shared memory (three loads and two
// multiplies before the wait, as the kernel's LoadScales; the stage's bytes stand in for them);
// 4 as 3, and the scales come as the kernel's do: producer warps 1..3 copy them from global
// memory (A: one 4-byte cp.async per row, rows kScaleRow floats apart; B: two) and each of their
// 96 threads arrives on the stage's full barrier (cp.async.mbarrier.arrive.noinc); 5 as 3, the
// tiles loaded as the kernel loads them: 2D tensor maps with 128-byte swizzle over a global A
// (rows x K) and B (N x K), CTA c reading A rows of tile c / 2 and B rows of tile c % 2, K blocks
// in turn (the one-wave probe shape of gpu_gemm_bench --shape).
template <int kWgs, int kN, int kLoop, int kProd>
__global__ void __launch_bounds__(128 * (kWgs + (kProd > 0)), 1)
    FloorKernel(int blocks, float scale, float* sink, long long* cycles, const uint8_t* src,
                int src_stages, const float* scales, const __grid_constant__ CUtensorMap map_a,
                const __grid_constant__ CUtensorMap map_b) {
  using L = Layout<kWgs, kN>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  // Fill the tiles with e4m3 1.0 (0x38): finite products whatever the swizzle.
  for (int i = threadIdx.x; i < kStages * L::kStage / 4; i += blockDim.x) {
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(base + 4 * i), "r"(0x38383838u));
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      MbarInit(base + L::kFull + 8 * i, kProd == 4 ? 1 + 96 : 1);
      MbarInit(base + L::kFull + 8 * (kStages + i), 4 * kWgs);
    }
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();

  if constexpr (kProd > 0) {
    // Register split as in the kernel: 56 for the producer, the rest to the consumers.
    if (threadIdx.x >= 128 * kWgs) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
      if (threadIdx.x == 128 * kWgs) {
        for (int g = 0; g < blocks; ++g) {
          const int st = g % kStages;
          const uint32_t full = base + L::kFull + 8 * st;
          MbarWait(base + L::kFull + 8 * (kStages + st), ((g / kStages) & 1) ^ 1);
          if constexpr (kProd == 5) {
            MbarExpectTx(full, L::kStage);
            const int kb = g % kMapBlocks;
            TmaTile(base + st * L::kStage, &map_a, full, kb * kBlockK,
                    (blockIdx.x / 2) * kWgs * 64);
            TmaTile(base + st * L::kStage + L::kTileA, &map_b, full, kb * kBlockK,
                    (blockIdx.x % 2) * kN);
          } else if constexpr (kProd >= 2) {
            MbarExpectTx(full, L::kStage);
            const uint8_t* from =
                src + static_cast<size_t>((g + blockIdx.x) % src_stages) * L::kStage;
            BulkCopy(base + st * L::kStage, from, L::kTileA, full);
            BulkCopy(base + st * L::kStage + L::kTileA, from + L::kTileA, L::kTileB, full);
          } else {
            MbarArrive(full);
          }
        }
      } else if (kProd == 4 && threadIdx.x >= 128 * kWgs + 32) {
        const int role = (threadIdx.x - 128 * kWgs) / 32 - 1, lane = threadIdx.x % 32;
        for (int g = 0; g < blocks; ++g) {
          const int st = g % kStages;
          MbarWait(base + L::kFull + 8 * (kStages + st), ((g / kStages) & 1) ^ 1);
          const uint32_t sdst = base + L::kScales + st * L::kScaleStage;
          const int kb = g % kScaleRow;
          if (role < 2) {
            for (int i = 0; i < kWgs; ++i) {
              const int row = role * 32 * kWgs + lane + 32 * i;
              CpAsync4(sdst + 4 * row,
                       scales + (static_cast<size_t>(blockIdx.x) * 192 + row) * kScaleRow + kb);
            }
          } else if (lane < 2) {
            CpAsync4(sdst + 4 * (kWgs * 64 + lane), scales + lane * kScaleRow + kb);
          }
          asm volatile(
              "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(base + L::kFull + 8 * st)
              : "memory");
        }
      }
      return;
    }
    if constexpr (kWgs == 3) {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 152;");
    } else {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
    }
  }

  const int wg = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  auto a_of = [&](int st) { return base + st * L::kStage + wg * 64 * kBlockK; };
  auto b_of = [&](int st) { return base + st * L::kStage + L::kTileA; };
  const float s0 = scale * (1 + tid % 7), s1 = scale * (1 + tid % 5);

  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
  long long t0 = 0;
  constexpr int kWarm = 16;

  if constexpr (kLoop == kQueue) {
    float p0[kN / 2], p1[kN / 2];
    // The kernel's ConsumerLoop pattern: each issue sits under a branch whose other path waits
    // for everything.
    Issue<kN>(p0, a_of(0), b_of(0));
    int g = 0;
    while (true) {
      if (g == kWarm) t0 = clock64();
      const bool more = ++g < blocks;
      if (more) {
        Issue<kN>(p1, a_of(g % kStages), b_of(g % kStages));
        Wait<1>();
      } else {
        Wait<0>();
      }
      if (!more) break;
      const bool more2 = ++g < blocks;
      if (more2) {
        Issue<kN>(p0, a_of(g % kStages), b_of(g % kStages));
        Wait<1>();
      } else {
        Wait<0>();
      }
      if (!more2) break;
    }
    Wait<0>();
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[i] = p0[i] + p1[i];
  } else {
    float part[kN / 2];
    constexpr int kTurn = 1;
    if (kLoop == kTurns && wg == kWgs - 1) BarArrive(kTurn, 256);
    for (int g = 0; g < blocks; ++g) {
      if (g == kWarm) t0 = clock64();
      if constexpr (kProd > 0) MbarWait(base + L::kFull + 8 * (g % kStages), (g / kStages) & 1);
      if constexpr (kLoop == kTurns) BarSync(kTurn + wg, 256);
      Issue<kN>(part, a_of(g % kStages), b_of(g % kStages));
      if constexpr (kLoop == kTurns) BarArrive(kTurn + (wg + 1) % kWgs, 256);
      float t0s = s0, t1s = s1;
      if constexpr (kProd >= 3) {
        const uint32_t sa = kProd == 4 ? base + L::kScales + (g % kStages) * L::kScaleStage +
                                             4 * (wg * 64 + tid / 32 * 16 + tid % 32 / 4)
                                       : a_of(g % kStages) + 4 * (tid / 32 * 16 + tid % 32 / 4);
        const float b =
            LoadF32(kProd == 4 ? base + L::kScales + (g % kStages) * L::kScaleStage + 4 * kWgs * 64
                               : b_of(g % kStages));
        t0s = LoadF32(sa) * b;
        t1s = LoadF32(sa + 32) * b;
      }
      Wait<0>();
      Promote<kN>(acc, part, t0s, t1s);
      if constexpr (kProd > 0) {
        __syncwarp();
        if (tid % 32 == 0) MbarArrive(base + L::kFull + 8 * (kStages + g % kStages));
      }
    }
    if (kLoop == kTurns && wg == 0) BarSync(kTurn, 256);
  }
  const long long t1 = clock64();
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) sum += acc[i];
  if (sum == 12345.0f) sink[blockIdx.x] = sum;  // keeps the loop; practically never stores
  if (threadIdx.x == 0) cycles[blockIdx.x] = (t1 - t0) / (blocks - kWarm);
}

struct Result {
  std::string loop;
  int wgs, n, prod;
  double cycles_median, ideal, tflops;
};

// K-major FP8 operand map: boxes of 128 K-bytes x box_rows rows, 128-byte swizzle.
CUtensorMap OperandMap(const uint8_t* data, int rows, int box_rows) {
  using EncodeFn =
      CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static EncodeFn encode = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                cudaEnableDefault, &found));
    return reinterpret_cast<EncodeFn>(p);
  }();
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(kMapBlocks * kBlockK),
                              static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(kMapBlocks * kBlockK)};
  const cuuint32_t box[2] = {kBlockK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem[2] = {1, 1};
  if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(data), dims, strides, box,
             elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
    std::exit(1);
  }
  return map;
}

struct Operands {
  const uint8_t* a;  // (132 / 2 * 192 rows, K) e4m3
  const uint8_t* b;  // (2 * 192 rows, K)
};

template <int kWgs, int kN, int kLoop, int kProd = 0>
Result Run(int sms, int blocks, int reps, float* sink, long long* d_cycles, const uint8_t* src,
           int src_stages, const float* scales, const Operands& ops) {
  const CUtensorMap map_a = OperandMap(ops.a, (sms / 2) * kWgs * 64, kWgs * 64);
  const CUtensorMap map_b = OperandMap(ops.b, 2 * kN, kN);
  using L = Layout<kWgs, kN>;
  auto kernel = FloorKernel<kWgs, kN, kLoop, kProd>;
  const int threads = 128 * (kWgs + (kProd > 0));
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  kernel<<<sms, threads, L::kBytes>>>(blocks, 1e-3f, sink, d_cycles, src, src_stages, scales, map_a,
                                      map_b);  // warm-up
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms;
  std::vector<long long> all;
  for (int r = 0; r < reps; ++r) {
    CHECK_CUDA(cudaEventRecord(e0));
    kernel<<<sms, threads, L::kBytes>>>(blocks, 1e-3f, sink, d_cycles, src, src_stages, scales,
                                        map_a, map_b);
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
    std::vector<long long> c(sms);
    CHECK_CUDA(cudaMemcpy(c.data(), d_cycles, sms * sizeof(long long), cudaMemcpyDeviceToHost));
    all.insert(all.end(), c.begin(), c.end());
  }
  std::sort(ms.begin(), ms.end());
  std::sort(all.begin(), all.end());
  const double flops = 2.0 * kWgs * 64 * kN * kBlockK * static_cast<double>(blocks) * sms;
  Result res;
  res.loop = LoopName(kLoop);
  res.wgs = kWgs;
  res.n = kN;
  res.prod = kProd;
  res.cycles_median = static_cast<double>(all[all.size() / 2]);
  res.ideal = kWgs * 64.0 * kN * kBlockK / 4096.0;
  res.tflops = flops / (ms[ms.size() / 2] * 1e-3) / 1e12;
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  int blocks = 4096, reps = 5;
  bool random = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--blocks=", 9) == 0)
      blocks = std::atoi(argv[i] + 9);
    else if (std::strncmp(argv[i], "--reps=", 7) == 0)
      reps = std::atoi(argv[i] + 7);
    else if (std::strcmp(argv[i], "--random") == 0)
      random = true;
    else {
      std::fprintf(stderr, "usage: %s [--blocks=N] [--reps=N] [--random]\n", argv[0]);
      return 2;
    }
  }
  if (blocks < 64 || blocks % 2 != 0 || reps < 1) {
    std::fprintf(stderr, "--blocks must be even and >= 64, --reps >= 1\n");
    return 2;
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  float* sink;
  long long* cycles;
  CHECK_CUDA(cudaMalloc(&sink, sms * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&cycles, sms * sizeof(long long)));
  // 2.6-3.4 MB of stages to copy from: L2-resident, as the kernel's A and B mostly are.
  constexpr int kSrcStages = 64;
  uint8_t* src;
  CHECK_CUDA(cudaMalloc(&src, kSrcStages * Layout<3, 128>::kStage));
  CHECK_CUDA(cudaMemset(src, 0x38, kSrcStages * Layout<3, 128>::kStage));  // e4m3 1.0
  if (random) {
    // Random finite e4m3 codes (no 0x7f / 0xff NaN): the tensor core's power depends on data.
    std::vector<uint8_t> h(kSrcStages * Layout<3, 128>::kStage);
    uint32_t x = 20261122;
    for (uint8_t& b : h) {
      x = x * 1664525u + 1013904223u;
      b = static_cast<uint8_t>((x >> 24) % 0x7f) | static_cast<uint8_t>((x >> 16) & 0x80);
    }
    CHECK_CUDA(cudaMemcpy(src, h.data(), h.size(), cudaMemcpyHostToDevice));
  }
  // Per-row scales for 192 rows per CTA, kScaleRow floats apart (as a (M, K / 128) matrix).
  float* scales;
  const size_t scale_count = static_cast<size_t>(sms) * 192 * kScaleRow;
  CHECK_CUDA(cudaMalloc(&scales, scale_count * sizeof(float)));
  {
    std::vector<float> h(scale_count);
    for (size_t i = 0; i < h.size(); ++i) h[i] = 1.0f + static_cast<float>(i % 7) / 8;
    CHECK_CUDA(cudaMemcpy(scales, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  // Tensor-map operands (producer 5): random finite e4m3 codes.
  Operands ops;
  uint8_t *a_dev, *b_dev;
  const size_t a_bytes = static_cast<size_t>(sms / 2) * 192 * kMapBlocks * kBlockK;
  const size_t b_bytes = static_cast<size_t>(2) * 192 * kMapBlocks * kBlockK;
  CHECK_CUDA(cudaMalloc(&a_dev, a_bytes));
  CHECK_CUDA(cudaMalloc(&b_dev, b_bytes));
  {
    std::vector<uint8_t> h(a_bytes);
    uint32_t x = 7;
    for (uint8_t& v : h) {
      x = x * 1664525u + 1013904223u;
      v = static_cast<uint8_t>((x >> 24) % 0x7f) | static_cast<uint8_t>((x >> 16) & 0x80);
    }
    CHECK_CUDA(cudaMemcpy(a_dev, h.data(), a_bytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b_dev, h.data(), b_bytes, cudaMemcpyHostToDevice));
  }
  ops.a = a_dev;
  ops.b = b_dev;
  std::vector<Result> rs;
  // One warpgroup alone: its own chain (wgmma latency and promotion) with nothing beside it.
  rs.push_back(
      Run<1, 192, kPromote>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<1, 128, kPromote>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  // 128x192 tiles: two warpgroups of 64 x 192.
  rs.push_back(Run<2, 192, kQueue>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<2, 192, kPromote>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(Run<2, 192, kTurns>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  // 128x128 tiles: two warpgroups of 64 x 128.
  rs.push_back(Run<2, 128, kQueue>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<2, 128, kPromote>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(Run<2, 128, kTurns>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  // 192x128 tiles: three warpgroups of 64 x 128.
  rs.push_back(Run<3, 128, kQueue>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kPromote>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(Run<3, 128, kTurns>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  // With the producer and the mbarrier ring (1), the bulk copies (2), the scale loads (3), the
  // scales copied by producer warps as the kernel does (4), the tiles by tensor maps (5).
  rs.push_back(
      Run<2, 192, kTurns, 1>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<2, 192, kTurns, 2>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<2, 128, kTurns, 2>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kPromote, 1>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kPromote, 2>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kTurns, 1>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kTurns, 2>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<2, 192, kTurns, 3>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kPromote, 3>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kTurns, 3>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<2, 192, kTurns, 4>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kTurns, 4>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<2, 192, kTurns, 5>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  rs.push_back(
      Run<3, 128, kTurns, 5>(sms, blocks, reps, sink, cycles, src, kSrcStages, scales, ops));
  for (const Result& r : rs) {
    std::printf(
        "{\"device\": \"%s\", \"loop\": \"%s\", \"producer\": %d, \"warpgroups\": %d, "
        "\"tile\": \"%dx%d\", "
        "\"cycles_per_block\": %.0f, \"ideal_cycles\": %.0f, \"tensor_share\": %.3f, "
        "\"tflops\": %.1f}\n",
        prop.name, r.loop.c_str(), r.prod, r.wgs, 64 * r.wgs, r.n, r.cycles_median, r.ideal,
        r.ideal / r.cycles_median, r.tflops);
  }
  CHECK_CUDA(cudaFree(a_dev));
  CHECK_CUDA(cudaFree(b_dev));
  CHECK_CUDA(cudaFree(scales));
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(sink));
  CHECK_CUDA(cudaFree(cycles));
  return 0;
}
