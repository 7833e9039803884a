#include "server/connection_acceptor.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "grpcpp/server_posix.h"
#include "server/log.h"

namespace kd {

ConnectionAcceptor::ConnectionAcceptor(PeerTable* peers)
    : peers_(peers), buffer_(new char[kMaxFdMessageBytes]) {}

ConnectionAcceptor::~ConnectionAcceptor() { Stop(); }

void ConnectionAcceptor::AddGrpcListener(int listen_fd, grpc::Server* server) {
  listeners_[listen_fd].server = server;
}

void ConnectionAcceptor::AddFdListener(int listen_fd, FdHandler handler, size_t max_connections) {
  Listener& l = listeners_[listen_fd];
  l.handler = std::move(handler);
  l.max_connections = max_connections;
}

absl::Status ConnectionAcceptor::Start() {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid()) {
    return absl::InternalError(absl::StrCat("epoll/eventfd: ", std::strerror(errno)));
  }
  std::vector<int> fds = {wake_.get()};
  for (const auto& [fd, l] : listeners_) fds.push_back(fd);
  for (int fd : fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
    }
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void ConnectionAcceptor::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(wake_.get(), &one, sizeof(one)) < 0) {
      // An eventfd write fails only on overflow, which a second write cannot cause.
    }
    thread_.join();
  }
  connections_.clear();
  fd_connection_count_.store(0);
}

void ConnectionAcceptor::Loop() {
  epoll_event events[64];
  for (;;) {
    const int n = epoll_wait(epoll_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      Log("acceptor: epoll_wait: %s", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_.get()) return;
      if (auto l = listeners_.find(fd); l != listeners_.end()) {
        Accept(fd, l->second);
        continue;
      }
      auto c = connections_.find(fd);
      if (c == connections_.end()) continue;
      if (!Serve(c->second)) {
        connections_.erase(c);  // closes it (and drops it from the epoll set)
        fd_connection_count_.fetch_sub(1);
      }
    }
  }
}

void ConnectionAcceptor::Accept(int listen_fd, const Listener& listener) {
  for (;;) {
    UniqueFd conn(accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!conn.valid()) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: the connection waits in the backlog; do not spin on it.
        Log("acceptor: accept: %s", std::strerror(errno));
        usleep(10000);
      }
      return;  // EAGAIN: none left; anything else: the peer went away before we took it
    }
    absl::StatusOr<PeerCredentials> peer = ReadPeerCredentials(conn.get());
    if (!peer.ok()) continue;  // closes it
    if (listener.server != nullptr) {
      // Recorded before gRPC reads a byte of it: every call on it finds these credentials.
      peers_->Set(conn.get(), *peer);
      grpc::AddInsecureChannelFromFd(listener.server, conn.release());
      continue;
    }
    if (fd_connection_count_.load() >= listener.max_connections) continue;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = conn.get();
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conn.get(), &ev) != 0) continue;
    FdConnection& c = connections_[conn.get()];
    c.peer = *std::move(peer);
    c.listener = &listener;
    c.fd = std::move(conn);
    fd_connection_count_.fetch_add(1);
  }
}

bool ConnectionAcceptor::Serve(FdConnection& connection) {
  constexpr int kMaxFds = 4;  // room to see (and close) a few extra descriptors
  for (;;) {
    iovec iov{buffer_.get(), kMaxFdMessageBytes};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(connection.fd.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (n == 0) {
      // Either the peer closed its end or it sent an empty message (an empty FdRequest).
      pollfd p{connection.fd.get(), POLLRDHUP, 0};
      if (poll(&p, 1, 0) != 0) return false;
    }
    std::vector<UniqueFd> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.emplace_back(fd);
      }
    }
    absl::Status unusable;
    if (msg.msg_flags & MSG_TRUNC) {
      unusable = absl::ResourceExhaustedError(
          absl::StrCat("the fd-socket message is larger than ", kMaxFdMessageBytes, " bytes"));
    } else if ((msg.msg_flags & MSG_CTRUNC) || fds.size() > 1) {
      unusable = absl::InvalidArgumentError("an fd-socket message carries at most one descriptor");
    }
    UniqueFd fd;
    if (unusable.ok() && fds.size() == 1) fd = std::move(fds[0]);
    fds.clear();  // every other descriptor is closed now
    FdReply reply = connection.listener->handler(
        connection.peer, absl::string_view(buffer_.get(), unusable.ok() ? n : 0), std::move(fd),
        unusable);
    iovec out{reply.bytes.data(), reply.bytes.size()};
    alignas(cmsghdr) char out_control[CMSG_SPACE(sizeof(int))];
    msghdr out_msg{};
    out_msg.msg_iov = &out;
    out_msg.msg_iovlen = 1;
    if (reply.fd.valid()) {
      std::memset(out_control, 0, sizeof(out_control));
      out_msg.msg_control = out_control;
      out_msg.msg_controllen = sizeof(out_control);
      cmsghdr* c = CMSG_FIRSTHDR(&out_msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      const int send_fd = reply.fd.get();
      std::memcpy(CMSG_DATA(c), &send_fd, sizeof(int));
    }
    if (sendmsg(connection.fd.get(), &out_msg, MSG_DONTWAIT | MSG_NOSIGNAL) !=
        static_cast<ssize_t>(reply.bytes.size())) {
      return false;  // the peer went away, or does not read its replies
    }
  }
}

}  // namespace kd
