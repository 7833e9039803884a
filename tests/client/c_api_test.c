/* The C ABI (include/kerneld/c/kerneld.h) from C99, against the real daemon binary on the CPU
 * backend: versions, errors, sessions, shm and daemon-allocated buffers, every op and variant,
 * a batch with the dual pass, the submit ring, the completion checks, per-thread errors.
 *   c_api_test KERNELD_BINARY
 * Prints one line per check and "N passed, M failed"; exits 1 on any failure. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kerneld/c/kerneld.h"

static int passed = 0, failed = 0;

#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (cond) {                                                                   \
      ++passed;                                                                   \
    } else {                                                                      \
      ++failed;                                                                   \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                      \
      printf(__VA_ARGS__);                                                        \
      printf(" (last error %s: %s)\n", kd_status_code_name(kd_last_error_code()), \
             kd_last_error());                                                    \
    }                                                                             \
  } while (0)

#define CHECK_OK(expr) CHECK((expr) == KD_OK, "%s", #expr)

static kd_tensor Tensor(uint64_t id, uint64_t offset, kd_dtype dtype, int rank,
                        const int64_t* shape) {
  kd_tensor t;
  memset(&t, 0, sizeof t);
  t.buffer_id = id;
  t.byte_offset = offset;
  t.dtype = dtype;
  t.rank = rank;
  for (int i = 0; i < rank; ++i) t.shape[i] = shape[i];
  return t;
}

static kd_tensor T2(uint64_t id, uint64_t offset, kd_dtype dtype, int64_t r, int64_t c) {
  const int64_t s[2] = {r, c};
  return Tensor(id, offset, dtype, 2, s);
}

static kd_tensor T1(uint64_t id, uint64_t offset, kd_dtype dtype, int64_t n) {
  return Tensor(id, offset, dtype, 1, &n);
}

static kd_tensor T3(uint64_t id, uint64_t offset, kd_dtype dtype, int64_t a, int64_t b, int64_t c) {
  const int64_t s[3] = {a, b, c};
  return Tensor(id, offset, dtype, 3, s);
}

static float Bf16ToFloat(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* A buffer: a kd_shm registered with the session. */
typedef struct {
  kd_shm* shm;
  uint64_t id;
} Buffer;

static Buffer NewBuffer(kd_client* c, uint64_t bytes) {
  Buffer b = {NULL, 0};
  if (kd_shm_create(bytes, 0, -1, &b.shm) != KD_OK || kd_register_shm(c, b.shm, &b.id) != KD_OK) {
    printf("FAIL: buffer of %llu bytes: %s\n", (unsigned long long)bytes, kd_last_error());
    exit(1);
  }
  return b;
}

static void Fill16(Buffer b, uint16_t v, size_t n) {
  uint16_t* p = (uint16_t*)kd_shm_data(b.shm);
  for (size_t i = 0; i < n; ++i) p[i] = v;
}

static pid_t StartDaemon(const char* kerneld, const char* dir) {
  char socket[512], admin[512];
  snprintf(socket, sizeof socket, "--socket=%s/data.sock", dir);
  snprintf(admin, sizeof admin, "--admin_socket=%s/admin.sock", dir);
  const pid_t pid = fork();
  if (pid == 0) {
    char log[512];
    snprintf(log, sizeof log, "%s/kerneld.log", dir);
    if (freopen(log, "w", stderr) == NULL) _exit(126);
    execl(kerneld, kerneld, socket, admin, "--metrics_address=", "--backend=cpu", "--cpu_threads=2",
          (char*)NULL);
    _exit(127);
  }
  char path[512];
  snprintf(path, sizeof path, "%s/data.sock", dir);
  /* 60 s: a hang guard, far beyond what a loaded machine takes to start the daemon. */
  for (int i = 0; i < 1200; ++i) {
    struct stat st;
    if (stat(path, &st) == 0) return pid;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  printf("FAIL: the daemon did not create %s\n", path);
  kill(pid, SIGKILL);
  exit(1);
}

static void* OtherThread(void* arg) {
  int* code = (int*)arg;
  *code = kd_last_error_code();
  return NULL;
}

static void TestVersionAndErrors(const char* dir) {
  CHECK(kd_api_version() == KD_API_VERSION, "api version %u", kd_api_version());
  CHECK(strlen(kd_version_string()) > 0, "version string");
  CHECK(strcmp(kd_status_code_name(KD_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0, "code name");
  CHECK(strcmp(kd_status_code_name(99), "UNKNOWN") == 0, "unknown code name");
  CHECK(kd_sizeof("kd_op") == sizeof(kd_op) && kd_sizeof("kd_tensor") == sizeof(kd_tensor),
        "sizes");
  CHECK(kd_sizeof("kd_nothing") == 0, "unknown struct");

  kd_client_options options;
  kd_client_options_init(&options);
  CHECK(options.struct_size == sizeof options && options.op_timeout_ms == 60000, "defaults");
  options.connect_timeout_ms = 300;
  char target[512];
  snprintf(target, sizeof target, "%s/nothing.sock", dir);
  kd_client* none = NULL;
  const int code = kd_connect(target, &options, &none);
  CHECK(code == KD_UNAVAILABLE || code == KD_DEADLINE_EXCEEDED, "connect to nothing: %d", code);
  CHECK(none == NULL, "no client on failure");
  CHECK(strstr(kd_last_error(), "nothing.sock") != NULL, "the message names the target: %s",
        kd_last_error());
  /* The error state is per thread: another thread sees none. */
  int other = -1;
  pthread_t t;
  pthread_create(&t, NULL, OtherThread, &other);
  pthread_join(t, NULL);
  CHECK(other == KD_OK, "another thread's last error is %d", other);
  CHECK(kd_last_error_code() == code, "this thread keeps its error");
  kd_client_options zero;
  memset(&zero, 0, sizeof zero);
  CHECK(kd_connect(target, &zero, &none) == KD_INVALID_ARGUMENT, "struct_size 0 refused");
}

static void TestOps(kd_client* c) {
  const int64_t M = 256, K = 128, N = 128;
  /* X (M,K) bf16 of 1.0, W (N,K) bf16 of 0.5: every quantized code is 448 (0x7E). */
  Buffer x = NewBuffer(c, M * K * 2), w = NewBuffer(c, N * K * 2);
  Fill16(x, 0x3F80, M * K);
  Fill16(w, 0x3F00, N * K);
  Buffer xq = NewBuffer(c, M * K), xs = NewBuffer(c, M * (K / 128) * 4);
  Buffer xt = NewBuffer(c, K * M), xts = NewBuffer(c, K * (M / 128) * 4);
  Buffer wq = NewBuffer(c, N * K), ws = NewBuffer(c, (N / 128) * (K / 128) * 4);
  Buffer d = NewBuffer(c, M * N * 4);

  /* quantize 1x128 alone */
  kd_quantize_op q;
  memset(&q, 0, sizeof q);
  q.input = T2(x.id, 0, KD_DTYPE_BF16, M, K);
  q.output = T2(xq.id, 0, KD_DTYPE_E4M3FN, M, K);
  q.scales = T2(xs.id, 0, KD_DTYPE_F32, M, K / 128);
  q.granularity = KD_QUANT_1X128;
  double seconds = -1;
  CHECK_OK(kd_quantize(c, &q, NULL, &seconds));
  CHECK(seconds >= 0, "kernel seconds %g", seconds);
  const uint8_t* codes = (const uint8_t*)kd_shm_data(xq.shm);
  const float* scales = (const float*)kd_shm_data(xs.shm);
  CHECK(codes[0] == 0x7E && codes[M * K - 1] == 0x7E, "codes %02x %02x", codes[0],
        codes[M * K - 1]);
  CHECK(scales[0] == 1.0f / 448.0f, "scale %g", scales[0]);

  /* One batch: dual pass of X (X 1x128 and Xᵀ 1x128), W 128x128, GEMM NT into bf16. */
  kd_op ops[3];
  memset(ops, 0, sizeof ops);
  ops[0].kind = KD_OP_QUANTIZE;
  ops[0].u.quantize = q;
  ops[0].u.quantize.output_t = T2(xt.id, 0, KD_DTYPE_E4M3FN, K, M);
  ops[0].u.quantize.scales_t = T2(xts.id, 0, KD_DTYPE_F32, K, M / 128);
  ops[1].kind = KD_OP_QUANTIZE;
  ops[1].u.quantize.input = T2(w.id, 0, KD_DTYPE_BF16, N, K);
  ops[1].u.quantize.output = T2(wq.id, 0, KD_DTYPE_E4M3FN, N, K);
  ops[1].u.quantize.scales = T2(ws.id, 0, KD_DTYPE_F32, N / 128, K / 128);
  ops[1].u.quantize.granularity = KD_QUANT_128X128;
  ops[2].kind = KD_OP_GEMM;
  ops[2].u.gemm.variant = KD_GEMM_NT;
  ops[2].u.gemm.a = T2(xq.id, 0, KD_DTYPE_E4M3FN, M, K);
  ops[2].u.gemm.a_scales = T2(xs.id, 0, KD_DTYPE_F32, M, K / 128);
  ops[2].u.gemm.b = T2(wq.id, 0, KD_DTYPE_E4M3FN, N, K);
  ops[2].u.gemm.b_scales = T2(ws.id, 0, KD_DTYPE_F32, N / 128, K / 128);
  ops[2].u.gemm.d = T2(d.id, 0, KD_DTYPE_BF16, M, N);
  CHECK_OK(kd_submit(c, ops, 3, NULL, NULL));
  const uint16_t* out = (const uint16_t*)kd_shm_data(d.shm);
  CHECK(Bf16ToFloat(out[0]) == 64.0f && Bf16ToFloat(out[M * N - 1]) == 64.0f, "NT d = %g",
        Bf16ToFloat(out[0]));
  CHECK(((const uint8_t*)kd_shm_data(xt.shm))[K * M - 1] == 0x7E, "dual pass wrote Xᵀ");

  /* NN: dX (M,K) = dY (M,N) · W (N,K); TN: dW (N,K) = dYᵀ (N,M) · Xᵀ (K,M), f32, accumulate. */
  Buffer dx = NewBuffer(c, M * K * 4), dw = NewBuffer(c, N * K * 4);
  kd_gemm_op g;
  memset(&g, 0, sizeof g);
  g.variant = KD_GEMM_NN;
  g.a = T2(xq.id, 0, KD_DTYPE_E4M3FN, M, N);
  g.a_scales = T2(xs.id, 0, KD_DTYPE_F32, M, N / 128);
  g.b = T2(wq.id, 0, KD_DTYPE_E4M3FN, N, K);
  g.b_scales = T2(ws.id, 0, KD_DTYPE_F32, N / 128, K / 128);
  g.d = T2(dx.id, 0, KD_DTYPE_F32, M, K);
  CHECK_OK(kd_gemm(c, &g, NULL, NULL));
  CHECK(fabsf(((const float*)kd_shm_data(dx.shm))[0] - 64.0f) < 1e-3f, "NN d = %g",
        ((const float*)kd_shm_data(dx.shm))[0]);
  memset(&g, 0, sizeof g);
  g.variant = KD_GEMM_TN;
  g.a = T2(xt.id, 0, KD_DTYPE_E4M3FN, K, M);
  g.a_scales = T2(xts.id, 0, KD_DTYPE_F32, K, M / 128);
  g.b = T2(xt.id, 0, KD_DTYPE_E4M3FN, K, M);
  g.b_scales = T2(xts.id, 0, KD_DTYPE_F32, K, M / 128);
  g.d = T2(dw.id, 0, KD_DTYPE_F32, N, K);
  CHECK_OK(kd_gemm(c, &g, NULL, NULL));
  g.accumulate = 1;
  CHECK_OK(kd_gemm(c, &g, NULL, NULL));
  CHECK(fabsf(((const float*)kd_shm_data(dw.shm))[0] - 2.0f * M) < 1e-2f, "TN twice = %g",
        ((const float*)kd_shm_data(dw.shm))[0]);

  /* Grouped: 2 experts over the M rows, ends {128, 256}. */
  Buffer ends = NewBuffer(c, 2 * 4), be = NewBuffer(c, 2 * N * K), bes = NewBuffer(c, 2 * 4);
  ((int32_t*)kd_shm_data(ends.shm))[0] = 128;
  ((int32_t*)kd_shm_data(ends.shm))[1] = 256;
  memset(kd_shm_data(be.shm), 0x7E, 2 * N * K);
  ((float*)kd_shm_data(bes.shm))[0] = 0.5f / 448.0f;
  ((float*)kd_shm_data(bes.shm))[1] = 1.0f / 448.0f;
  memset(&g, 0, sizeof g);
  g.variant = KD_GEMM_M_GROUPED_NT;
  g.a = T2(xq.id, 0, KD_DTYPE_E4M3FN, M, K);
  g.a_scales = T2(xs.id, 0, KD_DTYPE_F32, M, K / 128);
  g.b = T3(be.id, 0, KD_DTYPE_E4M3FN, 2, N, K);
  g.b_scales = T3(bes.id, 0, KD_DTYPE_F32, 2, 1, 1);
  g.d = T2(dx.id, 0, KD_DTYPE_F32, M, N);
  g.group_ends = T1(ends.id, 0, KD_DTYPE_I32, 2);
  CHECK_OK(kd_gemm(c, &g, NULL, NULL));
  const float* dxf = (const float*)kd_shm_data(dx.shm);
  CHECK(fabsf(dxf[0] - 64.0f) < 1e-3f && fabsf(dxf[M * N - 1] - 128.0f) < 1e-3f, "M-grouped %g %g",
        dxf[0], dxf[M * N - 1]);
  Buffer dwe = NewBuffer(c, 2 * N * K * 4);
  memset(&g, 0, sizeof g);
  g.variant = KD_GEMM_K_GROUPED_TN;
  g.a = T2(xt.id, 0, KD_DTYPE_E4M3FN, K, M);
  g.a_scales = T2(xts.id, 0, KD_DTYPE_F32, K, M / 128);
  g.b = T2(xt.id, 0, KD_DTYPE_E4M3FN, K, M);
  g.b_scales = T2(xts.id, 0, KD_DTYPE_F32, K, M / 128);
  g.d = T3(dwe.id, 0, KD_DTYPE_F32, 2, K, K);
  g.group_ends = T1(ends.id, 0, KD_DTYPE_I32, 2);
  CHECK_OK(kd_gemm(c, &g, NULL, NULL));
  CHECK(fabsf(((const float*)kd_shm_data(dwe.shm))[0] - 128.0f) < 1e-2f, "K-grouped %g",
        ((const float*)kd_shm_data(dwe.shm))[0]);

  /* Pad rows {0..2} {3..4} to 16 each, then unpad back. */
  Buffer rows = NewBuffer(c, 5 * 4 * 4), pends = NewBuffer(c, 2 * 4),
         padded = NewBuffer(c, 40 * 4 * 4);
  Buffer rends = NewBuffer(c, 2 * 8), back = NewBuffer(c, 5 * 4 * 4);
  for (int i = 0; i < 20; ++i) ((float*)kd_shm_data(rows.shm))[i] = (float)(i + 1);
  ((int64_t*)kd_shm_data(rends.shm))[0] = 3;
  ((int64_t*)kd_shm_data(rends.shm))[1] = 5;
  kd_pad_op p;
  memset(&p, 0, sizeof p);
  p.input = T2(rows.id, 0, KD_DTYPE_F32, 5, 4);
  p.group_ends = T1(rends.id, 0, KD_DTYPE_I64, 2);
  p.output = T2(padded.id, 0, KD_DTYPE_F32, 40, 4);
  p.padded_group_ends = T1(pends.id, 0, KD_DTYPE_I32, 2);
  p.alignment = 16;
  CHECK_OK(kd_pad(c, &p, NULL, NULL));
  const int32_t* pe = (const int32_t*)kd_shm_data(pends.shm);
  const float* pf = (const float*)kd_shm_data(padded.shm);
  CHECK(pe[0] == 16 && pe[1] == 32, "padded ends %d %d", pe[0], pe[1]);
  CHECK(pf[16 * 4] == 13.0f && pf[3 * 4] == 0.0f, "padded rows %g %g", pf[16 * 4], pf[3 * 4]);
  kd_unpad_op u;
  memset(&u, 0, sizeof u);
  u.input = T2(padded.id, 0, KD_DTYPE_F32, 40, 4);
  u.group_ends = T1(rends.id, 0, KD_DTYPE_I64, 2);
  u.output = T2(back.id, 0, KD_DTYPE_F32, 5, 4);
  u.alignment = 16;
  CHECK_OK(kd_unpad(c, &u, NULL, NULL));
  CHECK(memcmp(kd_shm_data(back.shm), kd_shm_data(rows.shm), 80) == 0, "unpad restores rows");

  /* MX and jagged quantization. */
  Buffer mxs = NewBuffer(c, M * (K / 32));
  memset(&q, 0, sizeof q);
  q.input = T2(x.id, 0, KD_DTYPE_BF16, M, K);
  q.output = T2(xq.id, 0, KD_DTYPE_E4M3FN, M, K);
  q.scales = T2(mxs.id, 0, KD_DTYPE_E8M0, M, K / 32);
  q.granularity = KD_QUANT_MX_1X32;
  q.mx_rounding = KD_MX_ROUNDING_RCEIL;
  CHECK_OK(kd_quantize(c, &q, NULL, NULL));
  Buffer jcs = NewBuffer(c, 2 * K * 4);
  memset(&q, 0, sizeof q);
  q.input = T2(x.id, 0, KD_DTYPE_BF16, M, K);
  q.output = T2(xt.id, 0, KD_DTYPE_E4M3FN, K, M);
  q.scales = T2(jcs.id, 0, KD_DTYPE_F32, 2, K);
  q.granularity = KD_QUANT_JAGGED_COLWISE;
  q.transpose_output = 1;
  q.group_ends = T1(ends.id, 0, KD_DTYPE_I32, 2);
  CHECK_OK(kd_quantize(c, &q, NULL, NULL));

  /* Strided view: the second half of X's columns as a (M, 64)... must be a multiple of 128, so
   * a (M/2, K) view with row stride 2K: every other row. */
  memset(&q, 0, sizeof q);
  q.input = T2(x.id, 0, KD_DTYPE_BF16, M / 2, K);
  q.input.strides[0] = 2 * K;
  q.input.strides[1] = 1;
  q.output = T2(xq.id, 0, KD_DTYPE_E4M3FN, M / 2, K);
  q.scales = T2(xs.id, 0, KD_DTYPE_F32, M / 2, 1);
  q.granularity = KD_QUANT_1X128;
  CHECK_OK(kd_quantize(c, &q, NULL, NULL));

  /* Errors: the daemon's, with the field; the library's own for a rank it cannot carry. */
  memset(&q, 0, sizeof q);
  q.input = T2(x.id, 0, KD_DTYPE_BF16, 128, 200);
  q.output = T2(xq.id, 0, KD_DTYPE_E4M3FN, 128, 200);
  q.scales = T2(xs.id, 0, KD_DTYPE_F32, 128, 2);
  q.granularity = KD_QUANT_1X128;
  CHECK(kd_quantize(c, &q, NULL, NULL) == KD_INVALID_ARGUMENT, "bad shape");
  CHECK(strstr(kd_last_error(), "input.shape[1]=200") != NULL, "message: %s", kd_last_error());
  ops[1].u.quantize.input.dtype = KD_DTYPE_I32;
  CHECK(kd_submit(c, ops, 3, NULL, NULL) == KD_INVALID_ARGUMENT, "bad dtype in a batch");
  CHECK(strncmp(kd_last_error(), "ops[1].quantize.input", 21) == 0, "message: %s", kd_last_error());
  ops[1].u.quantize.input.dtype = KD_DTYPE_BF16;
  ops[2].u.gemm.a.rank = 5;
  CHECK(kd_submit(c, ops, 3, NULL, NULL) == KD_INVALID_ARGUMENT, "rank 5");
  CHECK(strstr(kd_last_error(), "ops[2].gemm.a.rank=5") != NULL, "message: %s", kd_last_error());
  ops[2].u.gemm.a.rank = 2;
  ops[2].kind = 9;
  CHECK(kd_submit(c, ops, 3, NULL, NULL) == KD_INVALID_ARGUMENT, "unknown kind");
  ops[2].kind = KD_OP_GEMM;
  ops[2].u.gemm.d.buffer_id = 987654;
  CHECK(kd_submit(c, ops, 3, NULL, NULL) == KD_NOT_FOUND, "unknown buffer");
  CHECK(kd_submit(c, ops, 0, NULL, NULL) == KD_OK, "an empty batch is a round trip");
  CHECK(kd_last_error()[0] == '\0', "a success clears the message");

  /* Completion: ASYNC needs a signal event; the CPU backend has no IPC events. */
  kd_completion done;
  memset(&done, 0, sizeof done);
  done.mode = KD_COMPLETION_ASYNC;
  ops[2].u.gemm.d.buffer_id = d.id;
  CHECK(kd_submit(c, ops, 3, &done, NULL) == KD_INVALID_ARGUMENT, "ASYNC without a signal");
  CHECK(strstr(kd_last_error(), "signal_event") != NULL, "message: %s", kd_last_error());
  done.signal_event_size = KD_IPC_HANDLE_BYTES;
  CHECK(kd_submit(c, ops, 3, &done, NULL) == KD_FAILED_PRECONDITION, "no IPC events on cpu");
  done.signal_event_size = 65;
  CHECK(kd_submit(c, ops, 3, &done, NULL) == KD_INVALID_ARGUMENT, "oversized event");

  /* IPC memory on a daemon without a GPU backend. */
  uint8_t handle[KD_IPC_HANDLE_BYTES];
  memset(handle, 1, sizeof handle);
  uint64_t id = 0;
  CHECK(kd_register_ipc(c, KD_IPC_CUDA, handle, 0, 4096, 0, &id) == KD_FAILED_PRECONDITION,
        "ipc on cpu");
  CHECK(strstr(kd_last_error(), "no cuda backend") != NULL, "message: %s", kd_last_error());
  CHECK(kd_register_ipc(c, 7, handle, 0, 4096, 0, &id) == KD_INVALID_ARGUMENT, "ipc kind 7");

  kd_shm* shms[] = {x.shm,     w.shm,      xq.shm,    xs.shm,   xt.shm,  xts.shm, wq.shm,  ws.shm,
                    d.shm,     dx.shm,     dw.shm,    ends.shm, be.shm,  bes.shm, dwe.shm, rows.shm,
                    pends.shm, padded.shm, rends.shm, back.shm, mxs.shm, jcs.shm};
  for (size_t i = 0; i < sizeof shms / sizeof shms[0]; ++i) kd_shm_destroy(shms[i]);
}

static void TestBuffersAndRing(kd_client* c) {
  kd_allocation a;
  CHECK_OK(kd_allocate(c, 4096, NULL, 0, &a));
  /* Host pool memory has no name: it is handed out only as a descriptor (kd_allocate_shm). */
  CHECK(a.buffer_id != 0 && a.size >= 4096 && a.shm_name[0] == '\0' && a.ipc_kind == 0,
        "allocation %llu %s", (unsigned long long)a.buffer_id, a.shm_name);
  CHECK_OK(kd_release(c, a.buffer_id));
  CHECK(kd_release(c, a.buffer_id) == KD_NOT_FOUND, "released twice");
  CHECK(kd_allocate(c, 0, NULL, 0, &a) == KD_INVALID_ARGUMENT, "size 0");
  CHECK(kd_allocate(c, 64, "tpu", 0, &a) == KD_INVALID_ARGUMENT, "unknown backend");
  kd_shm* s = NULL;
  CHECK_OK(kd_allocate_shm(c, 8192, "cpu", 0, &s));
  CHECK(s != NULL && kd_shm_buffer_id(s) != 0 && kd_shm_size(s) >= 8192, "mapped allocation");
  CHECK_OK(kd_release_shm(c, s));
  CHECK(kd_shm_buffer_id(s) == 0, "id reset");
  CHECK(kd_release_shm(c, s) == KD_FAILED_PRECONDITION, "not registered");
  kd_shm_destroy(s);
  kd_shm* r = NULL;
  CHECK_OK(kd_shm_create(4096, 0600, -1, &r));
  CHECK_OK(kd_register_shm(c, r, NULL));
  CHECK(kd_register_shm(c, r, NULL) == KD_FAILED_PRECONDITION, "registered twice");
  CHECK(kd_shm_create(0, 0, -1, &s) == KD_INVALID_ARGUMENT, "shm of 0 bytes");

  uint64_t calls = 0, fallbacks = 0;
  CHECK(kd_submit_ring_info(c, &calls, &fallbacks) == 0, "no ring yet");
  kd_ring_options ro;
  kd_ring_options_init(&ro);
  CHECK(ro.slots == 8 && ro.slot_bytes == 65536, "ring defaults");
  CHECK_OK(kd_submit_ring_attach(c, &ro));
  CHECK(kd_submit_ring_attach(c, &ro) == KD_FAILED_PRECONDITION, "a second ring");
  CHECK_OK(kd_submit(c, NULL, 0, NULL, NULL));
  kd_op bad;
  memset(&bad, 0, sizeof bad);
  bad.kind = KD_OP_PAD;
  CHECK(kd_submit(c, &bad, 1, NULL, NULL) == KD_INVALID_ARGUMENT, "a bad op through the ring");
  CHECK(kd_submit_ring_info(c, &calls, &fallbacks) == 1 && calls == 2 && fallbacks == 0,
        "ring calls %llu fallbacks %llu", (unsigned long long)calls, (unsigned long long)fallbacks);
  kd_shm_destroy(r);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s KERNELD_BINARY\n", argv[0]);
    return 2;
  }
  char dir[] = "/tmp/kd_c_api.XXXXXX";
  if (mkdtemp(dir) == NULL) return 2;
  TestVersionAndErrors(dir);
  const pid_t daemon = StartDaemon(argv[1], dir);

  char target[512];
  snprintf(target, sizeof target, "%s/data.sock", dir);
  kd_client* c = NULL;
  CHECK_OK(kd_connect(target, NULL, &c));
  if (c != NULL) {
    CHECK(strncmp(kd_client_target(c), "unix:", 5) == 0, "target %s", kd_client_target(c));
    CHECK(kd_session_status(c) == KD_FAILED_PRECONDITION, "no session yet");
    CHECK(strcmp(kd_session_id(c), "") == 0, "no id yet");
    CHECK_OK(kd_session_open(c, "c_api_test", 0));
    CHECK(kd_session_open(c, "again", 0) == KD_FAILED_PRECONDITION, "a second session");
    CHECK(strlen(kd_session_id(c)) > 0, "session id");
    CHECK(strcmp(kd_session_backend(c), "cpu") == 0, "backend %s", kd_session_backend(c));
    CHECK_OK(kd_session_status(c));
    TestOps(c);
    TestBuffersAndRing(c);
    uint32_t released = 0;
    CHECK_OK(kd_session_close(c, &released));
    CHECK(released >= 22, "released %u", released);
    CHECK(kd_session_status(c) == KD_FAILED_PRECONDITION, "closed");
    CHECK(kd_quantize(c, NULL, NULL, NULL) == KD_INVALID_ARGUMENT, "NULL op");
    kd_close(c);
  }
  kill(daemon, SIGTERM);
  waitpid(daemon, NULL, 0);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
