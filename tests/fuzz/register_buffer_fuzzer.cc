// Fuzzes buffer registration as a trainer reaches it: RegisterBuffer requests (shm names, sizes,
// IPC handle kinds, bytes, offsets and devices) sent over the data socket to an in-process
// daemon with the CPU backend. A request without a session id gets the fuzzer's open session;
// one that registers is released again. The shm object /kd_fuzz_register (64 KiB) exists for
// the run, so that names can also reach a successful mapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "server/daemon.h"

namespace kd {
namespace {

namespace v1 = ::kerneld::v1;

constexpr char kShmName[] = "/kd_fuzz_register";

struct Fixture {
  Fixture() {
    char tmpl[] = "/tmp/kd_fuzz_XXXXXX";
    dir = mkdtemp(tmpl);
    const int fd = shm_open(kShmName, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 64 << 10) != 0) std::abort();
    close(fd);
    std::atexit([] { shm_unlink(kShmName); });
    DaemonOptions o;
    o.data_socket = dir + "/kerneld.sock";
    o.admin_socket = dir + "/admin.sock";
    o.metrics_address = "";
    o.backends.preferred = "cpu";
    o.backends.cpu_threads = 1;
    daemon = std::make_unique<Daemon>(o);
    if (!daemon->Start().ok()) std::abort();
    auto channel = grpc::CreateChannel("unix:" + o.data_socket, grpc::InsecureChannelCredentials());
    stub = v1::DataPlane::NewStub(channel);
    session_context = std::make_unique<grpc::ClientContext>();
    v1::OpenSessionRequest open;
    open.set_client_name("fuzz");
    session_stream = stub->OpenSession(session_context.get(), open);
    v1::SessionEvent first;
    if (!session_stream->Read(&first)) std::abort();
    session_id = first.session_id();
  }
  std::string dir;
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<v1::DataPlane::Stub> stub;
  std::unique_ptr<grpc::ClientContext> session_context;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> session_stream;
  std::string session_id;
};

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace kd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kd;
  static Fixture* f = new Fixture();  // never destroyed: the daemon outlives every input
  v1::RegisterBufferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (request.session_id().empty()) request.set_session_id(f->session_id);
  grpc::ClientContext context;
  SetDeadline(context);
  v1::RegisterBufferResponse response;
  const grpc::Status status = f->stub->RegisterBuffer(&context, request, &response);
  // Every outcome is a status: a dead daemon or a broken call is the finding.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    std::abort();
  }
  if (status.ok()) {
    grpc::ClientContext release_context;
    SetDeadline(release_context);
    v1::ReleaseBufferRequest release;
    release.set_session_id(request.session_id());
    release.set_buffer_id(response.buffer_id());
    v1::ReleaseBufferResponse released;
    f->stub->ReleaseBuffer(&release_context, release, &released);
  }
  return 0;
}
