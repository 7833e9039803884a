// Test support: a real daemon on temporary sockets, raw gRPC stubs, and POSIX shm objects.
#ifndef KERNELD_TESTS_SUPPORT_TEST_DAEMON_H_
#define KERNELD_TESTS_SUPPORT_TEST_DAEMON_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "server/daemon.h"

namespace kd {
namespace testing {

namespace v1 = ::kerneld::v1;

// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A POSIX shm object created by the test (the trainer's side), unlinked on destruction.
class ShmObject {
 public:
  explicit ShmObject(size_t size);
  ~ShmObject();
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;
  const std::string& name() const { return name_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  std::string name_;
  size_t size_;
  void* data_;
};

// An open session: the OpenSession stream stays open while this object lives; destroying it
// cancels the stream, which ends the session.
struct OpenSession {
  OpenSession() = default;
  OpenSession(OpenSession&&) = default;
  OpenSession& operator=(OpenSession&&) = default;
  ~OpenSession() {
    if (context) context->TryCancel();
  }
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> stream;
  std::string id;
};

// An in-process daemon with the CPU backend on temporary sockets. The metrics endpoint (on a free
// port) is started only when `with_metrics`: civetweb takes 2 s to stop.
class TestDaemon {
 public:
  explicit TestDaemon(DaemonOptions overrides = DaemonOptions(), bool customise = false,
                      bool with_metrics = false);
  ~TestDaemon();

  Daemon& daemon() { return *daemon_; }
  v1::DataPlane::Stub& data() { return *data_; }
  v1::Admin::Stub& admin() { return *admin_; }
  // An Admin stub on the *data* socket (what a trainer reaches).
  v1::Admin::Stub& admin_on_data_socket() { return *admin_on_data_; }
  const std::string& data_socket() const { return options_.data_socket; }

  OpenSession Open(const std::string& client_name = "test", uint32_t lease_seconds = 0);
  // Registers `shm` in `session`; fails the test on error.
  uint64_t Register(const OpenSession& session, const ShmObject& shm);

 private:
  TempDir dir_;
  DaemonOptions options_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::DataPlane::Stub> data_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<v1::Admin::Stub> admin_on_data_;
};

// A TensorRef.
v1::TensorRef Ref(uint64_t buffer_id, v1::DType dtype, std::initializer_list<int64_t> shape,
                  uint64_t byte_offset = 0, std::initializer_list<int64_t> strides = {});

// Fetches http://address/metrics with a plain HTTP/1.0 request; returns the body.
std::string HttpGet(const std::string& address, const std::string& path);
// The value of the first sample whose line starts with `series` (name plus label set as printed,
// e.g. `kerneld_rpc_requests_total{code="OK",method="Quantize"}`); 0 when absent.
double MetricValue(const std::string& exposition, const std::string& series);

// bf16 bits of a float (round to nearest even).
uint16_t ToBF16(float f);

}  // namespace testing
}  // namespace kd

#endif  // KERNELD_TESTS_SUPPORT_TEST_DAEMON_H_
