// The PS's Exchange frames over plain TCP (transport/frame_socket.h), beside
// its gRPC stream: the faster data path when the job has no TLS. Each
// connection gets one thread, which reads a frame, hands it to its own
// ExchangeSession (the same frame logic as the gRPC stream), waits for the
// answer (a pull may wait for a sync step or an ssp clock) and writes it,
// then reads the next. A client pipelining frames finds the next one in the
// socket's buffer.
//
// A connection's first frame must be a hello (FrameHeader.tcp_hello) with
// the cluster token; it is admitted by the service's CallGuard like a gRPC
// stream and holds its place until it closes. A connection that sends no
// hello within 10 s, a wrong token, or a frame over the size limit is
// closed; nothing it sent reaches the store. While a pull waits, the thread
// watches the connection: a client that goes away cancels it.
// Thread-safe.
#ifndef PSTRAIN_PS_SERVER_FRAME_SERVER_H_
#define PSTRAIN_PS_SERVER_FRAME_SERVER_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "transport/call_guard.h"
#include "transport/frame_socket.h"
#include "transport/frame_tls.h"
#include "transport/wire_frame.h"
#include "ps_server/exchange_session.h"
#include "store/shard_store.h"

namespace pstrain::ps {

struct FrameServerOptions {
  // The address to bind: the host of the PS's gRPC address ("0.0.0.0" or
  // "::" for every interface); the port is picked free.
  std::string host;
  ExchangeLimits limits;
  // The largest frame read, as the gRPC server's message limit.
  int64_t max_frame_bytes = 512 << 20;
  // Connections that have not said hello yet, at most.
  int max_unadmitted = 64;
  // The job's TLS (transport/frame_tls.h): every connection's first bytes
  // are a TLS 1.3 handshake that must present a certificate of the job's
  // CA, then its frames travel inside TLS. Null: plain TCP.
  std::shared_ptr<const FrameTls> tls;
};

class FrameServer {
 public:
  // Starts listening and accepting. `store`, `guard` must outlive the
  // server. Unavailable naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<FrameServer>> Start(ShardStore* store,
                                                            std::shared_ptr<BufferPool> pool,
                                                            CallGuard* guard,
                                                            FrameServerOptions options);
  // Stops accepting, closes every connection (a waiting pull is cancelled)
  // and joins their threads.
  ~FrameServer();

  int port() const { return listener_->port(); }

 private:
  struct Connection {
    std::unique_ptr<FrameSocket> socket;
    std::thread thread;
    bool done = false;
  };

  FrameServer(ShardStore* store, std::shared_ptr<BufferPool> pool, CallGuard* guard,
              FrameServerOptions options, std::unique_ptr<FrameListener> listener);
  void AcceptLoop();
  void Serve(Connection* c);
  // Reads and checks the hello; the admission, or why not.
  absl::StatusOr<CallGuard::Admission> Hello(FrameSocket& socket);
  // Joins the threads of connections that have ended.
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ShardStore* const store_;
  const std::shared_ptr<BufferPool> pool_;
  CallGuard* const guard_;
  const FrameServerOptions options_;
  const std::unique_ptr<FrameListener> listener_;
  std::thread acceptor_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int unadmitted_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_PS_SERVER_FRAME_SERVER_H_
