// The autotune admin plane against a real in-process daemon: Tune streams progress and stores
// what it chose, a GEMM miss is recorded and tunable with from_misses, the cache survives a
// restart, export/import/pin/unpin/clear behave, and a trainer's socket is refused.
#include <unistd.h>

#include <memory>

#include "gtest/gtest.h"
#include "kerneld/kernels/autotune.h"
#include "kerneld/kernels/cpu_backend.h"
#include "tests/support/test_daemon.h"
#include "tests/support/wait.h"

namespace kd {
namespace testing {
namespace {

DaemonOptions WithCache(const std::string& dir) {
  DaemonOptions o;
  o.autotune.cache_dir = dir;
  o.autotune.tune.warmup = 1;
  o.autotune.tune.repeats = 5;
  return o;
}

v1::TuneShape Shape(int64_t m, int64_t n, int64_t k) {
  v1::TuneShape s;
  s.set_op("gemm");
  s.set_variant(v1::GEMM_NT);
  s.set_m(m);
  s.set_n(n);
  s.set_k(k);
  return s;
}

std::vector<v1::TuneProgress> RunTune(TestDaemon& d, const v1::TuneRequest& req,
                                      grpc::Status* status) {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::TuneProgress>> reader = d.admin().Tune(&ctx, req);
  std::vector<v1::TuneProgress> out;
  v1::TuneProgress p;
  while (reader->Read(&p)) out.push_back(p);
  *status = reader->Finish();
  return out;
}

v1::ListCacheResponse List(TestDaemon& d) {
  grpc::ClientContext ctx;
  v1::ListCacheResponse resp;
  EXPECT_TRUE(d.admin().ListCache(&ctx, v1::ListCacheRequest(), &resp).ok());
  return resp;
}

TEST(AutotuneAdminTest, TuneStreamsProgressStoresTheChoiceAndSurvivesARestart) {
  TempDir cache_dir;
  std::string key, config;
  {
    TestDaemon d(WithCache(cache_dir.path()), /*customise=*/true);
    v1::TuneRequest req;
    *req.add_shapes() = Shape(64, 256, 256);
    *req.add_shapes() = Shape(32, 128, 128);
    grpc::Status status;
    const std::vector<v1::TuneProgress> progress = RunTune(d, req, &status);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(progress.size(), 3u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(progress[i].index(), i);
      EXPECT_EQ(progress[i].total(), 2);
      EXPECT_EQ(progress[i].error(), "");
      EXPECT_GT(progress[i].default_seconds(), 0);
      EXPECT_GT(progress[i].tuned_seconds(), 0);
      EXPECT_EQ(progress[i].shape().m(), i == 0 ? 64 : 32);
      EXPECT_TRUE(ParseCpuGemmConfig(progress[i].config()).ok()) << progress[i].config();
      // Every candidate's correctness run, warm-up and 5 timed runs, the default's at least.
      const v1::TuneTimeline& t = progress[i].timeline();
      EXPECT_GE(t.kernel_runs(), 7u);
      EXPECT_EQ(t.budget_seconds(), 0);
      EXPECT_GT(t.last_run_start_seconds(), 0);
      EXPECT_LE(t.last_run_start_seconds(), t.last_run_end_seconds());
      EXPECT_LE(t.last_run_end_seconds(), t.end_seconds());
    }
    EXPECT_TRUE(progress[2].done());
    EXPECT_FALSE(progress[2].has_timeline());
    const v1::ListCacheResponse list = List(d);
    ASSERT_EQ(list.entries_size(), 2);
    EXPECT_EQ(list.path().rfind(cache_dir.path(), 0), 0u) << list.path();
    EXPECT_EQ(access(list.path().c_str(), F_OK), 0);
    key = list.entries(0).key();
    config = list.entries(0).config();
  }
  TestDaemon restarted(WithCache(cache_dir.path()), /*customise=*/true);
  const v1::ListCacheResponse list = List(restarted);
  ASSERT_EQ(list.entries_size(), 2);
  EXPECT_EQ(list.entries(0).key(), key);
  EXPECT_EQ(list.entries(0).config(), config);
}

TEST(AutotuneAdminTest, AGemmMissIsRecordedAndTunedFromMisses) {
  TestDaemon d(WithCache(""), /*customise=*/true);
  ShmObject shm(1 << 20);
  OpenSession session = d.Open("tune");
  const uint64_t buf = d.Register(session, shm);
  v1::GemmRequest r;
  r.set_session_id(session.id);
  v1::GemmOp* op = r.mutable_op();
  op->set_variant(v1::GEMM_NT);
  *op->mutable_a() = Ref(buf, v1::DTYPE_E4M3FN, {4, 256}, 0);
  *op->mutable_a_scales() = Ref(buf, v1::DTYPE_F32, {4, 2}, 512 << 10);
  *op->mutable_b() = Ref(buf, v1::DTYPE_E4M3FN, {8, 256}, 768 << 10);
  *op->mutable_b_scales() = Ref(buf, v1::DTYPE_F32, {1, 2}, (512 << 10) + 4096);
  *op->mutable_d() = Ref(buf, v1::DTYPE_BF16, {4, 8}, 256 << 10);
  {
    grpc::ClientContext ctx;
    v1::OpResponse resp;
    ASSERT_TRUE(d.data().Gemm(&ctx, r, &resp).ok());
  }
  EXPECT_EQ(List(d).entries_size(), 0);  // a miss runs the default; nothing waits for tuning

  v1::TuneRequest req;
  req.set_from_misses(true);
  grpc::Status status;
  const std::vector<v1::TuneProgress> progress = RunTune(d, req, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress[0].shape().m(), 4);
  EXPECT_EQ(progress[0].shape().n(), 8);
  EXPECT_EQ(progress[0].shape().k(), 256);
  EXPECT_EQ(progress[0].error(), "");
  const v1::ListCacheResponse list = List(d);
  ASSERT_EQ(list.entries_size(), 1);
  // The next GEMM of that shape is served from the cache, and still computes.
  grpc::ClientContext ctx;
  v1::OpResponse resp;
  EXPECT_TRUE(d.data().Gemm(&ctx, r, &resp).ok());
}

TEST(AutotuneAdminTest, BackgroundTuningServesTheTunedConfigWhenReady) {
  DaemonOptions options = WithCache("");
  options.autotune.background = true;
  TestDaemon d(options, /*customise=*/true);
  ShmObject shm(1 << 20);
  OpenSession session = d.Open("background");
  const uint64_t buf = d.Register(session, shm);
  v1::GemmRequest r;
  r.set_session_id(session.id);
  v1::GemmOp* op = r.mutable_op();
  op->set_variant(v1::GEMM_NT);
  *op->mutable_a() = Ref(buf, v1::DTYPE_E4M3FN, {8, 128}, 0);
  *op->mutable_a_scales() = Ref(buf, v1::DTYPE_F32, {8, 1}, 512 << 10);
  *op->mutable_b() = Ref(buf, v1::DTYPE_E4M3FN, {16, 128}, 768 << 10);
  *op->mutable_b_scales() = Ref(buf, v1::DTYPE_F32, {1, 1}, (512 << 10) + 4096);
  *op->mutable_d() = Ref(buf, v1::DTYPE_BF16, {8, 16}, 256 << 10);
  grpc::ClientContext ctx;
  v1::OpResponse resp;
  ASSERT_TRUE(d.data().Gemm(&ctx, r, &resp).ok());  // the miss runs the default at once
  // The background tuner stores the key once it is tuned.
  ASSERT_TRUE(WaitFor([&] { return List(d).entries_size() != 0; }));
  ASSERT_EQ(List(d).entries_size(), 1);
  EXPECT_NE(List(d).entries(0).key().find(":m8:n16:k128:"), std::string::npos);
}

TEST(AutotuneAdminTest, BadTuneRequestsFailWithTheirCode) {
  TestDaemon d(WithCache(""), /*customise=*/true);
  grpc::Status status;
  RunTune(d, v1::TuneRequest(), &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::TuneRequest req;
  *req.add_shapes() = Shape(64, 256, 256);
  req.set_backend("tpu");
  RunTune(d, req, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  req.set_backend("");
  req.mutable_shapes(0)->set_op("pad");
  RunTune(d, req, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A shape the CPU cannot tune fails on its own line; the call succeeds.
  req.mutable_shapes(0)->set_op("gemm");
  req.mutable_shapes(0)->set_variant(v1::GEMM_NN);
  const std::vector<v1::TuneProgress> progress = RunTune(d, req, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_NE(progress[0].error().find("NOT_FOUND"), std::string::npos) << progress[0].error();
}

TEST(AutotuneAdminTest, PinUnpinClearExportImport) {
  TestDaemon d(WithCache(""), /*customise=*/true);
  v1::TuneRequest req;
  *req.add_shapes() = Shape(16, 128, 128);
  grpc::Status status;
  RunTune(d, req, &status);
  ASSERT_TRUE(status.ok());
  const std::string key = List(d).entries(0).key();

  {
    grpc::ClientContext ctx;
    v1::PinCacheRequest pin;
    pin.set_key(key);
    pin.set_config("tn16");
    v1::PinCacheResponse resp;
    ASSERT_TRUE(d.admin().PinCache(&ctx, pin, &resp).ok());
  }
  EXPECT_TRUE(List(d).entries(0).pinned());
  EXPECT_EQ(List(d).entries(0).config(), "tn16");
  // Retuning leaves the pin alone and says so.
  const std::vector<v1::TuneProgress> progress = RunTune(d, req, &status);
  ASSERT_TRUE(status.ok());
  EXPECT_NE(progress[0].error().find("pinned"), std::string::npos) << progress[0].error();

  std::string exported;
  {
    grpc::ClientContext ctx;
    v1::ExportCacheResponse resp;
    ASSERT_TRUE(d.admin().ExportCache(&ctx, v1::ExportCacheRequest(), &resp).ok());
    exported = resp.file();
  }
  {
    grpc::ClientContext ctx;
    v1::ClearCacheRequest clear;
    v1::ClearCacheResponse resp;
    ASSERT_TRUE(d.admin().ClearCache(&ctx, clear, &resp).ok());
    EXPECT_EQ(resp.removed(), 0u);  // pinned entries stay unless asked
    grpc::ClientContext ctx2;
    clear.set_include_pinned(true);
    ASSERT_TRUE(d.admin().ClearCache(&ctx2, clear, &resp).ok());
    EXPECT_EQ(resp.removed(), 1u);
  }
  {
    grpc::ClientContext ctx;
    v1::ImportCacheRequest imp;
    imp.set_file(exported);
    v1::ImportCacheResponse resp;
    ASSERT_TRUE(d.admin().ImportCache(&ctx, imp, &resp).ok());
    EXPECT_EQ(resp.imported(), 1u);
    EXPECT_EQ(List(d).entries(0).config(), "tn16");
    grpc::ClientContext ctx2;
    imp.set_file("garbage");
    EXPECT_EQ(d.admin().ImportCache(&ctx2, imp, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::UnpinCacheRequest unpin;
    unpin.set_key(key);
    v1::UnpinCacheResponse resp;
    ASSERT_TRUE(d.admin().UnpinCache(&ctx, unpin, &resp).ok());
    EXPECT_FALSE(List(d).entries(0).pinned());
    grpc::ClientContext ctx2;
    unpin.set_key("not a key");
    EXPECT_EQ(d.admin().UnpinCache(&ctx2, unpin, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    grpc::ClientContext ctx3;
    unpin.set_key("gemm:nt:e4m3fn.e4m3fn>bf16:m1:n1:k128:g1:sm_90:v1:NVIDIA H100");
    EXPECT_EQ(d.admin().UnpinCache(&ctx3, unpin, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

TEST(AutotuneAdminTest, CacheAndTuneRpcsAreRefusedOnTheDataSocket) {
  TestDaemon d(WithCache(""), /*customise=*/true);
  grpc::ClientContext ctx;
  v1::ListCacheResponse list;
  EXPECT_EQ(d.admin_on_data_socket().ListCache(&ctx, v1::ListCacheRequest(), &list).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext ctx2;
  v1::PinCacheResponse pin;
  EXPECT_EQ(d.admin_on_data_socket().PinCache(&ctx2, v1::PinCacheRequest(), &pin).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext ctx3;
  v1::TuneRequest req;
  *req.add_shapes() = Shape(16, 128, 128);
  auto reader = d.admin_on_data_socket().Tune(&ctx3, req);
  v1::TuneProgress p;
  EXPECT_FALSE(reader->Read(&p));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace testing
}  // namespace kd
