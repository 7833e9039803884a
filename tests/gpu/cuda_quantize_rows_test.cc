// The row- and column-wise quantizers of the CUDA backend (kernels/gpu/quantize_rowcol.cu:
// per_row, per_tensor and mx1x32 of Y = X and of Y = Xᵀ, jagged_rowwise, jagged_colwise) against
// the CPU backend, bit for bit: ragged shapes (M not a multiple of 128, K as small as the recipe
// allows, rows longer than one CTA holds), strided and unaligned rows, every input and output type,
// rows with NaN, Inf, zeros, subnormals and values near the input type's maximum, and jagged group
// ends with empty groups (i32 and i64, contiguous and strided). Outputs start from the same poison
// on both backends, and the input's row padding holds NaN, so an element written by one backend
// only, or a read past K, shows.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
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

// Which special rows an input may hold: none (but zeros, subnormals and large values), Inf
// rows too, or NaN and Inf rows.
enum class Specials { kNone, kInf, kNanAndInf };

struct Layout {
  int exp_bits, man_bits;
};
Layout LayoutOf(DType d) {
  if (d == DType::kF32) return {8, 23};
  if (d == DType::kBF16) return {8, 7};
  return {5, 10};  // f16
}

// rows x stride elements of `dtype`; columns k..stride-1 hold NaN.
std::vector<uint8_t> RowInput(DType dtype, int64_t rows, int64_t k, int64_t stride,
                              Specials specials, std::mt19937_64& rng) {
  const Layout f = LayoutOf(dtype);
  const size_t size = DTypeSize(dtype);
  const uint32_t max_exp = (1u << f.exp_bits) - 1, bias = max_exp / 2;
  const uint32_t man_mask = (1u << f.man_bits) - 1, quiet = 1u << (f.man_bits - 1);
  auto bits = [&](uint32_t sign, uint32_t exp, uint32_t man) {
    return (sign << (f.exp_bits + f.man_bits)) | (exp << f.man_bits) | (man & man_mask);
  };
  std::vector<uint8_t> out(rows * stride * size);
  auto put = [&](int64_t r, int64_t c, uint32_t v) {
    std::memcpy(&out[(r * stride + c) * size], &v, size);
  };
  std::uniform_int_distribution<uint64_t> u;
  for (int64_t r = 0; r < rows; ++r) {
    // 0-5: normal; 6: zeros; 7: negative zeros; 8: subnormal; 9: large; 10: Inf; 11: NaN.
    int kind = static_cast<int>(u(rng) % 12);
    if (kind == 11 && specials != Specials::kNanAndInf) kind = 0;
    if (kind == 10 && specials == Specials::kNone) kind = 1;
    const int spread = static_cast<int>(bias / 4);
    const int center =
        static_cast<int>(bias) + static_cast<int>(u(rng) % (2 * spread + 1)) - spread;
    const int64_t special_col = static_cast<int64_t>(u(rng) % k);
    for (int64_t c = 0; c < stride; ++c) {
      const uint64_t x = u(rng);
      const uint32_t sign = x & 1, man = static_cast<uint32_t>(x >> 8);
      const int drop = static_cast<int>((x >> 1) % 8);
      uint32_t v =
          bits(sign, static_cast<uint32_t>(std::clamp(center - drop, 1, int(max_exp) - 1)), man);
      if (kind == 6 || (kind < 6 && (c / 32) % 16 == 7 && x % 4 == 0)) v = 0;  // zero rows, blocks
      if (kind == 7) v = bits(1, 0, 0);
      if (kind == 8) v = bits(sign, 0, man | 1);
      if (kind == 9) v = bits(sign, max_exp - 1 - (drop % 2), man);
      if (kind == 10 && c == special_col) v = bits(sign, max_exp, 0);
      if (kind == 11 && c == special_col) v = bits(sign, max_exp, quiet | man);
      if (c >= k) v = bits(0, max_exp, quiet);  // row padding: never read
      put(r, c, v);
    }
  }
  return out;
}

// Group ends over `rows` rows, with empty groups (the first, one in the middle and the last when
// there are enough groups), as `stride`-strided i32 or i64 elements (gaps hold -7).
std::vector<uint8_t> GroupEnds(int64_t rows, int64_t groups, bool i64, int64_t stride,
                               std::mt19937_64& rng) {
  std::vector<int64_t> ends(groups);
  std::uniform_int_distribution<int64_t> cut(0, rows);
  for (auto& e : ends) e = cut(rng);
  std::sort(ends.begin(), ends.end());
  ends[groups - 1] = rows;
  if (groups >= 4) {
    ends[0] = 0;
    ends[2] = ends[1];
    ends[groups - 2] = rows;
  }
  const size_t size = i64 ? 8 : 4;
  std::vector<uint8_t> out(groups * stride * size);
  for (int64_t i = 0; i < groups * stride; ++i) {
    const int64_t v = i % stride == 0 ? ends[i / stride] : -7;
    const int32_t v32 = static_cast<int32_t>(v);
    std::memcpy(&out[i * size], i64 ? static_cast<const void*>(&v) : &v32, size);
  }
  return out;
}

size_t FirstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

struct Shape {
  int64_t m, k, in_pad, out_pad, scale_pad;
};

enum Kind {
  kPerRow,
  kPerTensor,
  kMx,
  kJaggedRowwise,
  kJaggedColwise,
  kPerRowT,
  kPerTensorT,
  kMxT,
  kKinds
};

TEST(CudaRowQuantize, EveryRowwiseGranularityMatchesCpuBitForBit) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(4);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(4242);
  // K=40064: a per_row row longer than one CTA holds (512 threads x 4 chunks); in_pad=1: rows
  // not 16-byte aligned; K=100: chunks of 8 cut by the row end (per_row and per_tensor only).
  // M=416, 2048: mx1x32 of Xᵀ (M a multiple of 32), several column strips and row tiles.
  const Shape shapes[] = {{300, 384, 0, 0, 0},  {257, 7168, 8, 16, 3}, {1, 128, 0, 0, 0},
                          {130, 256, 1, 3, 1},  {5, 40064, 0, 0, 2},   {77, 100, 0, 0, 0},
                          {3, 96, 0, 5, 0},     {1000, 1024, 0, 0, 0}, {416, 200, 1, 3, 1},
                          {2048, 136, 0, 16, 0}};
  const DType inputs[] = {DType::kBF16, DType::kF16, DType::kF32};
  const DType outputs[] = {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2};
  int ran[kKinds] = {};
  int rotation = 0;
  for (const Shape& sh : shapes) {
    const int64_t m = sh.m, k = sh.k, in_stride = k + sh.in_pad;
    for (DType in_type : inputs) {
      std::vector<uint8_t> input[3];
      std::unique_ptr<DeviceBuffer> d_input[3];
      for (int s = 0; s < 3; ++s) {
        input[s] = RowInput(in_type, m, k, in_stride, static_cast<Specials>(s), rng);
        d_input[s] = std::make_unique<DeviceBuffer>(*gpu, input[s]);
      }
      for (DType out_type : outputs) {
        for (int kind = 0; kind < kKinds; ++kind) {
          ++rotation;
          // The options rotate over the combinations: pow2 scales or RCEIL, k-block-major
          // scales, i64 or strided ends, and (per_tensor) which specials the input holds.
          const bool option = rotation % 2 == 1;
          const bool kbm = (rotation / 2) % 2 == 1;
          const int flavor = kind == kPerTensor || kind == kPerTensorT ? rotation % 3 : 2;
          QuantizeArgs a;
          const bool t =
              kind == kJaggedColwise || kind == kPerRowT || kind == kPerTensorT || kind == kMxT;
          const int64_t rows = t ? k : m, cols = t ? m : k;
          const int64_t out_stride = cols + sh.out_pad;
          a.transpose_output = t;
          std::vector<int64_t> s_shape;
          DType s_type = DType::kF32;
          // 1, 5 or 9 groups; jagged_rowwise sometimes 1500 (its separate check kernel).
          const int64_t groups = kind == kJaggedRowwise && rotation % 7 == 3
                                     ? 1500
                                     : 1 + static_cast<int64_t>(rotation % 3) * 4;
          switch (kind) {
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
            case kMx:
            case kMxT:
              a.granularity = QuantGranularity::kMx1x32;
              s_shape = {rows, cols / 32};
              s_type = DType::kU8;
              break;
            case kJaggedRowwise:
              a.granularity = QuantGranularity::kJaggedRowwise;
              s_shape = {rows, cols / 128};
              if (kbm) {
                s_shape = {cols / 128, rows};
                a.scale_layout = ScaleLayout::kKBlockMajor;
              }
              break;
            default:
              a.granularity = QuantGranularity::kJaggedColwise;
              s_shape = {groups, k};
              break;
          }
          if (kind == kMx || kind == kMxT) {
            a.mx_rounding = option ? MxRounding::kRceil : MxRounding::kFloor;
          } else {
            a.scale_format = option ? ScaleFormat::kPow2 : ScaleFormat::kFp32;
          }
          const bool jagged = kind == kJaggedRowwise || kind == kJaggedColwise;
          const bool ends_i64 = (rotation / 4) % 2 == 1;
          const int64_t ends_stride = 1 + (rotation / 8) % 2;
          const std::vector<uint8_t> ends =
              jagged ? GroupEnds(m, groups, ends_i64, ends_stride, rng) : std::vector<uint8_t>();
          const int64_t s_stride = s_shape.size() == 2 ? s_shape[1] + sh.scale_pad : 1;
          const size_t s_bytes = s_shape[0] * s_stride * DTypeSize(s_type);
          const size_t out_bytes = rows * out_stride;
          auto make = [&](void* in, void* o, void* sc, void* e, DeviceLoc loc) {
            QuantizeArgs b = a;
            b.input = MakeTensor(in, in_type, {m, k}, in_stride, loc);
            b.output = MakeTensor(o, out_type, {rows, cols}, out_stride, loc);
            b.scales = MakeTensor(sc, s_type, s_shape, s_stride, loc);
            if (jagged) {
              b.group_ends = MakeTensor(e, ends_i64 ? DType::kI64 : DType::kI32, {groups}, 0, loc);
              b.group_ends.strides[0] = ends_stride;
            }
            return Op(b);
          };
          std::vector<uint8_t> cpu_in = input[flavor], cpu_ends = ends;
          std::vector<uint8_t> out(out_bytes, kPoison), sc(s_bytes, kPoison);
          const Op cpu_op = make(cpu_in.data(), out.data(), sc.data(), cpu_ends.data(), kCpu);
          if (!Validate(cpu_op).ok()) continue;  // mx with e4m3fnuz, K off the block
          const std::string what =
              absl::StrCat(DTypeName(in_type), ">", DTypeName(out_type), " ", m, "x", k,
                           " in_pad=", sh.in_pad, " ", GranularityName(a.granularity),
                           t ? " of Xᵀ" : "", " option=", option, " kbm=", kbm, " flavor=", flavor,
                           jagged ? absl::StrCat(" groups=", groups, " i64=", ends_i64,
                                                 " ends_stride=", ends_stride)
                                  : "");
          SCOPED_TRACE(what);
          const absl::Status cpu_run = RunOp(*cpu, cpu_op, *cpu_stream, nullptr);
          ASSERT_TRUE(cpu_run.ok()) << cpu_run;
          DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out_bytes, kPoison));
          DeviceBuffer d_sc(*gpu, std::vector<uint8_t>(s_bytes, kPoison));
          DeviceBuffer d_ends(*gpu, ends);
          const Op gpu_op =
              make(d_input[flavor]->data(), d_out.data(), d_sc.data(), d_ends.data(), kGpu);
          ASSERT_TRUE(SupportsOp(*gpu, gpu_op).ok()) << SupportsOp(*gpu, gpu_op);
          const absl::Status run = RunOp(*gpu, gpu_op, *stream, nullptr);
          ASSERT_TRUE(run.ok()) << run;
          const absl::Status synced = gpu->Synchronize(*stream);
          ASSERT_TRUE(synced.ok()) << synced;
          const std::vector<uint8_t> got = d_out.Read();
          const size_t bad = FirstDifference(got, out);
          ASSERT_EQ(bad, out_bytes)
              << "output byte " << bad << " (row " << bad / out_stride << ", column "
              << bad % out_stride << "): cuda " << int(got[bad]) << " cpu " << int(out[bad]);
          const std::vector<uint8_t> got_sc = d_sc.Read();
          const size_t bad_sc = FirstDifference(got_sc, sc);
          ASSERT_EQ(bad_sc, s_bytes) << "scales byte " << bad_sc;
          ++ran[kind];
        }
      }
    }
  }
  for (int kind = 0; kind < kKinds; ++kind) EXPECT_GE(ran[kind], 12) << "kind " << kind;
}

// jagged_colwise and per_row of Xᵀ with skewed groups and tall inputs, bit for bit against the
// CPU backend: one group of every row with empty groups around it, one huge group between
// one-row groups, hundreds of tiny and empty groups (several per 128-row encode tile, NaN and
// Inf rows), X of 33000 and 40000 rows (a group spanning hundreds of encode tiles and amax
// CTAs), groups taller than a strip CTA holds in shared memory with starts off a multiple of 16
// rows, in bf16, f16 and f32, with strided and unaligned rows; groups of 9000 to 32768 rows
// (above the strip kernel's 8192) at the tallest benchmark shape's row count (32768), 64 groups
// over 16448 rows, and K not a multiple of the 64-column encode tile.
TEST(CudaRowQuantize, ColumnScalesMatchCpuWithSkewedGroupsAndTallInputs) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(4);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(31337);
  std::vector<int64_t> tiny;  // 300 groups over 3000 rows, runs of empty groups
  for (int64_t g = 0; g < 300; ++g) tiny.push_back(static_cast<int64_t>(rng() % 3001));
  std::sort(tiny.begin(), tiny.end());
  tiny[0] = tiny[1] = 0;
  tiny[150] = tiny[151] = tiny[152];
  tiny.back() = 3000;
  std::vector<int64_t> many;  // 64 groups over 16448 rows
  for (int64_t g = 0; g < 64; ++g) many.push_back(static_cast<int64_t>(rng() % 16449));
  std::sort(many.begin(), many.end());
  many[10] = many[11];
  many[62] = many[63] = 16448;
  struct Case {
    int64_t m, k, in_pad;
    DType in, out;
    std::vector<int64_t> ends;  // empty: per_row of Xᵀ
    Specials specials;
    const char* what;
  };
  const Case cases[] = {
      {4096,
       384,
       0,
       DType::kBF16,
       DType::kE4M3FN,
       {0, 0, 4096, 4096, 4096},
       Specials::kNone,
       "one group of every row"},
      {4096,
       384,
       1,
       DType::kF32,
       DType::kE5M2,
       {1, 2, 3, 4090, 4090, 4096},
       Specials::kNone,
       "one huge group between one-row groups"},
      {3000, 200, 0, DType::kF16, DType::kE4M3FNUZ, tiny, Specials::kNanAndInf,
       "300 tiny and empty groups"},
      {130, 7168, 8, DType::kBF16, DType::kE4M3FN, {0, 65, 130}, Specials::kInf, "wide K"},
      {33000,
       136,
       0,
       DType::kBF16,
       DType::kE4M3FN,
       {100, 20000, 20000, 33000},
       Specials::kNone,
       "33000 rows"},
      {33000,
       136,
       0,
       DType::kF32,
       DType::kE4M3FN,
       {},
       Specials::kNone,
       "per_row of Xt, 33000 rows"},
      {40000,
       72,
       0,
       DType::kBF16,
       DType::kE4M3FN,
       {5000, 5000, 40000},
       Specials::kNone,
       "40000 rows"},
      {40000, 72, 3, DType::kF16, DType::kE5M2, {}, Specials::kNone, "per_row of Xt, 40000 rows"},
      {8192,
       4096,
       0,
       DType::kBF16,
       DType::kE4M3FN,
       {0, 700, 700, 1703, 5000, 5001, 8192, 8192},
       Specials::kNone,
       "groups taller than a strip CTA holds, starts off 16 rows"},
      {5000,
       4096,
       8,
       DType::kBF16,
       DType::kE5M2,
       {},
       Specials::kNanAndInf,
       "per_row of Xt, bf16, pieces, NaN and Inf rows"},
      {32768,
       264,
       0,
       DType::kBF16,
       DType::kE4M3FN,
       {0, 9000, 9000, 20001, 32768},
       Specials::kNanAndInf,
       "groups over 8192 rows, 32768 rows"},
      {32768, 136, 8, DType::kF16, DType::kE5M2, {}, Specials::kInf, "per_row of Xt, 32768 rows"},
      {16448, 200, 0, DType::kBF16, DType::kE4M3FNUZ, many, Specials::kNanAndInf,
       "64 groups over 16448 rows"},
      {10000,
       4096,
       0,
       DType::kBF16,
       DType::kE4M3FN,
       {9000, 10000, 10000},
       Specials::kNone,
       "a group of 9000 rows"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(
        absl::StrCat(c.what, ": ", DTypeName(c.in), ">", DTypeName(c.out), " ", c.m, "x", c.k));
    const bool per_row = c.ends.empty();
    const int64_t groups = static_cast<int64_t>(c.ends.size());
    const int64_t in_stride = c.k + c.in_pad;
    const std::vector<uint8_t> input = RowInput(c.in, c.m, c.k, in_stride, c.specials, rng);
    const std::vector<int64_t> s_shape =
        per_row ? std::vector<int64_t>{c.k, 1} : std::vector<int64_t>{groups, c.k};
    const size_t s_bytes = s_shape[0] * s_shape[1] * 4;
    const size_t out_bytes = c.k * c.m;
    std::vector<uint8_t> ends(groups * 8);
    std::memcpy(ends.data(), c.ends.data(), ends.size());
    auto make = [&](const void* in, void* o, void* sc, void* e, DeviceLoc loc) {
      QuantizeArgs a;
      a.input = MakeTensor(const_cast<void*>(in), c.in, {c.m, c.k}, in_stride, loc);
      a.output = MakeTensor(o, c.out, {c.k, c.m}, c.m, loc);
      a.scales = MakeTensor(sc, DType::kF32, s_shape, s_shape[1], loc);
      a.transpose_output = true;
      if (per_row) {
        a.granularity = QuantGranularity::kPerRow;
      } else {
        a.granularity = QuantGranularity::kJaggedColwise;
        a.group_ends = MakeTensor(e, DType::kI64, {groups}, 0, loc);
      }
      return Op(a);
    };
    std::vector<uint8_t> out(out_bytes, kPoison), sc(s_bytes, kPoison);
    const absl::Status cpu_run = RunOp(
        *cpu, make(input.data(), out.data(), sc.data(), ends.data(), kCpu), *cpu_stream, nullptr);
    ASSERT_TRUE(cpu_run.ok()) << cpu_run;
    DeviceBuffer d_in(*gpu, input);
    DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out_bytes, kPoison));
    DeviceBuffer d_sc(*gpu, std::vector<uint8_t>(s_bytes, kPoison));
    DeviceBuffer d_ends(*gpu, per_row ? std::vector<uint8_t>(8, 0) : ends);
    const absl::Status run = RunOp(
        *gpu, make(d_in.data(), d_out.data(), d_sc.data(), d_ends.data(), kGpu), *stream, nullptr);
    ASSERT_TRUE(run.ok()) << run;
    const absl::Status synced = gpu->Synchronize(*stream);
    ASSERT_TRUE(synced.ok()) << synced;
    const std::vector<uint8_t> got = d_out.Read();
    const size_t bad = FirstDifference(got, out);
    ASSERT_EQ(bad, out_bytes) << "output byte " << bad << " (row " << bad / c.m << ", column "
                              << bad % c.m << "): cuda " << int(got[bad]) << " cpu "
                              << int(out[bad]);
    const std::vector<uint8_t> got_sc = d_sc.Read();
    const size_t bad_sc = FirstDifference(got_sc, sc);
    ASSERT_EQ(bad_sc, s_bytes) << "scales byte " << bad_sc;
  }
  EXPECT_TRUE(gpu->Healthy());
}

// mx1x32 of Xᵀ on the tiled two-byte kernel, bit for bit against the CPU backend: M past 16384
// (the grouped tile order, a last group of 2 column tiles), partial row and column tiles,
// strided input rows, output and scale rows not 4- or 16-byte aligned, NaN and Inf rows, both
// roundings, e4m3fn and e5m2.
TEST(CudaRowQuantize, Mx1x32OfXtOnTilesMatchesCpuBitForBit) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(4);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(777);
  const Shape shapes[] = {
      {16416, 648, 0, 0, 0}, {4160, 1024, 8, 16, 0}, {288, 136, 0, 4, 1}, {32, 8, 0, 0, 0}};
  int rotation = 0;
  for (const Shape& sh : shapes) {
    for (DType in_type : {DType::kBF16, DType::kF16}) {
      const int64_t m = sh.m, k = sh.k, in_stride = k + sh.in_pad;
      const Specials specials = static_cast<Specials>(rotation % 3);
      const std::vector<uint8_t> input = RowInput(in_type, m, k, in_stride, specials, rng);
      DeviceBuffer d_in(*gpu, input);
      for (DType out_type : {DType::kE4M3FN, DType::kE5M2}) {
        ++rotation;
        QuantizeArgs a;
        a.granularity = QuantGranularity::kMx1x32;
        a.transpose_output = true;
        a.mx_rounding = rotation % 2 == 1 ? MxRounding::kRceil : MxRounding::kFloor;
        const int64_t out_stride = m + sh.out_pad, s_stride = m / 32 + sh.scale_pad;
        const size_t out_bytes = k * out_stride, s_bytes = k * s_stride;
        SCOPED_TRACE(absl::StrCat(DTypeName(in_type), ">", DTypeName(out_type), " ", m, "x", k,
                                  " in_pad=", sh.in_pad, " out_pad=", sh.out_pad,
                                  " rceil=", rotation % 2, " specials=", rotation % 3));
        auto make = [&](const void* in, void* o, void* sc, DeviceLoc loc) {
          QuantizeArgs b = a;
          b.input = MakeTensor(const_cast<void*>(in), in_type, {m, k}, in_stride, loc);
          b.output = MakeTensor(o, out_type, {k, m}, out_stride, loc);
          b.scales = MakeTensor(sc, DType::kU8, {k, m / 32}, s_stride, loc);
          return Op(b);
        };
        std::vector<uint8_t> out(out_bytes, kPoison), sc(s_bytes, kPoison);
        const absl::Status cpu_run =
            RunOp(*cpu, make(input.data(), out.data(), sc.data(), kCpu), *cpu_stream, nullptr);
        ASSERT_TRUE(cpu_run.ok()) << cpu_run;
        DeviceBuffer d_out(*gpu, std::vector<uint8_t>(out_bytes, kPoison));
        DeviceBuffer d_sc(*gpu, std::vector<uint8_t>(s_bytes, kPoison));
        const absl::Status run =
            RunOp(*gpu, make(d_in.data(), d_out.data(), d_sc.data(), kGpu), *stream, nullptr);
        ASSERT_TRUE(run.ok()) << run;
        const absl::Status synced = gpu->Synchronize(*stream);
        ASSERT_TRUE(synced.ok()) << synced;
        const std::vector<uint8_t> got = d_out.Read();
        const size_t bad = FirstDifference(got, out);
        ASSERT_EQ(bad, out_bytes) << "output byte " << bad << " (row " << bad / out_stride
                                  << ", column " << bad % out_stride << "): cuda " << int(got[bad])
                                  << " cpu " << int(out[bad]);
        const std::vector<uint8_t> got_sc = d_sc.Read();
        const size_t bad_sc = FirstDifference(got_sc, sc);
        ASSERT_EQ(bad_sc, s_bytes)
            << "scales byte " << bad_sc << " (row " << bad_sc / s_stride << "): cuda "
            << int(got_sc[bad_sc]) << " cpu " << int(sc[bad_sc]);
      }
    }
  }
  EXPECT_TRUE(gpu->Healthy());
}

// Bad group ends: the CPU backend fails the op with INVALID_ARGUMENT; the CUDA backend enqueues
// it, and the stream's Synchronize reports the same violation for "quantize", with no output or
// scale written; the stream then runs the next op cleanly.
TEST(CudaRowQuantize, BadGroupEndsFailLikeTheCpuAndWriteNothing) {
  KD_REQUIRE_CUDA(gpu);
  auto cpu = CreateCpuBackend(2);
  auto cpu_stream = cpu->CreateStream(0).value();
  auto stream = gpu->CreateStream(0).value();
  std::mt19937_64 rng(7);
  const int64_t m = 100, k = 256;
  const std::vector<uint8_t> input = RowInput(DType::kBF16, m, k, k, Specials::kNone, rng);
  DeviceBuffer d_in(*gpu, input);
  struct Bad {
    std::vector<int64_t> ends;
    const char* expect;
  };
  const Bad cases[] = {
      {{10, 50, 40, 100}, "group_ends[2]=40 is less than group_ends[1]=50"},
      {{-1, 50, 60, 100}, "group_ends[0]=-1 is less than 0"},
      {{10, 50, 60, 99}, "group_ends[3]=99 must equal the row count 100"},
      {{10, 50, 60, 1000000}, "group_ends[3]=1000000 must equal the row count 100"},
      {{0, 0, 0, 0}, "group_ends[3]=0 must equal the row count 100"},
      {{}, "group_ends[1500]=73 is less than group_ends[1499]=74"},  // many groups, below
  };
  // 2000 groups (more than a jagged_rowwise CTA checks itself), decreasing at group 1500.
  std::vector<int64_t> many(2000);
  for (int64_t g = 0; g < 2000; ++g) many[g] = g * m / 2000;
  many[1500] = many[1499] - 1;
  many.back() = m;
  for (bool colwise : {false, true}) {
    const int64_t rows = colwise ? k : m, cols = colwise ? m : k;
    for (const Bad& bad : cases) {
      SCOPED_TRACE(absl::StrCat(colwise ? "jagged_colwise: " : "jagged_rowwise: ", bad.expect));
      const std::vector<int64_t>& bad_ends = bad.ends.empty() ? many : bad.ends;
      const int64_t groups = static_cast<int64_t>(bad_ends.size());
      const std::vector<int64_t> s_shape =
          colwise ? std::vector<int64_t>{groups, k} : std::vector<int64_t>{m, k / 128};
      const size_t s_bytes = s_shape[0] * s_shape[1] * 4;
      std::vector<uint8_t> ends(groups * 8);
      std::memcpy(ends.data(), bad_ends.data(), ends.size());
      auto make = [&](const void* in, void* o, void* sc, void* e, DeviceLoc loc) {
        QuantizeArgs a;
        a.input = MakeTensor(const_cast<void*>(in), DType::kBF16, {m, k}, k, loc);
        a.output = MakeTensor(o, DType::kE4M3FN, {rows, cols}, cols, loc);
        a.scales = MakeTensor(sc, DType::kF32, s_shape, s_shape[1], loc);
        a.group_ends = MakeTensor(e, DType::kI64, {groups}, 0, loc);
        a.granularity =
            colwise ? QuantGranularity::kJaggedColwise : QuantGranularity::kJaggedRowwise;
        a.transpose_output = colwise;
        return Op(a);
      };
      std::vector<uint8_t> out(rows * cols, kPoison), sc(s_bytes, kPoison);
      const absl::Status cpu_status = RunOp(
          *cpu, make(input.data(), out.data(), sc.data(), ends.data(), kCpu), *cpu_stream, nullptr);
      EXPECT_EQ(cpu_status.code(), absl::StatusCode::kInvalidArgument) << cpu_status;
      EXPECT_NE(cpu_status.message().find(bad.expect), absl::string_view::npos) << cpu_status;

      DeviceBuffer d_out(*gpu, std::vector<uint8_t>(rows * cols, kPoison));
      DeviceBuffer d_sc(*gpu, std::vector<uint8_t>(s_bytes, kPoison));
      DeviceBuffer d_ends(*gpu, ends);
      ASSERT_TRUE(RunOp(*gpu, make(d_in.data(), d_out.data(), d_sc.data(), d_ends.data(), kGpu),
                        *stream, nullptr)
                      .ok());
      const absl::Status status = gpu->Synchronize(*stream);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
      EXPECT_NE(status.message().find(absl::StrCat("quantize: ", bad.expect)),
                absl::string_view::npos)
          << status;
      EXPECT_EQ(d_out.Read(), out) << "no output byte is written";
      EXPECT_EQ(d_sc.Read(), sc) << "no scale is written";
      EXPECT_TRUE(gpu->Synchronize(*stream).ok()) << "the record is cleared once reported";
    }
  }
  EXPECT_TRUE(gpu->Healthy());
}

}  // namespace
}  // namespace kd
