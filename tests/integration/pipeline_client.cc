// A trainer-like client process for the integration tests. It links only the client library and
// checks what the daemon computed against plain references written here, independent of the
// daemon's kernels: an FP8 encoder by nearest-value search over the format's code table, and a
// double-precision GEMM.
//
//   pipeline_client --socket=PATH --m=M --n=N --k=K --groups=G --iterations=I --seed=S
//       runs quantize -> gemm -> pad I times (odd iterations as one Submit batch); exit 0 when
//       every result matched.
//   pipeline_client --socket=PATH --hold
//       opens a session, registers three shm buffers and allocates one from the daemon's pool,
//       prints "READY <session id>" and sleeps until killed.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "kerneld/client/client.h"
#include "kerneld/client/tensor_ref.h"

ABSL_FLAG(std::string, socket, "", "data socket of the daemon");
ABSL_FLAG(int64_t, m, 256, "rows of X (tokens)");
ABSL_FLAG(int64_t, n, 256, "rows of W (output features)");
ABSL_FLAG(int64_t, k, 512, "reduction dimension, a multiple of 128");
ABSL_FLAG(int, groups, 4, "token groups for pad");
ABSL_FLAG(int, alignment, 32, "pad alignment");
ABSL_FLAG(int, iterations, 2, "pipelines to run");
ABSL_FLAG(uint32_t, seed, 1, "random seed");
ABSL_FLAG(bool, hold, false, "register buffers, print READY, and sleep until killed");
ABSL_FLAG(bool, ring, false, "attach a submit ring: every op call goes through shared memory");

namespace {

namespace v1 = ::kerneld::v1;
using kd::client::Client;
using kd::client::MakeTensorRef;
using kd::client::ShmBuffer;

int failures = 0;

void Fail(const std::string& what) {
  ++failures;
  if (failures <= 10) std::fprintf(stderr, "pipeline_client: %s\n", what.c_str());
}

// e4m3fn by its definition: sign, 4 exponent bits (bias 7), 3 mantissa bits; S.1111.111 is NaN.
double DecodeE4M3FN(int code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (code & 0x80) ? -mag : mag;
}

// Nearest e4m3fn code to x, ties to the even code, saturating to ±448, NaN to 0x7f.
uint8_t ReferenceEncode(float x) {
  if (std::isnan(x)) return 0x7F;
  const double a = std::min(std::fabs(static_cast<double>(x)), 448.0);
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7E; ++c) {
    const double err = std::fabs(DecodeE4M3FN(c) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

float BF16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToBF16Truncate(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

// The recipe of kerneld.proto: scale = 448 / max(amax, eps); stored = 1 / scale.
void ReferenceQuantize(const std::vector<float>& x, int64_t rows, int64_t cols, int64_t block_rows,
                       std::vector<uint8_t>& q, std::vector<float>& scales) {
  const int64_t kb = cols / 128, rb = (rows + block_rows - 1) / block_rows;
  q.assign(rows * cols, 0);
  scales.assign((block_rows == 1 ? rows : rb) * kb, 0.0f);
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
    for (int64_t b = 0; b < kb; ++b) {
      float amax = 0;
      for (int64_t r = r0; r < std::min(rows, r0 + block_rows); ++r) {
        for (int64_t c = b * 128; c < (b + 1) * 128; ++c)
          amax = std::max(amax, std::fabs(x[r * cols + c]));
      }
      const float scale = 448.0f / std::max(amax, 1e-12f);
      for (int64_t r = r0; r < std::min(rows, r0 + block_rows); ++r) {
        for (int64_t c = b * 128; c < (b + 1) * 128; ++c)
          q[r * cols + c] = ReferenceEncode(x[r * cols + c] * scale);
      }
      scales[(r0 / block_rows) * kb + b] = 1.0f / scale;
    }
  }
}

template <typename T>
absl::StatusOr<ShmBuffer> NewBuffer(Client& client, int64_t elements) {
  auto buf = ShmBuffer::Create(std::max<int64_t>(elements * sizeof(T), 64));
  if (!buf.ok()) return buf.status();
  auto id = client.RegisterBuffer(*buf);
  if (!id.ok()) return id.status();
  return buf;
}

#define CHECK_OK(expr)                                                                 \
  do {                                                                                 \
    const absl::Status s_ = (expr);                                                    \
    if (!s_.ok()) {                                                                    \
      std::fprintf(stderr, "pipeline_client: %s: %s\n", #expr, s_.ToString().c_str()); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

int Hold(Client& client) {
  std::vector<ShmBuffer> keep;
  for (int i = 0; i < 3; ++i) {
    auto b = NewBuffer<float>(client, 4096);
    CHECK_OK(b.status());  // a memfd: nothing is left in /dev/shm when the test SIGKILLs us
    keep.push_back(*std::move(b));
  }
  auto pool = client.AllocateBuffer(1 << 20);
  CHECK_OK(pool.status());
  std::printf("READY %s\n", client.session_id().c_str());
  std::fflush(stdout);
  for (;;) pause();
}

int RunPipelines(Client& client) {
  const int64_t m = absl::GetFlag(FLAGS_m), n = absl::GetFlag(FLAGS_n), k = absl::GetFlag(FLAGS_k);
  const int groups = absl::GetFlag(FLAGS_groups), align = absl::GetFlag(FLAGS_alignment);
  const int64_t kb = k / 128, nb = (n + 127) / 128, padded_rows = m + groups * (align - 1);
  std::mt19937 rng(absl::GetFlag(FLAGS_seed));

  auto x = NewBuffer<uint16_t>(client, m * k);
  auto w = NewBuffer<uint16_t>(client, n * k);
  auto xq = NewBuffer<uint8_t>(client, m * k);
  auto wq = NewBuffer<uint8_t>(client, n * k);
  auto sx = NewBuffer<float>(client, m * kb);
  auto sw = NewBuffer<float>(client, nb * kb);
  auto d = NewBuffer<uint16_t>(client, m * n);
  auto ends = NewBuffer<int32_t>(client, groups);
  auto p = NewBuffer<uint16_t>(client, padded_rows * n);
  auto pends = NewBuffer<int32_t>(client, groups);
  for (auto* b : {&x, &w, &xq, &wq, &sx, &sw, &d, &ends, &p, &pends}) CHECK_OK(b->status());

  const v1::QuantizeOp qx = kd::client::MakeQuantizeOp(
      MakeTensorRef(x->buffer_id(), v1::DTYPE_BF16, {m, k}),
      MakeTensorRef(xq->buffer_id(), v1::DTYPE_E4M3FN, {m, k}),
      MakeTensorRef(sx->buffer_id(), v1::DTYPE_F32, {m, kb}), v1::QUANT_1X128);
  const v1::QuantizeOp qw = kd::client::MakeQuantizeOp(
      MakeTensorRef(w->buffer_id(), v1::DTYPE_BF16, {n, k}),
      MakeTensorRef(wq->buffer_id(), v1::DTYPE_E4M3FN, {n, k}),
      MakeTensorRef(sw->buffer_id(), v1::DTYPE_F32, {nb, kb}), v1::QUANT_128X128);
  const v1::GemmOp gemm =
      kd::client::MakeGemmNT(MakeTensorRef(xq->buffer_id(), v1::DTYPE_E4M3FN, {m, k}),
                             MakeTensorRef(sx->buffer_id(), v1::DTYPE_F32, {m, kb}),
                             MakeTensorRef(wq->buffer_id(), v1::DTYPE_E4M3FN, {n, k}),
                             MakeTensorRef(sw->buffer_id(), v1::DTYPE_F32, {nb, kb}),
                             MakeTensorRef(d->buffer_id(), v1::DTYPE_BF16, {m, n}));
  const v1::PadOp pad =
      kd::client::MakePadOp(MakeTensorRef(d->buffer_id(), v1::DTYPE_BF16, {m, n}),
                            MakeTensorRef(ends->buffer_id(), v1::DTYPE_I32, {groups}),
                            MakeTensorRef(p->buffer_id(), v1::DTYPE_BF16, {padded_rows, n}),
                            MakeTensorRef(pends->buffer_id(), v1::DTYPE_I32, {groups}), align);

  for (int it = 0; it < absl::GetFlag(FLAGS_iterations); ++it) {
    // Inputs at a magnitude that changes per iteration, with some exact zeros.
    const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
    std::normal_distribution<float> normal(0.0f, magnitude);
    std::vector<float> xf(m * k), wf(n * k);
    for (int64_t i = 0; i < m * k; ++i) {
      xf[i] = BF16ToFloat(FloatToBF16Truncate(i % 97 == 0 ? 0.0f : normal(rng)));
      x->As<uint16_t>()[i] = FloatToBF16Truncate(xf[i]);
    }
    for (int64_t i = 0; i < n * k; ++i) {
      wf[i] = BF16ToFloat(FloatToBF16Truncate(normal(rng)));
      w->As<uint16_t>()[i] = FloatToBF16Truncate(wf[i]);
    }
    std::vector<int32_t> group_ends(groups);
    for (int g = 0; g < groups; ++g)
      group_ends[g] = g + 1 == groups ? m : static_cast<int32_t>(rng() % (m + 1));
    std::sort(group_ends.begin(), group_ends.end());
    for (int g = 0; g < groups; ++g) ends->As<int32_t>()[g] = group_ends[g];
    std::memset(p->data(), 0xFF, p->size());

    if (it % 2 == 0) {
      CHECK_OK(client.Quantize(qx).status());
      CHECK_OK(client.Quantize(qw).status());
      CHECK_OK(client.Gemm(gemm).status());
      CHECK_OK(client.Pad(pad).status());
    } else {
      const v1::Op batch[] = {kd::client::AsOp(qx), kd::client::AsOp(qw), kd::client::AsOp(gemm),
                              kd::client::AsOp(pad)};
      CHECK_OK(client.Submit(batch).status());
    }

    // Quantization: bit-exact.
    std::vector<uint8_t> ref_q;
    std::vector<float> ref_s;
    ReferenceQuantize(xf, m, k, 1, ref_q, ref_s);
    for (int64_t i = 0; i < m * k; ++i) {
      if (xq->As<uint8_t>()[i] != ref_q[i]) {
        Fail(absl::StrCat("iteration ", it, ": xq[", i, "]=", xq->As<uint8_t>()[i], " want ",
                          ref_q[i]));
        break;
      }
    }
    for (int64_t i = 0; i < m * kb; ++i) {
      if (sx->As<float>()[i] != ref_s[i]) {
        Fail(absl::StrCat("iteration ", it, ": sx[", i, "]=", sx->As<float>()[i], " want ",
                          ref_s[i]));
        break;
      }
    }
    ReferenceQuantize(wf, n, k, 128, ref_q, ref_s);
    for (int64_t i = 0; i < n * k; ++i) {
      if (wq->As<uint8_t>()[i] != ref_q[i]) {
        Fail(absl::StrCat("iteration ", it, ": wq[", i, "]=", wq->As<uint8_t>()[i], " want ",
                          ref_q[i]));
        break;
      }
    }
    for (int64_t i = 0; i < nb * kb; ++i) {
      if (sw->As<float>()[i] != ref_s[i]) {
        Fail(absl::StrCat("iteration ", it, ": sw[", i, "]=", sw->As<float>()[i], " want ",
                          ref_s[i]));
        break;
      }
    }

    // GEMM from the daemon's own FP8 operands, in double: relative Frobenius error under 1e-2
    // (bf16 output rounding is 2^-9 relative per element; fp32 accumulation adds far less).
    double err2 = 0, ref2 = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < k; ++c) {
          acc += DecodeE4M3FN(xq->As<uint8_t>()[i * k + c]) * sx->As<float>()[i * kb + c / 128] *
                 DecodeE4M3FN(wq->As<uint8_t>()[j * k + c]) *
                 sw->As<float>()[(j / 128) * kb + c / 128];
        }
        const double got = BF16ToFloat(d->As<uint16_t>()[i * n + j]);
        err2 += (got - acc) * (got - acc);
        ref2 += acc * acc;
      }
    }
    if (!(std::sqrt(err2) <= 1e-2 * std::sqrt(ref2))) {
      Fail(absl::StrCat("iteration ", it, ": gemm relative error ",
                        std::sqrt(err2 / std::max(ref2, 1e-300))));
    }

    // Pad: rows moved to aligned group starts, everything else zero.
    int64_t prev = 0, padded_prev = 0;
    std::vector<int64_t> source(padded_rows, -1);
    for (int g = 0; g < groups; ++g) {
      const int64_t size = group_ends[g] - prev;
      for (int64_t r = 0; r < size; ++r) source[padded_prev + r] = prev + r;
      padded_prev += (size + align - 1) / align * align;
      if (pends->As<int32_t>()[g] != padded_prev) {
        Fail(absl::StrCat("iteration ", it, ": padded_group_ends[", g,
                          "]=", pends->As<int32_t>()[g], " want ", padded_prev));
      }
      prev = group_ends[g];
    }
    for (int64_t r = 0; r < padded_rows; ++r) {
      const uint16_t* got = p->As<uint16_t>() + r * n;
      for (int64_t j = 0; j < n; ++j) {
        const uint16_t want = source[r] < 0 ? 0 : d->As<uint16_t>()[source[r] * n + j];
        if (got[j] != want) {
          Fail(absl::StrCat("iteration ", it, ": pad row ", r, " col ", j, " is ", got[j], " want ",
                            want));
          r = padded_rows;
          break;
        }
      }
    }
  }
  CHECK_OK(client.CloseSession().status());
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto client = Client::Connect(absl::GetFlag(FLAGS_socket));
  CHECK_OK(client.status());
  CHECK_OK((*client)->OpenSession(absl::StrCat("pipeline-", getpid())));
  if (absl::GetFlag(FLAGS_ring)) CHECK_OK((*client)->AttachSubmitRing());
  return absl::GetFlag(FLAGS_hold) ? Hold(**client) : RunPipelines(**client);
}
