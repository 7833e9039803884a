// The daemon's accept loop for its Unix sockets: one thread, epoll.
//
// gRPC does not tell a handler which process calls it, so the daemon accepts the data and admin
// sockets' connections itself: it reads each peer's credentials (SO_PEERCRED, SO_PEERGROUPS),
// records them in a PeerTable under the connection's descriptor and only then hands the
// connection to gRPC (AddInsecureChannelFromFd), whose calls on it carry the peer string
// "fd:<n>". The same thread serves the fd socket (FdRequest in kerneld.proto): SOCK_SEQPACKET
// messages of at most kMaxFdMessageBytes with at most one descriptor each, each answered before
// the next is read. It never blocks on a peer: a reply that does not fit in the peer's socket
// buffer disconnects that peer.
#ifndef KERNELD_SERVER_CONNECTION_ACCEPTOR_H_
#define KERNELD_SERVER_CONNECTION_ACCEPTOR_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server.h"
#include "server/peer.h"
#include "server/unique_fd.h"

namespace kd {

// The largest fd-socket message (request or reply).
inline constexpr size_t kMaxFdMessageBytes = 64 << 10;

class ConnectionAcceptor {
 public:
  struct FdReply {
    std::string bytes;  // the serialized reply
    UniqueFd fd;        // sent with it when valid
  };
  // Answers one fd-socket message from `peer`: `request` holds its bytes and `fd` the descriptor
  // that came with it (invalid when none), or `unusable` says why the message cannot be read
  // (larger than kMaxFdMessageBytes, more than one descriptor). Runs on the acceptor's thread.
  using FdHandler = std::function<FdReply(const PeerCredentials& peer, absl::string_view request,
                                          UniqueFd fd, const absl::Status& unusable)>;

  explicit ConnectionAcceptor(PeerTable* peers);
  ~ConnectionAcceptor();  // Stop()
  ConnectionAcceptor(const ConnectionAcceptor&) = delete;
  ConnectionAcceptor& operator=(const ConnectionAcceptor&) = delete;

  // Before Start. The listeners stay the caller's; `server` must be started and outlive Stop().
  void AddGrpcListener(int listen_fd, grpc::Server* server);
  // At most `max_connections` fd-socket connections are open at once; more are closed on accept.
  void AddFdListener(int listen_fd, FdHandler handler, size_t max_connections);

  absl::Status Start();
  // Stops accepting, closes every fd-socket connection and joins the thread. Connections handed
  // to gRPC are gRPC's. Idempotent.
  void Stop();

  // Open fd-socket connections (for tests and status).
  size_t fd_connections() const { return fd_connection_count_.load(); }

 private:
  struct Listener {
    grpc::Server* server = nullptr;  // set: hand connections to this gRPC server
    FdHandler handler;               // else: fd-socket connections
    size_t max_connections = 0;
  };
  struct FdConnection {
    UniqueFd fd;
    PeerCredentials peer;
    const Listener* listener = nullptr;
  };

  void Loop();
  void Accept(int listen_fd, const Listener& listener);
  // Serves what `fd` has to read; returns false when the connection is to be closed.
  bool Serve(FdConnection& connection);

  PeerTable* const peers_;
  std::map<int, Listener> listeners_;
  std::map<int, FdConnection> connections_;  // the loop's thread only
  std::atomic<size_t> fd_connection_count_{0};
  UniqueFd epoll_;
  UniqueFd wake_;  // an eventfd that Stop() signals
  std::unique_ptr<char[]> buffer_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace kd

#endif  // KERNELD_SERVER_CONNECTION_ACCEPTOR_H_
