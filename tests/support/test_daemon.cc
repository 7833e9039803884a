#include "tests/support/test_daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/fp8.h"

namespace kd {
namespace testing {

TempDir::TempDir() {
  char tmpl[] = "/tmp/kerneld-test-XXXXXX";
  path_ = mkdtemp(tmpl);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ShmObject::ShmObject(size_t size) : size_(size) {
  static std::atomic<int> counter{0};
  std::random_device rd;
  name_ = absl::StrCat("/kerneld-test.", getpid(), ".", counter++, ".", rd());
  const int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, size) != 0) std::abort();
  data_ = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (data_ == MAP_FAILED) std::abort();
}

ShmObject::~ShmObject() {
  munmap(data_, size_);
  shm_unlink(name_.c_str());
}

TestDaemon::TestDaemon(DaemonOptions overrides, bool customise, bool with_metrics)
    : options_(customise ? std::move(overrides) : DaemonOptions()) {
  options_.data_socket = dir_.path() + "/data.sock";
  options_.admin_socket = dir_.path() + "/admin.sock";
  options_.metrics_address = with_metrics ? "127.0.0.1:0" : "";
  options_.backends.preferred = "cpu";
  options_.backends.cpu_threads = 2;
  daemon_ = std::make_unique<Daemon>(options_);
  const absl::Status s = daemon_->Start();
  if (!s.ok()) {
    ADD_FAILURE() << "daemon did not start: " << s;
    std::abort();
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto data = grpc::CreateCustomChannel("unix:" + options_.data_socket,
                                        grpc::InsecureChannelCredentials(), args);
  auto admin =
      grpc::CreateChannel("unix:" + options_.admin_socket, grpc::InsecureChannelCredentials());
  data_ = v1::DataPlane::NewStub(data);
  admin_ = v1::Admin::NewStub(admin);
  admin_on_data_ = v1::Admin::NewStub(data);
}

TestDaemon::~TestDaemon() { daemon_->Shutdown(absl::Seconds(2)); }

OpenSession TestDaemon::Open(const std::string& client_name, uint32_t lease_seconds) {
  OpenSession s;
  s.context = std::make_unique<grpc::ClientContext>();
  v1::OpenSessionRequest req;
  req.set_client_name(client_name);
  req.set_lease_seconds(lease_seconds);
  s.stream = data_->OpenSession(s.context.get(), req);
  v1::SessionEvent first;
  EXPECT_TRUE(s.stream->Read(&first)) << "OpenSession gave no first message";
  s.id = first.session_id();
  return s;
}

uint64_t TestDaemon::Register(const OpenSession& session, const ShmObject& shm) {
  grpc::ClientContext ctx;
  v1::RegisterBufferRequest req;
  req.set_session_id(session.id);
  req.set_shm_name(shm.name());
  req.set_size(shm.size());
  v1::RegisterBufferResponse resp;
  const grpc::Status s = data_->RegisterBuffer(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp.buffer_id();
}

v1::TensorRef Ref(uint64_t buffer_id, v1::DType dtype, std::initializer_list<int64_t> shape,
                  uint64_t byte_offset, std::initializer_list<int64_t> strides) {
  v1::TensorRef r;
  r.set_buffer_id(buffer_id);
  r.set_dtype(dtype);
  r.set_byte_offset(byte_offset);
  for (int64_t d : shape) r.add_shape(d);
  for (int64_t s : strides) r.add_strides(s);
  return r;
}

std::string HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  const std::string host = address.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port)) return "";
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, "\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "";
  }
  std::string resp;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) resp.append(buf, n);
  close(fd);
  const size_t body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

double MetricValue(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (absl::StartsWith(line, series) && line.size() > series.size() &&
        line[series.size()] == ' ') {
      double v = 0;
      if (absl::SimpleAtod(line.substr(series.size() + 1), &v)) return v;
    }
  }
  return 0;
}

uint16_t ToBF16(float f) { return fp8::FloatToBF16(f); }

}  // namespace testing
}  // namespace kd
