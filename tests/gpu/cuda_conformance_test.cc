// Every op the CUDA backend runs, against the CPU backend (the reference), bit for bit: the
// outputs of both start from the same poison, so an element one backend writes and the other
// does not shows up too.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/run_op.h"

namespace kd {
namespace {

using testing::DeviceBuffer;
using testing::MakeTensor;

constexpr uint8_t kPoison = 0xA5;
const DeviceLoc kCpu{BackendKind::kCpu, 0};
const DeviceLoc kGpu{BackendKind::kCuda, 0};

// Random input bits: per row a magnitude, per 128-element block sometimes a special case (NaN
// of either sign, Inf, all zeros, subnormal-only, negative zeros).
std::vector<uint8_t> RandomInput(DType dtype, int64_t rows, int64_t stride, std::mt19937_64& rng) {
  const size_t esize = DTypeSize(dtype);
  std::vector<uint8_t> out(rows * stride * esize);
  std::uniform_int_distribution<uint64_t> bits;
  for (int64_t r = 0; r < rows; ++r) {
    const int row_exp_shift = static_cast<int>(bits(rng) % 60) - 30;
    int special = 0;
    for (int64_t c = 0; c < stride; ++c) {
      if (c % 128 == 0) special = static_cast<int>(bits(rng) % 40);
      const uint64_t x = bits(rng);
      const uint32_t sign = x & 1;
      int exp_drop = static_cast<int>((x >> 1) % 8);
      uint64_t man = x >> 8;
      uint32_t value = 0;
      if (dtype == DType::kF32) {
        int e = 127 + row_exp_shift - exp_drop;
        if (special == 3) e = 0;  // subnormal
        value = (sign << 31) | (static_cast<uint32_t>(std::clamp(e, 0, 254)) << 23) |
                static_cast<uint32_t>(man & 0x7FFFFF);
        if (special == 1 && c % 128 == 77) value = (sign << 31) | 0x7FC00000u;
        if (special == 2 && c % 128 == 5) value = (sign << 31) | 0x7F800000u;
        if (special == 4) value = 0;
        if (special == 5) value = 0x80000000u;
        std::memcpy(&out[(r * stride + c) * 4], &value, 4);
      } else if (dtype == DType::kBF16) {
        int e = 127 + row_exp_shift - exp_drop;
        if (special == 3) e = 0;
        value = (sign << 15) | (static_cast<uint32_t>(std::clamp(e, 0, 254)) << 7) |
                static_cast<uint32_t>(man & 0x7F);
        if (special == 1 && c % 128 == 77) value = (sign << 15) | 0x7FC0u;
        if (special == 2 && c % 128 == 5) value = (sign << 15) | 0x7F80u;
        if (special == 4) value = 0;
        if (special == 5) value = 0x8000u;
        const uint16_t v16 = static_cast<uint16_t>(value);
        std::memcpy(&out[(r * stride + c) * 2], &v16, 2);
      } else {
        int e = 15 + row_exp_shift / 4 - exp_drop;
        if (special == 3) e = 0;
        value = (sign << 15) | (static_cast<uint32_t>(std::clamp(e, 0, 30)) << 10) |
                static_cast<uint32_t>(man & 0x3FF);
        if (special == 1 && c % 128 == 77) value = (sign << 15) | 0x7E00u;
        if (special == 2 && c % 128 == 5) value = (sign << 15) | 0x7C00u;
        if (special == 4) value = 0;
        if (special == 5) value = 0x8000u;
        const uint16_t v16 = static_cast<uint16_t>(value);
        std::memcpy(&out[(r * stride + c) * 2], &v16, 2);
      }
    }
  }
  return out;
}

struct QuantCase {
  int64_t m, k, in_pad, out_pad, scale_pad;
};

// Every variant the CUDA backend supports: 1x128 (row-major and K-block-major scales) and 128x128
// blocks of Y = X, fp32 and pow2 scales, three input and three output types, strided and
// unaligned rows. Transposed outputs are refused (UnsupportedOpsAndForeignTensorsAreRefused).
TEST(CudaConformance, QuantizeMatchesCpuBitForBitInEveryVariant) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(2);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(1234);
  const QuantCase cases[] = {{300, 384, 0, 0, 0},
                             {128, 128, 8, 16, 1},
                             {1, 256, 0, 0, 0},
                             {257, 512, 1, 3, 2},
                             {1000, 1024, 0, 0, 0}};
  const DType inputs[] = {DType::kBF16, DType::kF16, DType::kF32};
  const DType outputs[] = {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2};
  int runs = 0;
  for (const QuantCase& qc : cases) {
    for (DType in_type : inputs) {
      const int64_t in_stride = qc.k + qc.in_pad;
      const std::vector<uint8_t> input = RandomInput(in_type, qc.m, in_stride, rng);
      DeviceBuffer d_input(*gpu, input);
      for (DType out_type : outputs) {
        for (int variant = 0; variant < 3; ++variant) {
          {
            const bool transpose = false;  // Y = Xᵀ is refused by the cuda backend for now
            for (bool pow2 : {false, true}) {
              const bool tile = variant == 2;
              const bool kbm = variant == 1;
              const std::string what = absl::StrCat(
                  DTypeName(in_type), ">", DTypeName(out_type), " ", qc.m, "x", qc.k,
                  " in_pad=", qc.in_pad, " out_pad=", qc.out_pad, tile ? " 128x128" : " 1x128",
                  kbm ? " k-block-major" : "", transpose ? " transposed" : "", pow2 ? " pow2" : "");
              SCOPED_TRACE(what);
              const int64_t out_rows = transpose ? qc.k : qc.m;
              const int64_t out_cols = transpose ? qc.m : qc.k;
              const int64_t out_stride = out_cols + qc.out_pad;
              int64_t s_rows = qc.m, s_cols = qc.k / 128;
              if (tile) s_rows = (qc.m + 127) / 128;
              if (kbm) std::swap(s_rows, s_cols);
              const int64_t s_stride = s_cols + qc.scale_pad;
              std::vector<uint8_t> out(out_rows * out_stride, kPoison);
              std::vector<uint8_t> scales(s_rows * s_stride * 4, kPoison);

              auto make = [&](void* in, void* o, void* s, DeviceLoc loc) {
                QuantizeArgs a;
                a.input = MakeTensor(in, in_type, {qc.m, qc.k}, in_stride, loc);
                a.output = MakeTensor(o, out_type, {out_rows, out_cols}, out_stride, loc);
                a.scales = MakeTensor(s, DType::kF32, {s_rows, s_cols}, s_stride, loc);
                a.granularity = tile ? QuantGranularity::k128x128 : QuantGranularity::k1x128;
                a.transpose_output = transpose;
                a.scale_format = pow2 ? ScaleFormat::kPow2 : ScaleFormat::kFp32;
                a.scale_layout = kbm ? ScaleLayout::kKBlockMajor : ScaleLayout::kRowMajor;
                return Op(a);
              };
              std::vector<uint8_t> cpu_in = input;
              const Op cpu_op = make(cpu_in.data(), out.data(), scales.data(), kCpu);
              ASSERT_TRUE(Validate(cpu_op).ok()) << Validate(cpu_op).status();
              ASSERT_TRUE(RunOp(*cpu, cpu_op, *cpu_stream, nullptr).ok());

              DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out.size(), kPoison));
              DeviceBuffer d_scales(*gpu, std::vector<uint8_t>(scales.size(), kPoison));
              const Op gpu_op = make(d_input.data(), d_out.data(), d_scales.data(), kGpu);
              ASSERT_TRUE(RunOp(*gpu, gpu_op, *stream, nullptr).ok());
              ASSERT_TRUE(gpu->Synchronize(*stream).ok());
              const std::vector<uint8_t> got_out = d_out.Read(out.size());
              const std::vector<uint8_t> got_scales = d_scales.Read(scales.size());
              size_t first_bad = 0;
              while (first_bad < out.size() && got_out[first_bad] == out[first_bad]) ++first_bad;
              ASSERT_EQ(first_bad, out.size())
                  << "output byte " << first_bad << ": cuda " << int(got_out[first_bad]) << " cpu "
                  << int(out[first_bad]);
              ASSERT_EQ(got_scales, scales);
              ++runs;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(runs, 5 * 3 * 3 * 3 * 2);
}

// The rest of the family (the tiled quantizer, the row-wise kernels, the general three-pass
// quantizer for what they leave) and the dual pass: every granularity but the jagged ones, on
// Y = X and Y = Xᵀ, with fp32/pow2 scales, FLOOR/RCEIL mx rounding, three input and three output
// types, full and partial blocks. Combinations the shared validation refuses are skipped; every
// granularity must run.
TEST(CudaConformance, EveryOtherGranularityMatchesCpuBitForBit) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(2);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(99);
  const std::pair<int64_t, int64_t> shapes[] = {{256, 384}, {300, 256}, {384, 160}, {7, 96}};
  const DType inputs[] = {DType::kBF16, DType::kF16, DType::kF32};
  const DType outputs[] = {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2};
  enum Kind {
    k1x128T,
    k128x1,
    k128x1T,
    k128x128T,
    kPerRow,
    kPerRowT,
    kPerTensor,
    kPerTensorT,
    kMx,
    kMxT,
    kDual,
    kDualKbm,
    kKinds
  };
  int ran[kKinds] = {};
  for (auto [m, k] : shapes) {
    for (DType in_type : inputs) {
      const std::vector<uint8_t> input = RandomInput(in_type, m, k, rng);
      DeviceBuffer d_input(*gpu, input);
      for (DType out_type : outputs) {
        for (int kind = 0; kind < kKinds; ++kind) {
          for (int option = 0; option < 2; ++option) {  // pow2 scales, or RCEIL for mx
            QuantizeArgs a;
            const bool t = kind == k1x128T || kind == k128x1T || kind == k128x128T ||
                           kind == kPerRowT || kind == kPerTensorT || kind == kMxT;
            const int64_t rows = t ? k : m, cols = t ? m : k;
            a.transpose_output = t;
            std::vector<int64_t> s_shape;
            DType s_type = DType::kF32;
            switch (kind) {
              case k1x128T:
              case kDual:
              case kDualKbm:
                a.granularity = QuantGranularity::k1x128;
                s_shape = {rows, cols / 128};
                if (kind == kDualKbm) {
                  s_shape = {cols / 128, rows};
                  a.scale_layout = ScaleLayout::kKBlockMajor;
                }
                break;
              case k128x1:
              case k128x1T:
                a.granularity = QuantGranularity::k128x1;
                s_shape = {(rows + 127) / 128, cols};
                break;
              case k128x128T:
                a.granularity = QuantGranularity::k128x128;
                s_shape = {(rows + 127) / 128, cols / 128};
                break;
              case kPerRow:
              case kPerRowT:
                a.granularity = QuantGranularity::kPerRow;
                s_shape = {rows, 1};
                break;
              case kPerTensor:
              case kPerTensorT:
                a.granularity = QuantGranularity::kPerTensor;
                s_shape = {1};
                break;
              default:
                a.granularity = QuantGranularity::kMx1x32;
                s_shape = {rows, cols / 32};
                s_type = DType::kU8;
                break;
            }
            const bool mx = a.granularity == QuantGranularity::kMx1x32;
            if (mx) {
              a.mx_rounding = option ? MxRounding::kRceil : MxRounding::kFloor;
            } else {
              a.scale_format = option ? ScaleFormat::kPow2 : ScaleFormat::kFp32;
            }
            const bool dual = kind == kDual || kind == kDualKbm;
            const std::vector<int64_t> st_shape = kind == kDualKbm
                                                      ? std::vector<int64_t>{m / 128, k}
                                                      : std::vector<int64_t>{k, m / 128};
            int64_t s_elems = 1;
            for (int64_t d : s_shape) s_elems *= d;
            const size_t s_bytes = std::max<int64_t>(s_elems, 1) * DTypeSize(s_type);
            const size_t st_bytes = std::max<int64_t>(st_shape[0] * st_shape[1], 1) * 4;
            const size_t out_bytes = rows * cols;
            auto make = [&](void* in, void* o, void* sc, void* ot, void* stt, DeviceLoc loc) {
              QuantizeArgs b = a;
              b.input = MakeTensor(in, in_type, {m, k}, k, loc);
              b.output = MakeTensor(o, out_type, {rows, cols}, cols, loc);
              b.scales = MakeTensor(sc, s_type, s_shape, s_shape.size() == 2 ? s_shape[1] : 1, loc);
              if (dual) {
                b.output_t = MakeTensor(ot, out_type, {k, m}, m, loc);
                b.scales_t = MakeTensor(stt, DType::kF32, st_shape, st_shape[1], loc);
              }
              return Op(b);
            };
            std::vector<uint8_t> cpu_in = input;
            std::vector<uint8_t> out(out_bytes, kPoison), sc(s_bytes, kPoison),
                out_t(out_bytes, kPoison), sc_t(st_bytes, kPoison);
            const Op cpu_op =
                make(cpu_in.data(), out.data(), sc.data(), out_t.data(), sc_t.data(), kCpu);
            if (!Validate(cpu_op).ok()) continue;
            const std::string what = absl::StrCat(DTypeName(in_type), ">", DTypeName(out_type), " ",
                                                  m, "x", k, " kind=", kind, " option=", option);
            SCOPED_TRACE(what);
            ASSERT_TRUE(RunOp(*cpu, cpu_op, *cpu_stream, nullptr).ok());
            DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out_bytes, kPoison));
            DeviceBuffer d_sc(*gpu, std::vector<uint8_t>(s_bytes, kPoison));
            DeviceBuffer d_out_t(*gpu, std::vector<uint8_t>(out_bytes, kPoison));
            DeviceBuffer d_sc_t(*gpu, std::vector<uint8_t>(st_bytes, kPoison));
            const Op gpu_op = make(d_input.data(), d_out.data(), d_sc.data(), d_out_t.data(),
                                   d_sc_t.data(), kGpu);
            const absl::Status run = RunOp(*gpu, gpu_op, *stream, nullptr);
            ASSERT_TRUE(run.ok()) << run;
            ASSERT_TRUE(gpu->Synchronize(*stream).ok());
            const std::vector<uint8_t> got = d_out.Read(out_bytes);
            size_t bad = 0;
            while (bad < out_bytes && got[bad] == out[bad]) ++bad;
            ASSERT_EQ(bad, out_bytes)
                << "output byte " << bad << ": cuda " << int(got[bad]) << " cpu " << int(out[bad]);
            ASSERT_EQ(d_sc.Read(s_bytes), sc);
            if (dual) {
              ASSERT_EQ(d_out_t.Read(out_bytes), out_t);
              ASSERT_EQ(d_sc_t.Read(st_bytes), sc_t);
            }
            ++ran[kind];
          }
        }
      }
    }
  }
  for (int kind = 0; kind < kKinds; ++kind) EXPECT_GT(ran[kind], 0) << "kind " << kind;
}

// Replaces every NaN and Inf in the rows of odd 128-row bands with 1.0, so that those bands hold
// tiles without a non-finite block (RandomInput puts one in nearly every 128x128 tile), which
// take the hardware conversion.
void FiniteOddBands(DType dtype, int64_t rows, int64_t stride, std::vector<uint8_t>& data) {
  const size_t esize = DTypeSize(dtype);
  for (int64_t r = 128; r < rows; ++r) {
    if ((r / 128) % 2 == 0) continue;
    for (int64_t c = 0; c < stride; ++c) {
      uint8_t* at = &data[(r * stride + c) * esize];
      if (dtype == DType::kF32) {
        uint32_t v;
        std::memcpy(&v, at, 4);
        if ((v & 0x7F800000u) == 0x7F800000u) v = 0x3F800000u;
        std::memcpy(at, &v, 4);
      } else {
        const uint16_t exp = dtype == DType::kBF16 ? 0x7F80u : 0x7C00u;
        const uint16_t one = dtype == DType::kBF16 ? 0x3F80u : 0x3C00u;
        uint16_t v;
        std::memcpy(&v, at, 2);
        if ((v & exp) == exp) v = one;
        std::memcpy(at, &v, 2);
      }
    }
  }
}

// The tiled one-pass quantizer (quantize_tiled.cu): 1x128, 128x1 and 128x128 of Y = Xᵀ, 128x1
// of Y = X and the dual passes (1x128, and 128x128: W and Wᵀ), at ragged shapes (partial row and
// column tiles, chunks cut by K), several tiles per grid, row strides past the row (aligned and
// not, for input, outputs and scales: the 16-byte and the element paths), both scale layouts,
// fp32/pow2 scales, three input and three output types, tiles with NaN/Inf blocks and tiles
// without. Outputs start from the same poison on both backends, so padding bytes a kernel must not
// touch are checked too.
TEST(CudaConformance, TiledVariantsMatchCpuBitForBitOnRaggedStridedShapes) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(2);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(4321);
  const QuantCase cases[] = {{300, 384, 8, 16, 3}, {384, 300, 3, 5, 1},     {256, 384, 0, 0, 0},
                             {256, 384, 8, 16, 2}, {1000, 1030, 24, 32, 5}, {1024, 1030, 1, 0, 0},
                             {7, 5, 1, 3, 0},      {640, 1280, 0, 16, 1}};
  const DType inputs[] = {DType::kBF16, DType::kF16, DType::kF32};
  const DType outputs[] = {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2};
  enum Kind { k1x128T, k1x128TKbm, k128x1, k128x1T, k128x128T, kDual, kDualKbm, kDual128, kKinds };
  int ran[kKinds] = {};
  for (const QuantCase& qc : cases) {
    const int64_t m = qc.m, k = qc.k;
    for (DType in_type : inputs) {
      const int64_t in_stride = k + qc.in_pad;
      std::vector<uint8_t> input = RandomInput(in_type, m, in_stride, rng);
      FiniteOddBands(in_type, m, in_stride, input);
      DeviceBuffer d_input(*gpu, input);
      for (DType out_type : outputs) {
        for (int kind = 0; kind < kKinds; ++kind) {
          for (bool pow2 : {false, true}) {
            const bool dual = kind == kDual || kind == kDualKbm || kind == kDual128;
            const bool kbm = kind == k1x128TKbm || kind == kDualKbm;
            const bool t = !dual && kind != k128x1;
            const int64_t rows = t ? k : m, cols = t ? m : k;
            QuantizeArgs a;
            a.transpose_output = t;
            a.scale_format = pow2 ? ScaleFormat::kPow2 : ScaleFormat::kFp32;
            a.scale_layout = kbm ? ScaleLayout::kKBlockMajor : ScaleLayout::kRowMajor;
            int64_t s_rows = rows, s_cols = cols / 128;
            switch (kind) {
              case k128x1:
              case k128x1T:
                a.granularity = QuantGranularity::k128x1;
                s_rows = (rows + 127) / 128, s_cols = cols;
                break;
              case k128x128T:
              case kDual128:
                a.granularity = QuantGranularity::k128x128;
                s_rows = (rows + 127) / 128;
                break;
              default:
                a.granularity = QuantGranularity::k1x128;
                break;
            }
            if (kbm) std::swap(s_rows, s_cols);
            int64_t st_rows = k, st_cols = m / 128;  // the dual pass's scales_t
            if (kind == kDual128) st_rows = k / 128;
            if (kbm) std::swap(st_rows, st_cols);
            const int64_t out_stride = cols + qc.out_pad, out_t_stride = m + qc.out_pad;
            const int64_t s_stride = s_cols + qc.scale_pad, st_stride = st_cols + qc.scale_pad;
            const size_t out_bytes = rows * out_stride, out_t_bytes = k * out_t_stride;
            const size_t s_bytes = std::max<int64_t>(s_rows * s_stride, 1) * 4;
            const size_t st_bytes = std::max<int64_t>(st_rows * st_stride, 1) * 4;
            auto make = [&](void* in, void* o, void* sc, void* ot, void* stt, DeviceLoc loc) {
              QuantizeArgs b = a;
              b.input = MakeTensor(in, in_type, {m, k}, in_stride, loc);
              b.output = MakeTensor(o, out_type, {rows, cols}, out_stride, loc);
              b.scales = MakeTensor(sc, DType::kF32, {s_rows, s_cols}, s_stride, loc);
              if (dual) {
                b.output_t = MakeTensor(ot, out_type, {k, m}, out_t_stride, loc);
                b.scales_t = MakeTensor(stt, DType::kF32, {st_rows, st_cols}, st_stride, loc);
              }
              return Op(b);
            };
            std::vector<uint8_t> cpu_in = input;
            std::vector<uint8_t> out(out_bytes, kPoison), sc(s_bytes, kPoison),
                out_t(out_t_bytes, kPoison), sc_t(st_bytes, kPoison);
            const Op cpu_op =
                make(cpu_in.data(), out.data(), sc.data(), out_t.data(), sc_t.data(), kCpu);
            if (!Validate(cpu_op).ok()) continue;  // M or K not a multiple of 128 where needed
            const std::string what = absl::StrCat(
                DTypeName(in_type), ">", DTypeName(out_type), " ", m, "x", k, " pads ", qc.in_pad,
                "/", qc.out_pad, "/", qc.scale_pad, " kind=", kind, " pow2=", pow2);
            SCOPED_TRACE(what);
            ASSERT_TRUE(RunOp(*cpu, cpu_op, *cpu_stream, nullptr).ok());
            DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out_bytes, kPoison));
            DeviceBuffer d_sc(*gpu, std::vector<uint8_t>(s_bytes, kPoison));
            DeviceBuffer d_out_t(*gpu, std::vector<uint8_t>(out_t_bytes, kPoison));
            DeviceBuffer d_sc_t(*gpu, std::vector<uint8_t>(st_bytes, kPoison));
            const Op gpu_op = make(d_input.data(), d_out.data(), d_sc.data(), d_out_t.data(),
                                   d_sc_t.data(), kGpu);
            const absl::Status run = RunOp(*gpu, gpu_op, *stream, nullptr);
            ASSERT_TRUE(run.ok()) << run;
            ASSERT_TRUE(gpu->Synchronize(*stream).ok());
            const std::vector<uint8_t> got = d_out.Read(out_bytes);
            size_t bad = 0;
            while (bad < out_bytes && got[bad] == out[bad]) ++bad;
            ASSERT_EQ(bad, out_bytes) << "output byte " << bad << " (row " << bad / out_stride
                                      << "): cuda " << int(got[bad]) << " cpu " << int(out[bad]);
            ASSERT_EQ(d_sc.Read(s_bytes), sc);
            if (dual) {
              const std::vector<uint8_t> got_t = d_out_t.Read(out_t_bytes);
              bad = 0;
              while (bad < out_t_bytes && got_t[bad] == out_t[bad]) ++bad;
              ASSERT_EQ(bad, out_t_bytes) << "output_t byte " << bad << ": cuda " << int(got_t[bad])
                                          << " cpu " << int(out_t[bad]);
              ASSERT_EQ(d_sc_t.Read(st_bytes), sc_t);
            }
            ++ran[kind];
          }
        }
      }
    }
  }
  for (int kind = 0; kind < kKinds; ++kind) EXPECT_GE(ran[kind], 3 * 3 * 2 * 3) << "kind " << kind;
}

// Tall X (M >= 16384) puts the three transposed forms of the tiled quantizer in its grouped tile
// order (TiledGroupK in quantize_tiled.cu: 4 column tiles per group); K = 700 is 6 column tiles,
// so the last group is narrower, and the last tile is cut by K. Row strides past the row.
TEST(CudaConformance, TiledTransposedFormsMatchCpuBitForBitInGroupedTileOrder) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(4);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(777);
  const int64_t m = 16512, k = 700, in_stride = k + 8, out_stride = m + 16;
  int ran = 0;
  for (DType in_type : {DType::kBF16, DType::kF32}) {
    std::vector<uint8_t> input = RandomInput(in_type, m, in_stride, rng);
    FiniteOddBands(in_type, m, in_stride, input);
    DeviceBuffer d_input(*gpu, input);
    for (QuantGranularity g :
         {QuantGranularity::k1x128, QuantGranularity::k128x1, QuantGranularity::k128x128}) {
      QuantizeArgs a;
      a.granularity = g;
      a.transpose_output = true;
      int64_t s_rows = k, s_cols = m / 128;  // Y = Xᵀ is (k, m)
      if (g != QuantGranularity::k1x128) s_rows = (k + 127) / 128;
      if (g == QuantGranularity::k128x1) s_cols = m;
      const size_t out_bytes = k * out_stride, s_bytes = s_rows * s_cols * 4;
      auto make = [&](void* in, void* o, void* sc, DeviceLoc loc) {
        QuantizeArgs b = a;
        b.input = MakeTensor(in, in_type, {m, k}, in_stride, loc);
        b.output = MakeTensor(o, DType::kE4M3FN, {k, m}, out_stride, loc);
        b.scales = MakeTensor(sc, DType::kF32, {s_rows, s_cols}, s_cols, loc);
        return Op(b);
      };
      SCOPED_TRACE(absl::StrCat(DTypeName(in_type), " granularity=", static_cast<int>(g)));
      std::vector<uint8_t> cpu_in = input;
      std::vector<uint8_t> out(out_bytes, kPoison), sc(s_bytes, kPoison);
      const Op cpu_op = make(cpu_in.data(), out.data(), sc.data(), kCpu);
      ASSERT_TRUE(Validate(cpu_op).ok()) << Validate(cpu_op).status();
      ASSERT_TRUE(RunOp(*cpu, cpu_op, *cpu_stream, nullptr).ok());
      DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out_bytes, kPoison));
      DeviceBuffer d_sc(*gpu, std::vector<uint8_t>(s_bytes, kPoison));
      const absl::Status run =
          RunOp(*gpu, make(d_input.data(), d_out.data(), d_sc.data(), kGpu), *stream, nullptr);
      ASSERT_TRUE(run.ok()) << run;
      ASSERT_TRUE(gpu->Synchronize(*stream).ok());
      const std::vector<uint8_t> got = d_out.Read(out_bytes);
      size_t bad = 0;
      while (bad < out_bytes && got[bad] == out[bad]) ++bad;
      ASSERT_EQ(bad, out_bytes) << "output byte " << bad << " (row " << bad / out_stride
                                << "): cuda " << int(got[bad]) << " cpu " << int(out[bad]);
      ASSERT_EQ(d_sc.Read(s_bytes), sc);
      ++ran;
    }
  }
  EXPECT_EQ(ran, 6);
}

// The tiled quantizer (quantize_tiled.cu) over more tiles than the GPU holds at once: every
// mode, two- and four-byte inputs, every output format; an aligned shape (two-byte inputs take
// the cp.async kernel for every transposed form and the dual pass) and a ragged one (a partial
// last row and column tile, a chunk cut by K, strided rows: the register kernel).
TEST(CudaConformance, TiledVariantsMatchCpuBitForBitOverManyTiles) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(8);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(2024);
  const QuantCase cases[] = {{4096, 3072, 0, 0, 0}, {3000, 2900, 8, 16, 1}};
  enum Kind { k1x128T, k128x1, k128x1T, k128x128T, kDual, kDual128, kKinds };
  int ran[kKinds] = {};
  for (const QuantCase& qc : cases) {
    const int64_t m = qc.m, k = qc.k, in_stride = k + qc.in_pad;
    for (DType in_type : {DType::kBF16, DType::kF32}) {
      std::vector<uint8_t> input = RandomInput(in_type, m, in_stride, rng);
      FiniteOddBands(in_type, m, in_stride, input);
      DeviceBuffer d_input(*gpu, input);
      for (DType out_type : {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2}) {
        for (int kind = 0; kind < kKinds; ++kind) {
          const bool dual = kind == kDual || kind == kDual128;
          const bool t = !dual && kind != k128x1;
          const int64_t rows = t ? k : m, cols = t ? m : k;
          QuantizeArgs a;
          a.transpose_output = t;
          a.granularity = kind == k128x128T || kind == kDual128 ? QuantGranularity::k128x128
                          : kind == k128x1 || kind == k128x1T   ? QuantGranularity::k128x1
                                                                : QuantGranularity::k1x128;
          int64_t s_rows = rows, s_cols = cols / 128;
          if (kind == k128x1 || kind == k128x1T) s_rows = (rows + 127) / 128, s_cols = cols;
          if (kind == k128x128T || kind == kDual128) s_rows = (rows + 127) / 128;
          const int64_t st_rows = kind == kDual128 ? k / 128 : k;  // the dual passes' scales_t
          const int64_t out_stride = cols + qc.out_pad, out_t_stride = m + qc.out_pad;
          const int64_t s_stride = s_cols + qc.scale_pad, st_stride = m / 128 + qc.scale_pad;
          const size_t out_bytes = rows * out_stride, out_t_bytes = k * out_t_stride;
          const size_t s_bytes = std::max<int64_t>(s_rows * s_stride, 1) * 4;
          const size_t st_bytes = std::max<int64_t>(st_rows * st_stride, 1) * 4;
          auto make = [&](void* in, void* o, void* sc, void* ot, void* stt, DeviceLoc loc) {
            QuantizeArgs b = a;
            b.input = MakeTensor(in, in_type, {m, k}, in_stride, loc);
            b.output = MakeTensor(o, out_type, {rows, cols}, out_stride, loc);
            b.scales = MakeTensor(sc, DType::kF32, {s_rows, s_cols}, s_stride, loc);
            if (dual) {
              b.output_t = MakeTensor(ot, out_type, {k, m}, out_t_stride, loc);
              b.scales_t = MakeTensor(stt, DType::kF32, {st_rows, m / 128}, st_stride, loc);
            }
            return Op(b);
          };
          std::vector<uint8_t> cpu_in = input;
          std::vector<uint8_t> out(out_bytes, kPoison), sc(s_bytes, kPoison),
              out_t(out_t_bytes, kPoison), sc_t(st_bytes, kPoison);
          const Op cpu_op =
              make(cpu_in.data(), out.data(), sc.data(), out_t.data(), sc_t.data(), kCpu);
          if (!Validate(cpu_op).ok()) continue;  // M or K not a multiple of 128 where needed
          SCOPED_TRACE(absl::StrCat(DTypeName(in_type), ">", DTypeName(out_type), " ", m, "x", k,
                                    " kind=", kind));
          ASSERT_TRUE(RunOp(*cpu, cpu_op, *cpu_stream, nullptr).ok());
          DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out_bytes, kPoison));
          DeviceBuffer d_sc(*gpu, std::vector<uint8_t>(s_bytes, kPoison));
          DeviceBuffer d_out_t(*gpu, std::vector<uint8_t>(out_t_bytes, kPoison));
          DeviceBuffer d_sc_t(*gpu, std::vector<uint8_t>(st_bytes, kPoison));
          const absl::Status run = RunOp(
              *gpu,
              make(d_input.data(), d_out.data(), d_sc.data(), d_out_t.data(), d_sc_t.data(), kGpu),
              *stream, nullptr);
          ASSERT_TRUE(run.ok()) << run;
          ASSERT_TRUE(gpu->Synchronize(*stream).ok());
          const std::vector<uint8_t> got = d_out.Read(out_bytes);
          size_t bad = 0;
          while (bad < out_bytes && got[bad] == out[bad]) ++bad;
          ASSERT_EQ(bad, out_bytes) << "output byte " << bad << " (row " << bad / out_stride
                                    << "): cuda " << int(got[bad]) << " cpu " << int(out[bad]);
          ASSERT_EQ(d_sc.Read(s_bytes), sc);
          if (dual) {
            const std::vector<uint8_t> got_t = d_out_t.Read(out_t_bytes);
            bad = 0;
            while (bad < out_t_bytes && got_t[bad] == out_t[bad]) ++bad;
            ASSERT_EQ(bad, out_t_bytes) << "output_t byte " << bad << ": cuda " << int(got_t[bad])
                                        << " cpu " << int(out_t[bad]);
            ASSERT_EQ(d_sc_t.Read(st_bytes), sc_t);
          }
          ++ran[kind];
        }
      }
    }
  }
  // The dual passes and 1x128 / 128x128 of Xᵀ need M (and K) multiples of 128: the aligned case.
  for (int kind = 0; kind < kKinds; ++kind) {
    EXPECT_GE(ran[kind], kind == k128x1 || kind == k128x1T ? 12 : 6) << "kind " << kind;
  }
}

// Tensors of many work items of the blockwise kernel (both the contiguous-rows path and the
// padded-rows path of 1x128), a partial last item and row tile, every output format. RandomInput
// puts a NaN or Inf in nearly every 128x128 tile, which then takes the software encode: the odd
// 128-row bands here hold none, so their tiles take the hardware conversion.
TEST(CudaConformance, QuantizeOfLargeTensorsMatchesCpuBitForBit) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(4);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(99);
  const int64_t m = 8500, k = 2048;
  int runs = 0;
  const std::pair<DType, bool> inputs[] = {
      {DType::kBF16, false}, {DType::kBF16, true}, {DType::kF32, false}, {DType::kF32, true}};
  for (const auto& [in_type, padded] : inputs) {
    const int64_t in_stride = padded ? k + 8 : k, out_stride = padded ? k + 16 : k;
    std::vector<uint8_t> input = RandomInput(in_type, m, in_stride, rng);
    FiniteOddBands(in_type, m, in_stride, input);
    DeviceBuffer d_input(*gpu, input);
    for (DType out_type : {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2}) {
      for (int variant = 0; variant < 3; ++variant) {
        const bool tile = variant == 2;
        const bool kbm = variant == 1;
        SCOPED_TRACE(absl::StrCat(DTypeName(in_type), ">", DTypeName(out_type), " variant ",
                                  variant, padded ? " padded rows" : ""));
        int64_t s_rows = tile ? (m + 127) / 128 : m, s_cols = k / 128;
        if (kbm) std::swap(s_rows, s_cols);
        std::vector<uint8_t> out(m * out_stride, kPoison);
        std::vector<uint8_t> scales(s_rows * s_cols * 4, kPoison);
        auto make = [&](void* in, void* o, void* s, DeviceLoc loc) {
          QuantizeArgs a;
          a.input = MakeTensor(in, in_type, {m, k}, in_stride, loc);
          a.output = MakeTensor(o, out_type, {m, k}, out_stride, loc);
          a.scales = MakeTensor(s, DType::kF32, {s_rows, s_cols}, s_cols, loc);
          a.granularity = tile ? QuantGranularity::k128x128 : QuantGranularity::k1x128;
          a.scale_layout = kbm ? ScaleLayout::kKBlockMajor : ScaleLayout::kRowMajor;
          return Op(a);
        };
        std::vector<uint8_t> cpu_in = input;
        const Op cpu_op = make(cpu_in.data(), out.data(), scales.data(), kCpu);
        ASSERT_TRUE(Validate(cpu_op).ok()) << Validate(cpu_op).status();
        ASSERT_TRUE(RunOp(*cpu, cpu_op, *cpu_stream, nullptr).ok());
        DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out.size(), kPoison));
        DeviceBuffer d_scales(*gpu, std::vector<uint8_t>(scales.size(), kPoison));
        const Op gpu_op = make(d_input.data(), d_out.data(), d_scales.data(), kGpu);
        ASSERT_TRUE(RunOp(*gpu, gpu_op, *stream, nullptr).ok());
        ASSERT_TRUE(gpu->Synchronize(*stream).ok());
        const std::vector<uint8_t> got_out = d_out.Read(out.size());
        size_t first_bad = 0;
        while (first_bad < out.size() && got_out[first_bad] == out[first_bad]) ++first_bad;
        ASSERT_EQ(first_bad, out.size())
            << "output byte " << first_bad << ": cuda " << int(got_out[first_bad]) << " cpu "
            << int(out[first_bad]);
        ASSERT_EQ(d_scales.Read(scales.size()), scales);
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 2 * 2 * 3 * 3);
}

struct PadCase {
  int64_t rows, cols;
  DType dtype;
  int64_t groups;
  int32_t alignment;
  bool ends_i64;
  int64_t in_pad, out_pad;
};

std::vector<int64_t> RandomEnds(int64_t rows, int64_t groups, std::mt19937_64& rng) {
  std::vector<int64_t> ends(groups);
  std::uniform_int_distribution<int64_t> cut(0, rows);
  for (int64_t g = 0; g + 1 < groups; ++g) ends[g] = cut(rng);
  std::sort(ends.begin(), ends.end() - 1);
  ends[groups - 1] = rows;
  return ends;
}

std::vector<uint8_t> EndsBytes(const std::vector<int64_t>& ends, bool i64) {
  std::vector<uint8_t> out(ends.size() * (i64 ? 8 : 4));
  for (size_t g = 0; g < ends.size(); ++g) {
    if (i64) {
      std::memcpy(&out[g * 8], &ends[g], 8);
    } else {
      const int32_t v = static_cast<int32_t>(ends[g]);
      std::memcpy(&out[g * 4], &v, 4);
    }
  }
  return out;
}

TEST(CudaConformance, PadAndUnpadMatchCpuBitForBit) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(2);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(99);
  const PadCase cases[] = {
      {1000, 256, DType::kBF16, 4, 128, false, 0, 0},
      {777, 100, DType::kBF16, 8, 16, true, 0, 2},
      {513, 7, DType::kE4M3FN, 3, 32, false, 1, 0},
      {4096, 512, DType::kF32, 33, 32, false, 4, 4},
      {3000, 64, DType::kBF16, 2500, 16, true, 0, 0},
      {64, 64, DType::kBF16, 1, 128, false, 0, 0},
      {0 + 200, 4096, DType::kBF16, 16, 128, false, 0, 0},
  };
  for (const PadCase& pc : cases) {
    const std::string what =
        absl::StrCat(pc.rows, "x", pc.cols, " ", DTypeName(pc.dtype), " groups=", pc.groups,
                     " alignment=", pc.alignment, pc.ends_i64 ? " i64" : " i32");
    SCOPED_TRACE(what);
    const size_t esize = DTypeSize(pc.dtype);
    const int64_t in_stride = pc.cols + pc.in_pad;
    const int64_t padded_rows = pc.rows + pc.groups * (pc.alignment - 1) + 3;
    const int64_t out_stride = pc.cols + pc.out_pad;
    std::vector<uint8_t> input(pc.rows * in_stride * esize);
    for (auto& b : input) b = static_cast<uint8_t>(rng());
    const std::vector<int64_t> ends = RandomEnds(pc.rows, pc.groups, rng);
    std::vector<uint8_t> ends_bytes = EndsBytes(ends, pc.ends_i64);
    const DType ends_type = pc.ends_i64 ? DType::kI64 : DType::kI32;

    std::vector<uint8_t> padded(padded_rows * out_stride * esize, kPoison);
    std::vector<uint8_t> padded_ends(pc.groups * 4, kPoison);
    auto make_pad = [&](void* in, void* e, void* o, void* pe, DeviceLoc loc) {
      PadArgs a;
      a.input = MakeTensor(in, pc.dtype, {pc.rows, pc.cols}, in_stride, loc);
      a.group_ends = MakeTensor(e, ends_type, {pc.groups}, 0, loc);
      a.output = MakeTensor(o, pc.dtype, {padded_rows, pc.cols}, out_stride, loc);
      a.padded_group_ends = MakeTensor(pe, DType::kI32, {pc.groups}, 0, loc);
      a.alignment = pc.alignment;
      return Op(a);
    };
    const Op cpu_pad =
        make_pad(input.data(), ends_bytes.data(), padded.data(), padded_ends.data(), kCpu);
    ASSERT_TRUE(Validate(cpu_pad).ok()) << Validate(cpu_pad).status();
    ASSERT_TRUE(RunOp(*cpu, cpu_pad, *cpu_stream, nullptr).ok());

    DeviceBuffer d_in(*gpu, input), d_ends(*gpu, ends_bytes);
    DeviceBuffer d_out(*gpu, std::vector<uint8_t>(padded.size(), kPoison));
    DeviceBuffer d_pe(*gpu, std::vector<uint8_t>(padded_ends.size(), kPoison));
    const Op gpu_pad = make_pad(d_in.data(), d_ends.data(), d_out.data(), d_pe.data(), kGpu);
    ASSERT_TRUE(RunOp(*gpu, gpu_pad, *stream, nullptr).ok());
    ASSERT_TRUE(gpu->Synchronize(*stream).ok());
    ASSERT_EQ(d_out.Read(padded.size()), padded);
    ASSERT_EQ(d_pe.Read(padded_ends.size()), padded_ends);

    // Unpad the CPU's padded tensor back.
    const int64_t back_stride = pc.cols + pc.in_pad;
    std::vector<uint8_t> back(pc.rows * back_stride * esize, kPoison);
    auto make_unpad = [&](void* in, void* e, void* o, DeviceLoc loc) {
      UnpadArgs a;
      a.input = MakeTensor(in, pc.dtype, {padded_rows, pc.cols}, out_stride, loc);
      a.group_ends = MakeTensor(e, ends_type, {pc.groups}, 0, loc);
      a.output = MakeTensor(o, pc.dtype, {pc.rows, pc.cols}, back_stride, loc);
      a.alignment = pc.alignment;
      return Op(a);
    };
    const Op cpu_unpad = make_unpad(padded.data(), ends_bytes.data(), back.data(), kCpu);
    ASSERT_TRUE(Validate(cpu_unpad).ok()) << Validate(cpu_unpad).status();
    ASSERT_TRUE(RunOp(*cpu, cpu_unpad, *cpu_stream, nullptr).ok());
    DeviceBuffer d_back(*gpu, std::vector<uint8_t>(back.size(), kPoison));
    const Op gpu_unpad = make_unpad(d_out.data(), d_ends.data(), d_back.data(), kGpu);
    ASSERT_TRUE(RunOp(*gpu, gpu_unpad, *stream, nullptr).ok());
    ASSERT_TRUE(gpu->Synchronize(*stream).ok());
    ASSERT_EQ(d_back.Read(back.size()), back);
  }
}

TEST(CudaConformance, RowAmaxMatchesCpuBitForBit) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(2);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(7);
  struct Case {
    int64_t rows, cols, stride;
    DType dtype;
  };
  const Case cases[] = {{1000, 4096, 4096, DType::kBF16},
                        {3, 77, 80, DType::kF32},
                        {8192, 128, 200, DType::kF16},
                        {1, 14336, 14336, DType::kBF16}};
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.rows, "x", c.cols, " ", DTypeName(c.dtype)));
    const std::vector<uint8_t> input = RandomInput(c.dtype, c.rows, c.stride, rng);
    std::vector<uint8_t> out(c.rows * 4, kPoison);
    auto make = [&](const void* in, void* o, DeviceLoc loc) {
      RowAmaxArgs a;
      a.input = MakeTensor(const_cast<void*>(in), c.dtype, {c.rows, c.cols}, c.stride, loc);
      a.output = MakeTensor(o, DType::kF32, {c.rows}, 0, loc);
      return Op(a);
    };
    const Op cpu_op = make(input.data(), out.data(), kCpu);
    ASSERT_TRUE(RunOp(*cpu, cpu_op, *cpu_stream, nullptr).ok());
    DeviceBuffer d_in(*gpu, input), d_out(*gpu, std::vector<uint8_t>(out.size(), kPoison));
    ASSERT_TRUE(RunOp(*gpu, make(d_in.data(), d_out.data(), kGpu), *stream, nullptr).ok());
    ASSERT_TRUE(gpu->Synchronize(*stream).ok());
    ASSERT_EQ(d_out.Read(out.size()), out);
  }
}

// A pad whose group ends break a rule: the op enqueues, the stream's Synchronize reports
// INVALID_ARGUMENT naming the group, no output row is written, and the stream keeps working.
struct BadEnds {
  std::vector<int64_t> ends;
  const char* expect;
};

TEST(CudaConformance, BadGroupEndsSurfaceAtSynchronizeAsInvalidArgument) {
  KD_REQUIRE_CUDA(gpu);
  auto stream = gpu->CreateStream(0).value();
  const int64_t rows = 100, cols = 64, groups = 4;
  const int64_t padded_rows = rows + groups * 15;
  const BadEnds cases[] = {
      {{10, 50, 40, 100}, "group_ends[2]=40 is less than group_ends[1]=50"},
      {{-1, 50, 60, 100}, "group_ends[0]=-1 is less than 0"},
      {{10, 50, 60, 99}, "group_ends[3]=99 must equal the row count 100"},
      {{10, 50, 60, 1000000}, "group_ends[3]=1000000 must equal the row count 100"},
  };
  std::vector<uint8_t> input(rows * cols * 2, 1);
  DeviceBuffer d_in(*gpu, input);
  DeviceBuffer d_out(*gpu, std::vector<uint8_t>(padded_rows * cols * 2, kPoison));
  DeviceBuffer d_pe(*gpu, std::vector<uint8_t>(groups * 4, kPoison));
  for (const BadEnds& bad : cases) {
    SCOPED_TRACE(bad.expect);
    DeviceBuffer d_ends(*gpu, EndsBytes(bad.ends, true));
    PadArgs a;
    a.input = MakeTensor(d_in.data(), DType::kBF16, {rows, cols}, cols, kGpu);
    a.group_ends = MakeTensor(d_ends.data(), DType::kI64, {groups}, 0, kGpu);
    a.output = MakeTensor(d_out.data(), DType::kBF16, {padded_rows, cols}, cols, kGpu);
    a.padded_group_ends = MakeTensor(d_pe.data(), DType::kI32, {groups}, 0, kGpu);
    a.alignment = 16;
    ASSERT_TRUE(RunOp(*gpu, a, *stream, nullptr).ok());
    const absl::Status status = gpu->Synchronize(*stream);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(bad.expect), absl::string_view::npos) << status;
    EXPECT_EQ(d_out.Read(padded_rows * cols * 2),
              std::vector<uint8_t>(padded_rows * cols * 2, kPoison));
    EXPECT_EQ(d_pe.Read(groups * 4), std::vector<uint8_t>(groups * 4, kPoison));
    EXPECT_TRUE(gpu->Synchronize(*stream).ok()) << "the record is cleared once reported";
  }
  // Unpad: the padded layout these ends need (4 groups of 128) does not fit the input rows.
  DeviceBuffer d_ends(*gpu, EndsBytes({10, 20, 30, 40}, false));
  DeviceBuffer d_small(*gpu, std::vector<uint8_t>(100 * cols * 2, 3));
  DeviceBuffer d_back(*gpu, std::vector<uint8_t>(40 * cols * 2, kPoison));
  UnpadArgs u;
  u.input = MakeTensor(d_small.data(), DType::kBF16, {100, cols}, cols, kGpu);
  u.group_ends = MakeTensor(d_ends.data(), DType::kI32, {groups}, 0, kGpu);
  u.output = MakeTensor(d_back.data(), DType::kBF16, {40, cols}, cols, kGpu);
  u.alignment = 128;
  ASSERT_TRUE(RunOp(*gpu, u, *stream, nullptr).ok());
  const absl::Status status = gpu->Synchronize(*stream);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("less than the padded row count 512"), absl::string_view::npos)
      << status;
  EXPECT_EQ(d_back.Read(40 * cols * 2), std::vector<uint8_t>(40 * cols * 2, kPoison));

  // The stream still runs a good op.
  u.alignment = 16;  // 4 groups of 16 rows: 64 <= 100
  ASSERT_TRUE(RunOp(*gpu, u, *stream, nullptr).ok());
  EXPECT_TRUE(gpu->Synchronize(*stream).ok());
  EXPECT_TRUE(gpu->Healthy());
}

// A pad's device-side verdict belongs to the group of ops it ran in: CloseChecks hands it to
// that group's callback, and a later group on the same stream (another session's request in the
// daemon) synchronizes clean. Within a group of several ops the failing op is named.
TEST(CudaConformance, DeviceCheckFailureIsReportedToTheGroupThatRanIt) {
  KD_REQUIRE_CUDA(gpu);
  auto stream = gpu->CreateStream(0).value();
  const int64_t rows = 100, cols = 64, groups = 4;
  const int64_t padded_rows = rows + groups * 15;
  DeviceBuffer d_in(*gpu, std::vector<uint8_t>(rows * cols * 2, 1));
  DeviceBuffer d_out(*gpu, std::vector<uint8_t>(padded_rows * cols * 2, kPoison));
  DeviceBuffer d_pe(*gpu, std::vector<uint8_t>(groups * 4, kPoison));
  DeviceBuffer d_bad(*gpu, EndsBytes({10, 50, 40, 100}, true));
  DeviceBuffer d_good(*gpu, EndsBytes({10, 50, 60, 100}, true));
  auto pad_with = [&](const DeviceBuffer& ends) {
    PadArgs a;
    a.input = MakeTensor(d_in.data(), DType::kBF16, {rows, cols}, cols, kGpu);
    a.group_ends = MakeTensor(ends.data(), DType::kI64, {groups}, 0, kGpu);
    a.output = MakeTensor(d_out.data(), DType::kBF16, {padded_rows, cols}, cols, kGpu);
    a.padded_group_ends = MakeTensor(d_pe.data(), DType::kI32, {groups}, 0, kGpu);
    a.alignment = 16;
    return a;
  };

  // An empty group: the callback runs at once with OK.
  bool empty_called = false;
  gpu->CloseChecks(*stream, [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    empty_called = true;
  });
  EXPECT_TRUE(empty_called);

  std::promise<absl::Status> verdict;
  ASSERT_TRUE(RunOp(*gpu, pad_with(d_bad), *stream, nullptr).ok());
  gpu->CloseChecks(*stream, [&](absl::Status s) { verdict.set_value(std::move(s)); });
  ASSERT_TRUE(RunOp(*gpu, pad_with(d_good), *stream, nullptr).ok());
  EXPECT_TRUE(gpu->Synchronize(*stream).ok()) << "the earlier group's failure is not ours";
  std::future<absl::Status> f = verdict.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const absl::Status s = f.get();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("pad: group_ends[2]=40 is less than group_ends[1]=50"),
            absl::string_view::npos)
      << s;

  ASSERT_TRUE(RunOp(*gpu, pad_with(d_good), *stream, nullptr).ok());
  ASSERT_TRUE(RunOp(*gpu, pad_with(d_bad), *stream, nullptr).ok());
  const absl::Status two = gpu->Synchronize(*stream);
  EXPECT_EQ(two.code(), absl::StatusCode::kInvalidArgument) << two;
  EXPECT_EQ(two.message().rfind("ops[1].pad: group_ends[2]=40", 0), 0u) << two;
  EXPECT_TRUE(gpu->Synchronize(*stream).ok());
}

}  // namespace
}  // namespace kd
