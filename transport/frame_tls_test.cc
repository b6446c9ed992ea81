// Frame sockets under TLS on loopback, with certificates made as a user makes
// them (deploy/make_certs.sh): frames arrive whole and in order both ways at
// once; a task of another job (another CA), a server under another name, a
// client without a certificate and a plaintext client are each refused with
// an error that says why; a blocked read wakes on Shutdown; a close between
// frames reads as the end of the stream.
#include "transport/frame_tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/byte_buffers.h"
#include "base/testing/certs.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/frame_socket.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// `side`'s TLS with the certificates of `job` (deploy/make_certs.sh's).
std::shared_ptr<const FrameTls> Tls(const std::string& job, FrameTls::Side side,
                                    const std::string& server_name = "") {
  SecurityConfig c = CertsDirConfig(absl::StrCat(testing::TempDir(), "/certs/", job), false);
  c.tls_server_name = server_name;
  auto security = Security::Load(c);
  EXPECT_OK(security);
  auto tls = FrameTls::Make(**security, side);
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

TEST_F(FrameTlsTest, FramesArriveWholeAndInOrderBothWaysAtOnce) {
  Handshake h = Connect(*Server("job"), Client("job").get());
  ASSERT_OK(h.server_status);
  ASSERT_OK(h.client_status);
  EXPECT_THAT(h.client->DescribeTransport(), HasSubstr("TLSv1.3 (TLS_AES_128_GCM_SHA256)"));
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
  auto listener = FrameListener::Listen("127.0.0.1", 0);
  ASSERT_OK(listener);
  const int fd = ConnectTo((*listener)->port());
  ASSERT_GE(fd, 0);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameSocket> server, (*listener)->Accept(absl::Seconds(5)));
  absl::Status served;
  std::thread serving([&] { served = server->StartTls(*tls, "", absl::Seconds(5)); });
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  X509_STORE_load_file(SSL_CTX_get_cert_store(ctx),
                       (testing::TempDir() + "/certs/job/ca.pem").c_str());
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_connect(ssl);  // TLS 1.3: done on its side before the server checks
  char byte;
  EXPECT_LE(SSL_read(ssl, &byte, 1), 0) << "the server took a client without a certificate";
  serving.join();
  EXPECT_EQ(served.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(served.message().data(), HasSubstr("peer did not return a certificate"));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
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
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameListener> listener,
                         FrameListener::Listen("127.0.0.1", 0));
    const int fd = ConnectTo(listener->port());
    ASSERT_GE(fd, 0);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<FrameSocket> server, listener->Accept(absl::Seconds(5)));
    absl::Status served;
    std::thread serving([&] { served = server->StartTls(*tls, "", absl::Seconds(5)); });
    SSL_CTX* ctx = RawContext(expired, /*server=*/false);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_connect(ssl);
    char byte;
    EXPECT_LE(SSL_read(ssl, &byte, 1), 0) << "the server took an expired certificate";
    serving.join();
    EXPECT_EQ(served.code(), absl::StatusCode::kUnavailable) << served;
    EXPECT_THAT(std::string(served.message()), HasSubstr(kExpired));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
  }
  {
    // A server showing it: the worker's side refuses it before any frame.
    const int listening = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
    ASSERT_EQ(bind(listening, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
    ASSERT_EQ(listen(listening, 1), 0);
    socklen_t len = sizeof(at);
    ASSERT_EQ(getsockname(listening, reinterpret_cast<sockaddr*>(&at), &len), 0);
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
                         FrameSocket::Connect("127.0.0.1", ntohs(at.sin_port), absl::Seconds(5)));
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

}  // namespace
}  // namespace pstrain
