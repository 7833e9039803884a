// A complete kerneld client: quantize → gemm → pad (and back) against a running daemon, with
// every result checked against a plain reference computed here.
//
//   terminal 1:  build/server/kerneld --socket=/tmp/kerneld.sock --backend=cpu
//                    --admin_socket=/tmp/admin.sock --metrics_address=127.0.0.1:9464
//   terminal 2:  build/client/kerneld_example --socket=/tmp/kerneld.sock
//
// Steps: open a session; create POSIX shm buffers and register them; quantize activations X
// (8x128 bf16, 1x128 blocks) and a weight W (128x128 bf16, one 128x128 block) to e4m3fn; run the
// NT GEMM D = X·Wᵀ with bf16 output; pad D's rows, split into token groups, to a multiple of 16
// rows per group in a buffer the daemon allocates; unpad it back; and run the first two steps
// again as one Submit batch, and that batch once more through a submit ring. Exit code 0 when
// every check passes, 1 otherwise.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kerneld/client/client.h"
#include "kerneld/client/shm_buffer.h"
#include "kerneld/client/tensor_ref.h"

ABSL_FLAG(std::string, socket, "",
          "kerneld's data socket (default: $KERNELD_SOCKET, else /run/kerneld/kerneld.sock)");

namespace {

namespace v1 = ::kerneld::v1;
using kd::client::Client;
using kd::client::ShmBuffer;

constexpr int64_t kTokens = 8;    // M: rows of X
constexpr int64_t kHidden = 128;  // K
constexpr int64_t kOut = 128;     // N: rows of W
constexpr int32_t kAlignment = 16;
constexpr float kE4m3Max = 448.0f;
constexpr float kEps = 1e-12f;  // the default amax floor (QuantizeOp.eps = 0)

// ----- plain reference arithmetic, independent of the daemon's code ------------------------

uint16_t FloatToBf16(float f) {  // round to nearest even; inputs here are finite
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no Inf; 0x7f/0xff are NaN.
double DecodeE4m3fn(uint8_t code) {
  const int exponent = (code >> 3) & 0xF, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return (code & 0x80) ? -magnitude : magnitude;
}

// The e4m3fn code nearest to v (ties to the even code), saturating at ±448: found by searching
// all 127 finite magnitudes, which is slow but obviously right.
uint8_t EncodeE4m3fnReference(float v) {
  const double target = std::min<double>(std::fabs(v), kE4m3Max);
  uint8_t best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int code = 0; code <= 0x7E; ++code) {
    const double distance = std::fabs(DecodeE4m3fn(static_cast<uint8_t>(code)) - target);
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best = static_cast<uint8_t>(code);
      best_distance = distance;
    }
  }
  return std::signbit(v) ? static_cast<uint8_t>(best | 0x80) : best;
}

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // the stored (dequantizing) scales
};

// Blockwise quantization of a rows x cols matrix with blocks of block_rows x block_cols:
// scale = 448 / max(amax, eps), code = round(x * scale), stored scale = 1 / scale.
Quantized QuantizeReference(const std::vector<float>& x, int64_t rows, int64_t cols,
                            int64_t block_rows, int64_t block_cols) {
  Quantized q;
  q.codes.resize(rows * cols);
  for (int64_t br = 0; br < rows; br += block_rows) {
    for (int64_t bc = 0; bc < cols; bc += block_cols) {
      float amax = 0;
      for (int64_t r = br; r < br + block_rows; ++r) {
        for (int64_t c = bc; c < bc + block_cols; ++c)
          amax = std::max(amax, std::fabs(x[r * cols + c]));
      }
      const float scale = kE4m3Max / std::max(amax, kEps);
      q.scales.push_back(1.0f / scale);
      for (int64_t r = br; r < br + block_rows; ++r) {
        for (int64_t c = bc; c < bc + block_cols; ++c) {
          q.codes[r * cols + c] = EncodeE4m3fnReference(x[r * cols + c] * scale);
        }
      }
    }
  }
  return q;
}

// ----- small helpers ------------------------------------------------------------------------

// `auto lhs` = the value of the absl::StatusOr `expr`, or return its error from Run().
#define KD_EXAMPLE_ASSIGN_OR_RETURN(lhs, expr)  \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("  [%s] %s\n", ok ? " ok " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// A tensor in its own shm buffer, registered with the session.
struct HostTensor {
  ShmBuffer buffer;
  v1::TensorRef ref;
};

absl::StatusOr<HostTensor> NewTensor(Client& client, v1::DType dtype,
                                     std::initializer_list<int64_t> shape) {
  absl::StatusOr<uint64_t> bytes = kd::client::ContiguousBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<ShmBuffer> buffer = ShmBuffer::Create(*bytes);
  if (!buffer.ok()) return buffer.status();
  absl::StatusOr<uint64_t> id = client.RegisterBuffer(*buffer);
  if (!id.ok()) return id.status();
  HostTensor t{*std::move(buffer), kd::client::MakeTensorRef(*id, dtype, shape)};
  return t;
}

absl::Status Run(const std::string& socket) {
  // Buffer names leave /dev/shm as soon as the daemon has mapped them, so that nothing is left
  // behind if this process is killed.
  kd::client::ClientOptions options;
  options.unlink_after_register = true;
  absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(socket, options);
  if (!connected.ok()) return connected.status();
  Client& client = **connected;
  if (absl::Status s = client.OpenSession("pipeline_example"); !s.ok()) return s;
  std::printf("connected to %s: session %s, backend %s\n", client.target().c_str(),
              client.session_id().c_str(), client.backend().c_str());

  // Inputs: X (8x128) with row 5 all zeros (a block with amax 0 must give zero codes and a
  // finite scale), W (128x128); values rounded to bf16 first so the reference sees exactly
  // what the daemon reads.
  std::vector<float> x(kTokens * kHidden), w(kOut * kHidden);
  uint32_t seed = 12345;
  auto next = [&seed] {  // a small LCG: the same inputs on every run
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  };
  for (int64_t i = 0; i < kTokens * kHidden; ++i) {
    x[i] = i / kHidden == 5 ? 0.0f : Bf16ToFloat(FloatToBf16(4.0f * next()));
  }
  for (float& v : w) v = Bf16ToFloat(FloatToBf16(0.25f * next()));

  KD_EXAMPLE_ASSIGN_OR_RETURN(tx, NewTensor(client, v1::DTYPE_BF16, {kTokens, kHidden}));
  KD_EXAMPLE_ASSIGN_OR_RETURN(tw, NewTensor(client, v1::DTYPE_BF16, {kOut, kHidden}));
  KD_EXAMPLE_ASSIGN_OR_RETURN(txq, NewTensor(client, v1::DTYPE_E4M3FN, {kTokens, kHidden}));
  KD_EXAMPLE_ASSIGN_OR_RETURN(txs, NewTensor(client, v1::DTYPE_F32, {kTokens, kHidden / 128}));
  KD_EXAMPLE_ASSIGN_OR_RETURN(twq, NewTensor(client, v1::DTYPE_E4M3FN, {kOut, kHidden}));
  KD_EXAMPLE_ASSIGN_OR_RETURN(tws, NewTensor(client, v1::DTYPE_F32, {kOut / 128, kHidden / 128}));
  KD_EXAMPLE_ASSIGN_OR_RETURN(td, NewTensor(client, v1::DTYPE_BF16, {kTokens, kOut}));
  for (int64_t i = 0; i < kTokens * kHidden; ++i) tx.buffer.As<uint16_t>()[i] = FloatToBf16(x[i]);
  for (int64_t i = 0; i < kOut * kHidden; ++i) tw.buffer.As<uint16_t>()[i] = FloatToBf16(w[i]);

  // 1. Quantize X with 1x128 blocks and W with 128x128 blocks.
  std::printf("quantize X (%ldx%ld bf16 -> e4m3fn, 1x128 blocks)\n", kTokens, kHidden);
  KD_EXAMPLE_ASSIGN_OR_RETURN(
      qx, client.Quantize(kd::client::MakeQuantizeOp(tx.ref, txq.ref, txs.ref, v1::QUANT_1X128)));
  const Quantized rx = QuantizeReference(x, kTokens, kHidden, 1, 128);
  Check(std::memcmp(txq.buffer.data(), rx.codes.data(), rx.codes.size()) == 0,
        "codes equal the reference bit for bit");
  Check(std::memcmp(txs.buffer.data(), rx.scales.data(), rx.scales.size() * 4) == 0,
        absl::StrFormat("scales equal the reference (row 0: %g; all-zero row 5: %g)",
                        txs.buffer.As<float>()[0], txs.buffer.As<float>()[5]));
  Check(std::isfinite(txs.buffer.As<float>()[5]), "the all-zero row has a finite scale");
  std::printf("  kernel time %.1f us\n", qx.kernel_seconds * 1e6);

  std::printf("quantize W (%ldx%ld bf16 -> e4m3fn, 128x128 blocks)\n", kOut, kHidden);
  KD_EXAMPLE_ASSIGN_OR_RETURN(
      qw, client.Quantize(kd::client::MakeQuantizeOp(tw.ref, twq.ref, tws.ref, v1::QUANT_128X128)));
  const Quantized rw = QuantizeReference(w, kOut, kHidden, 128, 128);
  Check(std::memcmp(twq.buffer.data(), rw.codes.data(), rw.codes.size()) == 0 &&
            std::memcmp(tws.buffer.data(), rw.scales.data(), rw.scales.size() * 4) == 0,
        absl::StrFormat("codes and scale equal the reference (scale %g)", rw.scales[0]));
  std::printf("  kernel time %.1f us\n", qw.kernel_seconds * 1e6);

  // 2. D = dequant(Xq) · dequant(Wq)ᵀ, fp32 accumulation, bf16 output.
  std::printf("gemm NT (%ldx%ld · (%ldx%ld)ᵀ -> bf16)\n", kTokens, kHidden, kOut, kHidden);
  KD_EXAMPLE_ASSIGN_OR_RETURN(
      g, client.Gemm(kd::client::MakeGemmNT(txq.ref, txs.ref, twq.ref, tws.ref, td.ref)));
  double worst = 0, err2 = 0, ref2 = 0;
  bool within = true;
  for (int64_t m = 0; m < kTokens; ++m) {
    for (int64_t n = 0; n < kOut; ++n) {
      double ref = 0, abs_sum = 0, high_precision = 0;
      for (int64_t k = 0; k < kHidden; ++k) {
        const double term = DecodeE4m3fn(rx.codes[m * kHidden + k]) * rx.scales[m] *
                            DecodeE4m3fn(rw.codes[n * kHidden + k]) * rw.scales[0];
        ref += term;
        abs_sum += std::fabs(term);
        high_precision += static_cast<double>(x[m * kHidden + k]) * w[n * kHidden + k];
      }
      const double d = Bf16ToFloat(td.buffer.As<uint16_t>()[m * kOut + n]);
      // bf16 rounding of the output (2^-8 relative, with margin) plus fp32 accumulation.
      const double tolerance = std::ldexp(std::fabs(ref), -7) + 1e-5 * abs_sum;
      within = within && std::fabs(d - ref) <= tolerance;
      worst = std::max(worst, std::fabs(d - ref));
      err2 += (d - high_precision) * (d - high_precision);
      ref2 += high_precision * high_precision;
    }
  }
  Check(within, absl::StrFormat("D matches the dequantized reference (max |diff| %.3g)", worst));
  const double fp8_error = std::sqrt(err2 / ref2);
  Check(fp8_error < 0.15,
        absl::StrFormat("FP8 vs bf16 relative error %.2f%% (< 15%%)", 100 * fp8_error));
  std::printf("  kernel time %.1f us\n", g.kernel_seconds * 1e6);

  // 3. Pad D's rows, split into three token groups (one of them empty), to 16-row groups. The
  //    output lives in a buffer the daemon allocates and this process maps.
  const std::vector<int32_t> group_ends = {3, 3, kTokens};
  const int64_t groups = static_cast<int64_t>(group_ends.size());
  const int64_t padded_rows = kTokens + groups * (kAlignment - 1);  // the no-sync bound
  std::printf("pad (group ends [%s], alignment %d, output %ld rows)\n",
              absl::StrJoin(group_ends, ", ").c_str(), kAlignment, padded_rows);
  KD_EXAMPLE_ASSIGN_OR_RETURN(tends, NewTensor(client, v1::DTYPE_I32, {groups}));
  KD_EXAMPLE_ASSIGN_OR_RETURN(tpends, NewTensor(client, v1::DTYPE_I32, {groups}));
  std::memcpy(tends.buffer.data(), group_ends.data(), groups * 4);
  KD_EXAMPLE_ASSIGN_OR_RETURN(padded, client.AllocateBuffer(padded_rows * kOut * 2));
  std::memset(padded.data(), 0xFF, padded.size());  // so that unwritten rows would show
  const v1::TensorRef padded_ref =
      kd::client::MakeTensorRef(padded.buffer_id(), v1::DTYPE_BF16, {padded_rows, kOut});
  KD_EXAMPLE_ASSIGN_OR_RETURN(
      p, client.Pad(kd::client::MakePadOp(td.ref, tends.ref, padded_ref, tpends.ref, kAlignment)));
  std::vector<int32_t> expect_ends;
  std::vector<uint16_t> expect_rows(padded_rows * kOut, 0);
  int32_t start = 0, padded_start = 0;
  for (int32_t end : group_ends) {
    for (int32_t r = start; r < end; ++r) {
      std::memcpy(&expect_rows[(padded_start + r - start) * kOut],
                  td.buffer.As<uint16_t>(r * kOut * 2), kOut * 2);
    }
    padded_start += (end - start + kAlignment - 1) / kAlignment * kAlignment;
    expect_ends.push_back(padded_start);
    start = end;
  }
  Check(std::memcmp(tpends.buffer.data(), expect_ends.data(), groups * 4) == 0,
        absl::StrFormat("padded group ends [%s] (expected [%s])",
                        absl::StrJoin(tpends.buffer.Span<int32_t>(0, groups), ", "),
                        absl::StrJoin(expect_ends, ", ")));
  Check(std::memcmp(padded.data(), expect_rows.data(), expect_rows.size() * 2) == 0,
        "rows copied to their padded places, padding rows zero");
  std::printf("  kernel time %.1f us\n", p.kernel_seconds * 1e6);

  // 4. Unpad back and compare with D.
  std::printf("unpad (back to %ld rows)\n", kTokens);
  KD_EXAMPLE_ASSIGN_OR_RETURN(tback, NewTensor(client, v1::DTYPE_BF16, {kTokens, kOut}));
  KD_EXAMPLE_ASSIGN_OR_RETURN(
      u, client.Unpad(kd::client::MakeUnpadOp(padded_ref, tends.ref, tback.ref, kAlignment)));
  Check(std::memcmp(tback.buffer.data(), td.buffer.data(), td.buffer.size()) == 0,
        "unpad(pad(D)) == D");
  std::printf("  kernel time %.1f us\n", u.kernel_seconds * 1e6);

  // 5. The quantize and gemm steps again, as one batch: same bytes expected.
  std::printf("submit (quantize X, quantize W, gemm in one call)\n");
  const std::vector<uint8_t> d_before(td.buffer.As<uint8_t>(),
                                      td.buffer.As<uint8_t>() + td.buffer.size());
  std::memset(txq.buffer.data(), 0, txq.buffer.size());
  std::memset(td.buffer.data(), 0, td.buffer.size());
  const std::vector<v1::Op> batch = {
      kd::client::AsOp(kd::client::MakeQuantizeOp(tx.ref, txq.ref, txs.ref, v1::QUANT_1X128)),
      kd::client::AsOp(kd::client::MakeQuantizeOp(tw.ref, twq.ref, tws.ref, v1::QUANT_128X128)),
      kd::client::AsOp(kd::client::MakeGemmNT(txq.ref, txs.ref, twq.ref, tws.ref, td.ref))};
  KD_EXAMPLE_ASSIGN_OR_RETURN(b, client.Submit(batch));
  Check(std::memcmp(txq.buffer.data(), rx.codes.data(), rx.codes.size()) == 0 &&
            std::memcmp(td.buffer.data(), d_before.data(), d_before.size()) == 0,
        "the batch reproduces the step-by-step results bit for bit");
  std::printf("  kernel time %.1f us\n", b.kernel_seconds * 1e6);

  // 6. The same batch through a submit ring (shared memory instead of a gRPC round trip).
  std::printf("submit ring (the batch again, through shared memory)\n");
  auto median_round_trip_us = [&client]() -> absl::StatusOr<double> {
    std::vector<double> us;
    for (int i = 0; i < 51; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      if (absl::Status s = client.Submit({}).status(); !s.ok()) return s;
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(us.begin(), us.begin() + 25, us.end());
    return us[25];
  };
  KD_EXAMPLE_ASSIGN_OR_RETURN(grpc_us, median_round_trip_us());
  if (absl::Status s = client.AttachSubmitRing(); !s.ok()) return s;
  KD_EXAMPLE_ASSIGN_OR_RETURN(ring_us, median_round_trip_us());
  std::memset(txq.buffer.data(), 0, txq.buffer.size());
  std::memset(td.buffer.data(), 0, td.buffer.size());
  KD_EXAMPLE_ASSIGN_OR_RETURN(r, client.Submit(batch));
  Check(std::memcmp(txq.buffer.data(), rx.codes.data(), rx.codes.size()) == 0 &&
            std::memcmp(td.buffer.data(), d_before.data(), d_before.size()) == 0 &&
            client.submit_ring_counts().ring_calls == 52,
        "the ring reproduces the batch's results bit for bit");
  std::printf(
      "  kernel time %.1f us; empty round trip %.1f us over gRPC, %.1f us through the ring\n",
      r.kernel_seconds * 1e6, grpc_us, ring_us);

  if (absl::Status s = client.ReleaseBuffer(padded); !s.ok()) return s;
  absl::StatusOr<uint32_t> released = client.CloseSession();
  if (!released.ok()) return released.status();
  std::printf("session closed; the daemon released %u buffers\n", *released);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs quantize -> gemm -> pad against a running kerneld and checks the results.\n"
      "usage: kerneld_example [--socket=PATH]");
  absl::ParseCommandLine(argc, argv);
  std::string socket = absl::GetFlag(FLAGS_socket);
  if (socket.empty()) {
    const char* env = std::getenv("KERNELD_SOCKET");
    socket = env != nullptr && *env != '\0' ? env : kd::client::kDefaultDataSocket;
  }
  const absl::Status status = Run(socket);
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
    return 1;
  }
  if (failures > 0) {
    std::printf("%d check%s FAILED\n", failures, failures == 1 ? "" : "s");
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}
