// Frame sockets under TLS on loopback, with certificates made as a user makes
// them (deploy/make_certs.sh): frames arrive whole and in order both ways at
// once, with the records sealed by the kernel (where it has TLS), by
// OpenSSL's AES-GCM in the socket's records, or each end by a different
// one, or by OpenSSL's connection object (ChaCha20-Poly1305); a task of another job (another
// CA), a server under another name, a client without a certificate and a
// plaintext client are each refused with an error that says why; a blocked
// read wakes on Shutdown; a close between frames reads as the end of the
// stream; the keys handed to the kernel open the records OpenSSL seals.
//
// Where the kernel has no TLS the kernel's cases run in OpenSSL and say so
// (DescribeTransport names why). PSTRAIN_EXPECT_KERNEL_TLS=1 makes them
// fail instead, for a run on a kernel that has it (tools/kernel_tls_check.sh).
#include "transport/frame_tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/testing/byte_buffers.h"
#include "base/testing/certs.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/frame_socket.h"
#include "transport/tls_record.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// Who seals and opens one end's records: the kernel both ways (where it
// has TLS), the kernel sealing and OpenSSL opening, OpenSSL's AES-GCM in
// the socket's own records, or (an end offering ChaCha20-Poly1305 alone)
// OpenSSL's connection object, one call at a time.
enum class End { kKernel, kKernelSealsOnly, kOpenSsl, kChaCha20 };

// `side`'s TLS with the certificates of `job` (deploy/make_certs.sh's).
std::shared_ptr<const FrameTls> Tls(const std::string& job, FrameTls::Side side,
                                    const std::string& server_name = "", End end = End::kKernel) {
  SecurityConfig c = CertsDirConfig(absl::StrCat(testing::TempDir(), "/certs/", job), false);
  c.tls_server_name = server_name;
  c.kernel_tls = end != End::kOpenSsl;
  auto security = Security::Load(c);
  EXPECT_OK(security);
  auto tls = FrameTls::Make(**security, side, /*kernel_receives=*/end == End::kKernel,
                            end == End::kChaCha20 ? "TLS_CHACHA20_POLY1305_SHA256" : "");
  EXPECT_OK(tls);
  return *tls;
}
std::shared_ptr<const FrameTls> Server(const std::string& job) {
  return Tls(job, FrameTls::Side::kServer);
}
std::shared_ptr<const FrameTls> Client(const std::string& job,
                                       const std::string& server_name = "") {
  return Tls(job, FrameTls::Side::kClient, server_name);
}

// A plain TCP connection to 127.0.0.1:`port`, for a peer made with OpenSSL
// directly; -1 when it fails.
int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// A plain TCP socket listening on 127.0.0.1 at a free port (in *port), for
// a peer made with OpenSSL directly; -1 when it cannot.
int ListenOnLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
  socklen_t len = sizeof(at);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)) != 0 || listen(fd, 1) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(at.sin_port);
  return fd;
}

// A frame socket that serves TLS with `tls` on a listener of its own, and a
// plain TCP connection to it (fd()) for a peer made with OpenSSL directly;
// the server's handshake runs on a thread until Join().
class RawPeer {
 public:
  explicit RawPeer(const FrameTls& tls) {
    auto listener = FrameListener::Listen("127.0.0.1", 0);
    EXPECT_OK(listener);
    if (!listener.ok()) return;
    fd_ = ConnectTo((*listener)->port());
    EXPECT_GE(fd_, 0);
    auto server = (*listener)->Accept(absl::Seconds(5));
    EXPECT_OK(server);
    if (!server.ok()) return;
    server_ = *std::move(server);
    serving_ =
        std::thread([this, &tls] { served_ = server_->StartTls(tls, "", absl::Seconds(5)); });
  }
  ~RawPeer() {
    Join().IgnoreError();
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  FrameSocket& server() { return *server_; }
  // Waits for the server's handshake: its result.
  absl::Status Join() {
    if (serving_.joinable()) serving_.join();
    return served_;
  }

 private:
  int fd_ = -1;
  std::unique_ptr<FrameSocket> server_;
  absl::Status served_ = absl::UnknownError("no handshake");
  std::thread serving_;
};

class FrameTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* job : {"job", "other"}) ASSERT_OK(testing::MakeCerts(job).status());
  }

  // A connected pair; the server's handshake runs on a thread while the
  // client's runs here. Each side's handshake result.
  struct Handshake {
    std::unique_ptr<FrameSocket> client, server;
    absl::Status client_status, server_status;
  };
  Handshake Connect(const FrameTls& server_tls, const FrameTls* client_tls) {
    Handshake h;
    auto listener = FrameListener::Listen("127.0.0.1", 0);
    EXPECT_OK(listener);
    auto client = FrameSocket::Connect("127.0.0.1", (*listener)->port(), absl::Seconds(5));
    EXPECT_OK(client);
    h.client = *std::move(client);
    auto server = (*listener)->Accept(absl::Seconds(5));
    EXPECT_OK(server);
    h.server = *std::move(server);
    std::thread serving(
        [&] { h.server_status = h.server->StartTls(server_tls, "", absl::Seconds(5)); });
    if (client_tls != nullptr) {
      h.client_status = h.client->StartTls(*client_tls, "127.0.0.1", absl::Seconds(5));
    }
    serving.join();
    return h;
  }
};

bool ExpectKernelTls() {
  const char* expect = std::getenv("PSTRAIN_EXPECT_KERNEL_TLS");
  return expect != nullptr && std::string(expect) == "1";
}

// Checks who seals and opens `socket`'s records, as its end asked: the
// kernel as asked, or OpenSSL with the reason named.
void ExpectSealing(const FrameSocket& socket, End end) {
  const std::string transport = socket.DescribeTransport();
  if (end == End::kChaCha20) {
    EXPECT_THAT(transport, HasSubstr("TLSv1.3 (TLS_CHACHA20_POLY1305_SHA256), records sealed by "
                                     "OpenSSL's TLS connection in this process (the kernel and "
                                     "this socket seal AES-GCM, not "
                                     "TLS_CHACHA20_POLY1305_SHA256)"));
    EXPECT_FALSE(socket.kernel_tls_send());
    EXPECT_FALSE(socket.kernel_tls_receive());
    return;
  }
  EXPECT_THAT(transport, HasSubstr("TLSv1.3 (TLS_AES_128_GCM_SHA256), records sealed "));
  if (end == End::kOpenSsl) {
    EXPECT_THAT(transport, HasSubstr("sealed by OpenSSL in this process (--kernel_tls=false)"));
    EXPECT_FALSE(socket.kernel_tls_send());
    EXPECT_FALSE(socket.kernel_tls_receive());
    return;
  }
  if (end == End::kKernel && socket.kernel_tls_send() && socket.kernel_tls_receive()) {
    EXPECT_THAT(transport, HasSubstr("records sealed and opened by the kernel"));
    return;
  }
  if (end == End::kKernelSealsOnly && socket.kernel_tls_send()) {
    EXPECT_FALSE(socket.kernel_tls_receive());
    EXPECT_THAT(transport, HasSubstr("records sealed by the kernel, opened by OpenSSL in this "
                                     "process (as asked)"));
    return;
  }
  EXPECT_FALSE(ExpectKernelTls()) << "the kernel did not take the keys: " << transport;
  EXPECT_THAT(transport,
              ::testing::MatchesRegex(".*records sealed by (OpenSSL|the kernel).*\\(.+\\)"));
  std::printf("kernel TLS not used: %s\n", transport.c_str());
}

// Who seals and opens each end's records.
struct Sealing {
  End client, server;
};

const char* EndName(End end) {
  switch (end) {
    case End::kKernel:
      return "Kernel";
    case End::kKernelSealsOnly:
      return "KernelSealsOnly";
    case End::kOpenSsl:
      return "OpenSsl";
    case End::kChaCha20:
      return "ChaCha20";
  }
  return "?";
}

class FrameTlsSealingTest : public FrameTlsTest, public ::testing::WithParamInterface<Sealing> {};

INSTANTIATE_TEST_SUITE_P(
    KernelOrOpenSsl, FrameTlsSealingTest,
    ::testing::Values(Sealing{End::kKernel, End::kKernel}, Sealing{End::kOpenSsl, End::kOpenSsl},
                      Sealing{End::kKernel, End::kOpenSsl}, Sealing{End::kOpenSsl, End::kKernel},
                      Sealing{End::kKernelSealsOnly, End::kKernel},
                      Sealing{End::kKernel, End::kKernelSealsOnly},
                      Sealing{End::kChaCha20, End::kChaCha20}),
    [](const ::testing::TestParamInfo<Sealing>& p) {
      return absl::StrCat("Client", EndName(p.param.client), "Server", EndName(p.param.server));
    });

TEST_P(FrameTlsSealingTest, FramesArriveWholeAndInOrderBothWaysAtOnce) {
  const Sealing sealing = GetParam();
  Handshake h = Connect(*Tls("job", FrameTls::Side::kServer, "", sealing.server),
                        Tls("job", FrameTls::Side::kClient, "", sealing.client).get());
  ASSERT_OK(h.server_status);
  ASSERT_OK(h.client_status);
  ExpectSealing(*h.client, sealing.client);
  ExpectSealing(*h.server, sealing.server);
  EXPECT_TRUE(h.server->tls());
  // Frames of 0 bytes to 3 MiB (a multi-slice one among them), each side
  // writing on one thread while it reads on another.
  std::vector<std::string> frames = {"", "x", std::string(20000, 'a'), std::string(3 << 20, 'b')};
  for (size_t i = 0; i < frames[3].size(); i += 4093) frames[3][i] = static_cast<char>(i);
  auto write_all = [&](FrameSocket* s) {
    for (int round = 0; round < 3; ++round) {
      for (const std::string& f : frames) {
        grpc::Slice parts[2] = {grpc::Slice(f.substr(0, f.size() / 3)),
                                grpc::Slice(f.substr(f.size() / 3))};
        ASSERT_OK(s->Write(grpc::ByteBuffer(parts, 2)));
      }
    }
  };
  auto read_all = [&](FrameSocket* s) {
    std::shared_ptr<BufferPool> pool = BufferPool::Create();
    for (int round = 0; round < 3; ++round) {
      for (const std::string& f : frames) {
        ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer got, s->Read(*pool, 8 << 20));
        EXPECT_EQ(got.Valid() ? testing::Flatten(got) : "", f)
            << "frame of " << f.size() << " bytes";
      }
    }
  };
  std::thread client_writes(write_all, h.client.get());
  std::thread server_writes(write_all, h.server.get());
  std::thread client_reads(read_all, h.client.get());
  read_all(h.server.get());
  client_reads.join();
  client_writes.join();
  server_writes.join();
  // The client's close_notify (from the kernel, or OpenSSL) ends the
  // server's stream between frames.
  h.client.reset();
  std::shared_ptr<BufferPool> pool = BufferPool::Create();
  h.server->SetTimeout(absl::Seconds(5));
  absl::Status end = h.server->Read(*pool, 1 << 20).status();
  EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange) << end;
}

// Forwards a connection between its client and 127.0.0.1:`to_port`, and
// inverts the byte at `flip_at` of what the client sends (counted from its
// first byte), as a path that corrupts or tampers with a record would.
class FlippingProxy {
 public:
  FlippingProxy(int to_port, size_t flip_at) : to_port_(to_port), flip_at_(flip_at) {
    listening_ = ListenOnLoopback(&port_);
    EXPECT_GE(listening_, 0);
    forwarding_ = std::thread([this] { Forward(); });
  }
  ~FlippingProxy() {
    shutdown(listening_, SHUT_RDWR);
    for (int fd : {client_.load(), server_.load()}) {
      if (fd >= 0) shutdown(fd, SHUT_RDWR);
    }
    forwarding_.join();
    for (int fd : {listening_, client_.load(), server_.load()}) {
      if (fd >= 0) close(fd);
    }
  }
  int port() const { return port_; }

 private:
  // Copies from `from` to `to` until either ends, flipping one byte on the
  // client's side.
  void Pipe(int from, int to, bool flip) {
    char buffer[4096];
    size_t passed = 0;
    for (;;) {
      const ssize_t n = recv(from, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      if (flip && passed <= flip_at_ && flip_at_ < passed + n) {
        buffer[flip_at_ - passed] = static_cast<char>(~buffer[flip_at_ - passed]);
      }
      passed += static_cast<size_t>(n);
      if (send(to, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    shutdown(to, SHUT_WR);
  }
  void Forward() {
    const int client = accept(listening_, nullptr, nullptr);
    if (client < 0) return;
    client_ = client;
    const int server = ConnectTo(to_port_);
    if (server < 0) return;
    server_ = server;
    std::thread back([this, client, server] { Pipe(server, client, false); });
    Pipe(client, server, true);
    back.join();
  }

  const int to_port_;
  const size_t flip_at_;
  int listening_ = -1;
  int port_ = 0;
  std::atomic<int> client_{-1}, server_{-1};
  std::thread forwarding_;
};

TEST_F(FrameTlsTest, TheKernelTlsProbeSaysWhatAConnectionFinds) {
  // `pstrain describe`'s probe, against a connection made after it.
  const std::string missing = KernelTlsMissing();
  Handshake h = Connect(*Server("job"), Client("job").get());
  ASSERT_OK(h.client_status);
  ASSERT_OK(h.server_status);
  EXPECT_EQ(missing.empty(), h.client->kernel_tls_send()) << missing;
  EXPECT_EQ(missing.empty(), h.server->kernel_tls_receive()) << missing;
  if (!missing.empty()) {
    EXPECT_THAT(h.client->DescribeTransport(), HasSubstr(absl::StrCat("(", missing, ")")));
  }
  if (ExpectKernelTls()) EXPECT_EQ(missing, "");
}

TEST_F(FrameTlsTest, ATaskOfAnotherJobIsRefusedNamingTheCertificate) {
  // The client trusts another CA: the server's certificate fails its check
  // first; the server hears the client's alert.
  Handshake h = Connect(*Server("job"), Client("other").get());
  EXPECT_EQ(h.client_status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(h.client_status.message()), HasSubstr("TLS handshake with 127.0.0.1:"));
  EXPECT_THAT(std::string(h.client_status.message()),
              HasSubstr("(this job's CA, --tls_ca, did not sign it: a task of another job?)"));
  EXPECT_FALSE(h.server_status.ok());
}

TEST_F(FrameTlsTest, AServerCertificateWithoutTheNameDialledIsRefused) {
  Handshake h = Connect(*Server("job"), Client("job", "ps.other-job.example").get());
  EXPECT_THAT(h.client_status.message().data(), HasSubstr("its certificate: hostname mismatch"));
  EXPECT_FALSE(h.server_status.ok());
}

TEST_F(FrameTlsTest, AClientWithoutACertificateIsRefusedByTheServer) {
  // A client that trusts the job's CA but shows no certificate of its own
  // (made with OpenSSL directly: a task of this project always has one).
  std::shared_ptr<const FrameTls> tls = Server("job");
  RawPeer peer(*tls);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  X509_STORE_load_file(SSL_CTX_get_cert_store(ctx),
                       (testing::TempDir() + "/certs/job/ca.pem").c_str());
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, peer.fd());
  SSL_connect(ssl);  // TLS 1.3: done on its side before the server checks
  char byte;
  EXPECT_LE(SSL_read(ssl, &byte, 1), 0) << "the server took a client without a certificate";
  absl::Status served = peer.Join();
  EXPECT_EQ(served.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(served.message().data(), HasSubstr("peer did not return a certificate"));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
}

// An SSL_CTX showing the certificate and key in `dir`, made with OpenSSL
// directly: Security::Load refuses a certificate past its end date, as a
// task does at start, so this stands for one that expired while it ran.
SSL_CTX* RawContext(const std::string& dir, bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  EXPECT_EQ(SSL_CTX_use_certificate_file(ctx, (dir + "/cert.pem").c_str(), SSL_FILETYPE_PEM), 1);
  EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx, (dir + "/key.pem").c_str(), SSL_FILETYPE_PEM), 1);
  return ctx;
}

TEST_F(FrameTlsTest, ACertificatePastItsEndDateIsRefusedOnEitherSide) {
  ASSERT_OK_AND_ASSIGN(const std::string expired, testing::MakeExpiredCerts("job"));
  constexpr char kExpired[] =
      "its certificate: certificate has expired (it or its CA is past its end date: "
      "deploy/make_certs.sh makes new ones";
  {
    // A client showing it, signed by the job's CA: the server refuses it.
    std::shared_ptr<const FrameTls> tls = Server("job");
    RawPeer peer(*tls);
    SSL_CTX* ctx = RawContext(expired, /*server=*/false);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, peer.fd());
    SSL_connect(ssl);
    char byte;
    EXPECT_LE(SSL_read(ssl, &byte, 1), 0) << "the server took an expired certificate";
    absl::Status served = peer.Join();
    EXPECT_EQ(served.code(), absl::StatusCode::kUnavailable) << served;
    EXPECT_THAT(std::string(served.message()), HasSubstr(kExpired));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
  }
  {
    // A server showing it: the worker's side refuses it before any frame.
    int port = 0;
    const int listening = ListenOnLoopback(&port);
    ASSERT_GE(listening, 0);
    SSL_CTX* ctx = RawContext(expired, /*server=*/true);
    std::thread serving([&] {
      const int fd = accept(listening, nullptr, nullptr);
      SSL* ssl = SSL_new(ctx);
      SSL_set_fd(ssl, fd);
      SSL_accept(ssl);
      SSL_free(ssl);
      close(fd);
    });
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameSocket> client,
                         FrameSocket::Connect("127.0.0.1", port, absl::Seconds(5)));
    absl::Status s = client->StartTls(*Client("job"), "127.0.0.1", absl::Seconds(5));
    serving.join();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(kExpired));
    SSL_CTX_free(ctx);
    close(listening);
  }
}

TEST_F(FrameTlsTest, APlaintextClientIsRefusedByATlsServer) {
  std::shared_ptr<const FrameTls> tls = Server("job");
  auto listener = FrameListener::Listen("127.0.0.1", 0);
  ASSERT_OK(listener);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameSocket> client,
                       FrameSocket::Connect("127.0.0.1", (*listener)->port(), absl::Seconds(5)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameSocket> server, (*listener)->Accept(absl::Seconds(5)));
  absl::Status served;
  std::thread serving([&] { served = server->StartTls(*tls, "", absl::Seconds(5)); });
  // A plaintext frame where the server expects a TLS record.
  ASSERT_OK(client->WriteBytes("hello", 5));
  serving.join();
  EXPECT_EQ(served.code(), absl::StatusCode::kUnavailable) << served;
  EXPECT_THAT(served.message().data(), HasSubstr("TLS handshake with 127.0.0.1:"));
  server.reset();
  std::shared_ptr<BufferPool> pool = BufferPool::Create();
  client->SetTimeout(absl::Seconds(5));
  EXPECT_FALSE(client->Read(*pool, 1 << 20).ok()) << "a plaintext client got an answer";
}

TEST_F(FrameTlsTest, ShutdownWakesABlockedReadAndACloseBetweenFramesEndsTheStream) {
  Handshake h = Connect(*Server("job"), Client("job").get());
  ASSERT_OK(h.client_status);
  ASSERT_OK(h.server_status);
  std::shared_ptr<BufferPool> pool = BufferPool::Create();
  absl::Status woken;
  std::thread reader([&] { woken = h.server->Read(*pool, 1 << 20).status(); });
  absl::SleepFor(absl::Milliseconds(100));
  h.server->Shutdown();
  reader.join();
  EXPECT_EQ(woken.code(), absl::StatusCode::kUnavailable) << woken;

  Handshake again = Connect(*Server("job"), Client("job").get());
  ASSERT_OK(again.client_status);
  ASSERT_OK(again.client->WriteBytes("one", 3));
  again.client.reset();  // closes between frames
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer one, again.server->Read(*pool, 1 << 20));
  EXPECT_EQ(testing::Flatten(one), "one");
  EXPECT_EQ(again.server->Read(*pool, 1 << 20).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_P(FrameTlsSealingTest, ARecordChangedOnTheWayIsRefusedAndNoneOfItIsRead) {
  // A byte of the client's first frame inverted on the way: the server's
  // end (the kernel, or OpenSSL) finds the record's tag wrong and the read
  // fails saying so; not a byte of the frame comes out.
  const Sealing sealing = GetParam();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameListener> listener,
                       FrameListener::Listen("127.0.0.1", 0));
  FlippingProxy proxy(listener->port(), /*flip_at=*/20000);  // past the handshake
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameSocket> client,
                       FrameSocket::Connect("127.0.0.1", proxy.port(), absl::Seconds(5)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameSocket> server, listener->Accept(absl::Seconds(5)));
  absl::Status served;
  std::thread serving([&] {
    served = server->StartTls(*Tls("job", FrameTls::Side::kServer, "", sealing.server), "",
                              absl::Seconds(5));
  });
  ASSERT_OK(client->StartTls(*Tls("job", FrameTls::Side::kClient, "", sealing.client), "127.0.0.1",
                             absl::Seconds(5)));
  serving.join();
  ASSERT_OK(served);
  ExpectSealing(*server, sealing.server);
  const std::string frame(64 << 10, 'g');
  ASSERT_OK(client->WriteBytes(frame.data(), frame.size()));
  std::shared_ptr<BufferPool> pool = BufferPool::Create();
  server->SetTimeout(absl::Seconds(5));
  absl::StatusOr<grpc::ByteBuffer> got = server->Read(*pool, 1 << 20);
  ASSERT_FALSE(got.ok()) << "a changed record was read";
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_THAT(std::string(got.status().message()),
              ::testing::AnyOf(HasSubstr("a TLS record failed its integrity check"),
                               HasSubstr("decryption failed or bad record mac")));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("reading a frame from 127.0.0.1:"));
}

class OpenSslPeerTest : public FrameTlsTest, public ::testing::WithParamInterface<const char*> {};

INSTANTIATE_TEST_SUITE_P(Suites, OpenSslPeerTest,
                         ::testing::Values("TLS_AES_256_GCM_SHA384",
                                           "TLS_CHACHA20_POLY1305_SHA256"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param).substr(4, 11) == "AES_256_GCM" ? "Aes256"
                                                                                      : "ChaCha20";
                         });

TEST_P(OpenSslPeerTest, APeerOfOpenSslAloneTradesFramesWithAFrameSocket) {
  // A client made with OpenSSL directly that offers one suite. AES-256-GCM:
  // the server's end takes the kernel's TLS with 256-bit keys where the
  // kernel has it, else seals and opens in its own records; OpenSSL's
  // record layer is the peer of either. ChaCha20-Poly1305: the server
  // leaves its records to OpenSSL's connection, and says so.
  const std::string suite = GetParam();
  const bool aes = suite == "TLS_AES_256_GCM_SHA384";
  std::shared_ptr<const FrameTls> tls = Server("job");
  RawPeer peer(*tls);
  SSL_CTX* ctx = RawContext(testing::TempDir() + "/certs/job", /*server=*/false);
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  ASSERT_EQ(SSL_CTX_set_ciphersuites(ctx, suite.c_str()), 1);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, peer.fd());
  ASSERT_EQ(SSL_connect(ssl), 1);
  ASSERT_OK(peer.Join());
  FrameSocket* server = &peer.server();
  const std::string transport = server->DescribeTransport();
  EXPECT_THAT(transport, HasSubstr(absl::StrCat("TLSv1.3 (", suite, "), records sealed ")));
  if (!aes) {
    EXPECT_THAT(transport, HasSubstr("records sealed by OpenSSL's TLS connection in this process "
                                     "(the kernel and this socket seal AES-GCM, not "
                                     "TLS_CHACHA20_POLY1305_SHA256)"));
  } else if (ExpectKernelTls()) {
    EXPECT_TRUE(server->kernel_tls_send() && server->kernel_tls_receive()) << transport;
  } else if (!server->kernel_tls_send()) {
    EXPECT_THAT(transport, HasSubstr("records sealed by OpenSSL in this process ("));
  }
  // Frames each way, each its length (8 bytes, little-endian), then its
  // bytes: a small one, and one of many records.
  std::shared_ptr<BufferPool> pool = BufferPool::Create();
  server->SetTimeout(absl::Seconds(5));
  for (size_t size : {size_t{4}, size_t{200000}}) {
    std::string payload(size, 'p');
    for (size_t i = 0; i < size; i += 997) payload[i] = static_cast<char>(i);
    std::string frame(8, '\0');
    for (int i = 0; i < 8; ++i) frame[i] = static_cast<char>(uint64_t{size} >> (8 * i));
    frame += payload;
    ASSERT_EQ(SSL_write(ssl, frame.data(), static_cast<int>(frame.size())),
              static_cast<int>(frame.size()));
    ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer got, server->Read(*pool, 1 << 20));
    EXPECT_EQ(testing::Flatten(got), payload);
    ASSERT_OK(server->WriteBytes(payload.data(), payload.size()));
    std::string answer(frame.size(), '\0');
    size_t read = 0;
    while (read < answer.size()) {
      const int n = SSL_read(ssl, answer.data() + read, static_cast<int>(answer.size() - read));
      ASSERT_GT(n, 0);
      read += static_cast<size_t>(n);
    }
    EXPECT_EQ(answer, frame) << size;
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
}

// The lines of OpenSSL's key log for the raw connections below.
std::vector<std::string>* KeyLog() {
  static auto* lines = new std::vector<std::string>();
  return lines;
}

// The secret of `label` in the key log, as bytes.
std::string LoggedSecret(const std::string& label) {
  for (const std::string& line : *KeyLog()) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() == 3 && parts[0] == label) return absl::HexStringToBytes(parts[2]);
  }
  return "";
}

// Opens one TLS 1.3 record (header and body) sealed with `keys` as record
// number `seq`, as the kernel does with the keys a frame socket gives it:
// AES-GCM under nonce iv XOR seq, the header as additional data. The inner
// plaintext (content, then its type byte), or "" when it does not open.
std::string OpenRecord(const std::string& record, const TrafficKeys& keys, uint64_t seq) {
  if (record.size() < 5 + 16) return "";
  std::string nonce = keys.iv;
  for (int i = 0; i < 8; ++i) nonce[11 - i] = static_cast<char>(nonce[11 - i] ^ (seq >> (8 * i)));
  const std::string body = record.substr(5, record.size() - 5 - 16);
  std::string tag = record.substr(record.size() - 16);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const EVP_CIPHER* cipher = keys.key.size() == 16 ? EVP_aes_128_gcm() : EVP_aes_256_gcm();
  std::string out(body.size(), '\0');
  int len = 0, final_len = 0;
  auto u = [](const std::string& x) { return reinterpret_cast<const unsigned char*>(x.data()); };
  const bool ok =
      EVP_DecryptInit_ex(ctx, cipher, nullptr, u(keys.key), u(nonce)) == 1 &&
      EVP_DecryptUpdate(ctx, nullptr, &len, u(record), 5) == 1 &&
      EVP_DecryptUpdate(ctx, reinterpret_cast<unsigned char*>(out.data()), &len, u(body),
                        static_cast<int>(body.size())) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()) + len, &final_len) == 1;
  EVP_CIPHER_CTX_free(ctx);
  return ok ? out : "";
}

// Reads one whole TLS record from `fd`.
std::string ReadRecord(int fd) {
  std::string record(5, '\0');
  if (recv(fd, record.data(), 5, MSG_WAITALL) != 5) return "";
  const size_t body =
      (static_cast<unsigned char>(record[3]) << 8) | static_cast<unsigned char>(record[4]);
  record.resize(5 + body);
  if (recv(fd, record.data() + 5, body, MSG_WAITALL) != static_cast<ssize_t>(body)) return "";
  return record;
}

class TrafficKeysTest : public FrameTlsTest, public ::testing::WithParamInterface<const char*> {};

INSTANTIATE_TEST_SUITE_P(Suites, TrafficKeysTest,
                         ::testing::Values("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"));

TEST_P(TrafficKeysTest, TheKeysDerivedFromTheSecretsOpenTheRecordsOpenSslSeals) {
  // A connection of OpenSSL's own over a socket pair, with its key log; the
  // client's first two records read raw at the server's end.
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const std::string dir = testing::TempDir() + "/certs/job";
  SSL_CTX* server_ctx = RawContext(dir, /*server=*/true);
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  for (SSL_CTX* ctx : {server_ctx, client_ctx}) {
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    ASSERT_EQ(SSL_CTX_set_ciphersuites(ctx, GetParam()), 1);
  }
  KeyLog()->clear();
  SSL_CTX_set_keylog_callback(client_ctx,
                              [](const SSL*, const char* line) { KeyLog()->push_back(line); });
  SSL* server = SSL_new(server_ctx);
  SSL* client = SSL_new(client_ctx);
  SSL_set_fd(server, fds[0]);
  SSL_set_fd(client, fds[1]);
  std::thread serving([&] { EXPECT_EQ(SSL_accept(server), 1); });
  ASSERT_EQ(SSL_connect(client), 1);
  serving.join();
  EXPECT_STREQ(SSL_get_cipher_name(client), GetParam());

  const std::string secret = LoggedSecret("CLIENT_TRAFFIC_SECRET_0");
  ASSERT_FALSE(secret.empty());
  const int key_bytes = std::string(GetParam()) == "TLS_AES_128_GCM_SHA256" ? 16 : 32;
  ASSERT_OK_AND_ASSIGN(TrafficKeys keys, DeriveTrafficKeys(secret, key_bytes));
  EXPECT_EQ(keys.key.size(), static_cast<size_t>(key_bytes));
  EXPECT_EQ(keys.iv.size(), 12u);
  const std::string frames[2] = {"the first frame's bytes", std::string(3000, 'f')};
  for (const std::string& frame : frames) {
    ASSERT_EQ(SSL_write(client, frame.data(), static_cast<int>(frame.size())),
              static_cast<int>(frame.size()));
  }
  for (uint64_t seq = 0; seq < 2; ++seq) {
    const std::string record = ReadRecord(fds[0]);
    ASSERT_FALSE(record.empty());
    EXPECT_EQ(OpenRecord(record, keys, seq), frames[seq] + "\x17") << "record " << seq;
  }
  // The server's keys are not the client's.
  ASSERT_OK_AND_ASSIGN(TrafficKeys other,
                       DeriveTrafficKeys(LoggedSecret("SERVER_TRAFFIC_SECRET_0"), key_bytes));
  EXPECT_NE(other.key, keys.key);

  // This process's records and OpenSSL's read each other's. The server has
  // read none of the client's records above: what a RecordSealer seals
  // with the client's keys from sequence 0, OpenSSL's server reads; what
  // OpenSSL's server sends, a RecordOpener with its keys opens (after any
  // session tickets it sent first).
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RecordSealer> sealer, RecordSealer::Make(keys));
  const std::string big(40000, 'q');
  const iovec pieces[2] = {{const_cast<char*>(frames[0].data()), frames[0].size()},
                           {const_cast<char*>(big.data()), kTlsMaxRecordData - frames[0].size()}};
  std::string sealed(SealedRecordBytes(kTlsMaxRecordData), '\0');
  ASSERT_OK_AND_ASSIGN(
      size_t n, sealer->Seal(kTlsApplicationData, pieces, 2, kTlsMaxRecordData, sealed.data()));
  ASSERT_EQ(send(fds[1], sealed.data(), n, 0), static_cast<ssize_t>(n));
  std::string read_back(kTlsMaxRecordData, '\0');
  size_t got = 0;
  while (got < read_back.size()) {
    const int r =
        SSL_read(server, read_back.data() + got, static_cast<int>(read_back.size() - got));
    ASSERT_GT(r, 0);
    got += static_cast<size_t>(r);
  }
  EXPECT_EQ(read_back, frames[0] + big.substr(0, kTlsMaxRecordData - frames[0].size()));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RecordOpener> opener, RecordOpener::Make(other));
  ASSERT_EQ(SSL_write(server, big.data(), static_cast<int>(big.size())),
            static_cast<int>(big.size()));
  std::string opened, spill(kTlsMaxRecordData, '\0');
  for (int records = 0; records < 8 && opened.size() < big.size(); ++records) {
    const std::string record = ReadRecord(fds[1]);
    ASSERT_FALSE(record.empty());
    std::string into(kTlsMaxRecordData, '\0');
    iovec dst{into.data(), into.size()};
    ASSERT_OK_AND_ASSIGN(RecordOpener::Opened o,
                         opener->Open(record.data(), record.size(), &dst, 1, spill.data()));
    if (o.type != kTlsApplicationData) continue;  // a session ticket
    opened += into.substr(0, o.placed) + spill.substr(0, o.spilled);
  }
  EXPECT_EQ(opened, big);

  EXPECT_EQ(DeriveTrafficKeys("short", 16).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeriveTrafficKeys(secret, 24).status().code(), absl::StatusCode::kInvalidArgument);
  SSL_free(client);
  SSL_free(server);
  SSL_CTX_free(client_ctx);
  SSL_CTX_free(server_ctx);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace pstrain
