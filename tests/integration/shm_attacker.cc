// A hostile client process for the host-memory tests: it tries to make the daemon reach memory
// it may not reach itself, and prints each answer as "RESULT\t<attack>\t<code>\t<message>".
//
//   --uid/--gid           drop to this user and group first (as root)
//   --names               shm names to register by name (RegisterBuffer.shm_name) and to attach
//                         as a ring by name (AttachSubmitRing.shm_name), over gRPC
//   --victim_session      a session id of another user's process (as if it leaked): the fd
//                         socket's calls and a by-name registration are tried on it
//   --daemon_pid          every descriptor of the daemon this process can open through
//                         /proc/<pid>/fd is sent over the fd socket to be registered
// Last, as a control, a memfd of its own is registered ("own_memfd", which must succeed).
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/fd_channel.h"
#include "kerneld/client/client.h"
#include "kerneld/client/status.h"
#include "proto/kerneld/v1/submit_ring.h"

ABSL_FLAG(std::string, socket, "", "data socket of the daemon");
ABSL_FLAG(int, uid, -1, "user to become first (as root)");
ABSL_FLAG(int, gid, -1, "group to become first (as root)");
ABSL_FLAG(std::string, names, "", "comma-separated shm names to try by name");
ABSL_FLAG(std::string, victim_session, "", "another user's session id");
ABSL_FLAG(int, daemon_pid, 0, "the daemon's pid, for /proc/<pid>/fd");

namespace {

namespace v1 = ::kerneld::v1;
using kd::client::Client;
using kd::client::internal::FdChannel;

void Print(const std::string& attack, const absl::Status& s) {
  std::printf("RESULT\t%s\t%d\t%s\n", attack.c_str(), static_cast<int>(s.code()),
              std::string(s.message()).c_str());
  std::fflush(stdout);
}

absl::Status FdCall(FdChannel& channel, const v1::FdRequest& request, int fd) {
  absl::StatusOr<FdChannel::Result> r = channel.Call(request, fd, absl::Seconds(10));
  if (r.ok() && r->fd >= 0) close(r->fd);
  return r.status();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_gid) >= 0) {
    const gid_t gid = absl::GetFlag(FLAGS_gid);
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0) {
      std::perror("setgid");
      return 2;
    }
  }
  if (absl::GetFlag(FLAGS_uid) >= 0 && setuid(absl::GetFlag(FLAGS_uid)) != 0) {
    std::perror("setuid");
    return 2;
  }
  const std::string socket = absl::GetFlag(FLAGS_socket);
  auto client = Client::Connect(socket);
  if (!client.ok()) {
    std::fprintf(stderr, "shm_attacker: %s\n", client.status().ToString().c_str());
    return 1;
  }
  Client& c = **client;
  if (absl::Status s = c.OpenSession("attacker"); !s.ok()) {
    std::fprintf(stderr, "shm_attacker: %s\n", s.ToString().c_str());
    return 1;
  }
  FdChannel fd_socket(kd::client::internal::FdSocketPathFor(c.target()));
  const uint64_t ring_bytes = kd::submit_ring::RingBytes(2, 4096);

  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_names), ',', absl::SkipEmpty())) {
    Print(absl::StrCat("register:", name), c.RegisterShm(name, 4096).status());
    v1::AttachSubmitRingRequest ring;
    ring.set_session_id(c.session_id());
    ring.set_shm_name(std::string(name));
    ring.set_size(ring_bytes);
    v1::AttachSubmitRingResponse response;
    grpc::ClientContext context;
    Print(absl::StrCat("ring:", name),
          kd::client::FromGrpcStatus(c.stub()->AttachSubmitRing(&context, ring, &response)));
  }

  const std::string victim = absl::GetFlag(FLAGS_victim_session);
  if (!victim.empty()) {
    absl::StatusOr<kd::client::ShmBuffer> own = kd::client::ShmBuffer::Create(4096);
    if (!own.ok()) return 1;
    for (const auto& [label, id] : std::vector<std::pair<std::string, std::string>>{
             {"victim", victim}, {"unknown", std::string(32, '0')}}) {
      v1::FdRequest reg;
      reg.mutable_register_buffer()->set_session_id(id);
      reg.mutable_register_buffer()->set_attached_fd(true);
      reg.mutable_register_buffer()->set_size(4096);
      Print(absl::StrCat(label, "_fd_register"), FdCall(fd_socket, reg, own->fd()));
      v1::FdRequest alloc;
      alloc.mutable_allocate_buffer()->set_session_id(id);
      alloc.mutable_allocate_buffer()->set_size(4096);
      Print(absl::StrCat(label, "_fd_allocate"), FdCall(fd_socket, alloc, -1));
    }
    for (absl::string_view name :
         absl::StrSplit(absl::GetFlag(FLAGS_names), ',', absl::SkipEmpty())) {
      v1::RegisterBufferRequest req;
      req.set_session_id(victim);
      req.set_shm_name(std::string(name));
      req.set_size(4096);
      v1::RegisterBufferResponse resp;
      grpc::ClientContext context;
      Print(absl::StrCat("victim_register:", name),
            kd::client::FromGrpcStatus(c.stub()->RegisterBuffer(&context, req, &resp)));
    }
  }

  if (const int pid = absl::GetFlag(FLAGS_daemon_pid); pid > 0) {
    std::error_code ec;
    int listed = 0, opened = 0;
    for (const auto& entry :
         std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec)) {
      ++listed;
      const int fd = open(entry.path().c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) continue;
      ++opened;
      v1::FdRequest reg;
      reg.mutable_register_buffer()->set_session_id(c.session_id());
      reg.mutable_register_buffer()->set_attached_fd(true);
      reg.mutable_register_buffer()->set_size(1);
      std::error_code link_ec;
      const std::string target = std::filesystem::read_symlink(entry.path(), link_ec).string();
      Print(absl::StrCat("procfd:", entry.path().filename().string(), ":", target),
            FdCall(fd_socket, reg, fd));
      close(fd);
    }
    std::printf("PROCFD\t%d\t%d\n", listed, opened);
    std::fflush(stdout);
  }

  absl::StatusOr<kd::client::ShmBuffer> control = kd::client::ShmBuffer::Create(4096);
  Print("own_memfd", control.ok() ? c.RegisterBuffer(*control).status() : control.status());
  std::printf("DONE\n");
  return 0;
}
