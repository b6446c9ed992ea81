// The PS behind mutual TLS and a cluster token, with small limits, over real
// gRPC on loopback: what a client without the token, without a certificate,
// or past a limit gets back, and that none of it changes the stored values.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cluster/placement.h"
#include "transport/security.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/testing/byte_buffers.h"
#include "base/testing/certs.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps_server/testing/local_ps.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "client/ps_stream.h"
#include "gmock/gmock.h"
#include "transport/frame_socket.h"
#include "transport/frame_tls.h"
#include "transport/wire_frame.h"

namespace pstrain {
namespace {

using client::PsClient;
using client::PsClientOptions;

class PsSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* name : {"job", "other"}) ASSERT_OK(testing::MakeCerts(name).status());
  }
  static SecurityConfig Config(bool tls, bool token) {
    const std::string dir = testing::TempDir() + "/certs/job";
    SecurityConfig c;
    if (tls) c = CertsDirConfig(dir, /*token=*/false);
    if (token) c.token_file = dir + "/token";
    return c;
  }
  // A task of another job: its own CA's certificate, this job's token.
  static SecurityConfig Stranger() {
    SecurityConfig c = CertsDirConfig(testing::TempDir() + "/certs/other", /*token=*/false);
    c.token_file = Config(false, true).token_file;
    return c;
  }

  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(security_, Security::Load(Config(true, true)));
    ps::PsServiceOptions options;
    options.security = security_;
    options.calls.max_calls_per_client = 4;
    options.max_tensors_per_request = 8;
    options.max_ids_per_request = 100;
    ASSERT_OK_AND_ASSIGN(ps_, ps::testing::LocalPs::Start(1, options, 1 << 20));
    VariableDef emb{"emb", {1000, 4}};
    emb.embedding = true;
    ASSERT_OK_AND_ASSIGN(placement_, ComputePlacement({{"w", {100}}, emb}, 1));
    init_.resize(100);
    for (int i = 0; i < 100; ++i) init_[i] = static_cast<float>(i);
    client_ = Client(security_);
    client::CreateOptions create;
    create.optimizer = {"sgd", 1.0f};
    ASSERT_OK(client::PsAdmin(&client_->control()).CreateVariables(placement_, init_, {0}, create).status());
  }

  std::unique_ptr<client::PsClient> Client(std::shared_ptr<const Security> security) {
    client::PsClientOptions o;
    o.ps_addresses = ps_->addresses();
    o.rpc_deadline = absl::Seconds(5);
    o.security = std::move(security);
    auto c = client::PsClient::Create(o, placement_);
    EXPECT_OK(c.status());
    return *std::move(c);
  }

  // A channel of its own (its own connection: a distinct channel argument
  // keeps gRPC from sharing another channel's).
  std::shared_ptr<grpc::Channel> Channel(const Security& security) {
    grpc::ChannelArguments args;
    args.SetInt("pstrain.test_channel", ++channels_);
    return security.CreateChannel(ps_->addresses()[0].ToString(), args);
  }

  void ExpectUntouched() {
    std::vector<float> now(100);
    ASSERT_OK(client_->PullAll(now.data(), {0}).status());
    EXPECT_EQ(now, init_);
    EXPECT_EQ(ps_->store(0).global_step(), 0);
  }

  std::shared_ptr<const Security> security_;
  std::unique_ptr<ps::testing::LocalPs> ps_;
  Placement placement_;
  std::vector<float> init_;
  std::unique_ptr<client::PsClient> client_;
  int channels_ = 0;
};

TEST_F(PsSecurityTest, EveryMethodRefusesCallsWithoutTheRightToken) {
  SecurityConfig wrong_config = Config(true, false);
  wrong_config.token = "not-the-cluster-token-0123456789";
  ASSERT_OK_AND_ASSIGN(auto wrong, Security::Load(wrong_config));
  ASSERT_OK_AND_ASSIGN(auto none, Security::Load(Config(true, false)));
  int calls = 0;
  for (const auto& [who, security] :
       {std::pair<const char*, std::shared_ptr<const Security>>{"wrong token", wrong},
        {"no token", none}}) {
    const std::string expected = security->has_token() ? "the call's cluster token is wrong"
                                                       : "the call carries no cluster token";
    auto channel = Channel(*security);
    const auto* service = v1::Frame::descriptor()->file()->FindServiceByName("PsService");
    ASSERT_NE(service, nullptr);
    for (int m = 0; m < service->method_count(); ++m) {
      const auto* method = service->method(m);
      const std::string path = absl::StrCat("/", service->full_name(), "/", method->name());
      SCOPED_TRACE(absl::StrCat(who, ": ", path));
      ++calls;
      if (method->client_streaming()) {
        client::PsStream stream(channel, "ps:0", path);
        v1::FrameHeader h;
        h.add_push()->set_key("w/part_0");
        std::vector<float> g(100, 1.0f);
        absl::Status s = stream.Call(
            h, {grpc::Slice(reinterpret_cast<const char*>(g.data()), g.size() * 4)},
            absl::Seconds(5), [](const DecodedFrame&) { return absl::OkStatus(); });
        EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
        EXPECT_NE(s.message().find(expected), std::string::npos) << s;
        continue;
      }
      // Unary: an empty request is a valid one of every request type
      // (Shutdown would stop the PS, CreateVariables would fail on content).
      grpc::GenericStub stub(channel);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      grpc::Slice nothing("", 0);
      grpc::ByteBuffer request(&nothing, 1), response;
      grpc::Status status;
      absl::Notification done;
      stub.UnaryCall(&ctx, path, grpc::StubOptions(), &request, &response,
                     [&](grpc::Status s) {
                       status = std::move(s);
                       done.Notify();
                     });
      done.WaitForNotification();
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
      EXPECT_EQ(status.error_message(), expected);
    }
  }
  ExpectUntouched();
  ASSERT_OK_AND_ASSIGN(auto stats, client_->Stats());
  EXPECT_EQ(stats[0].refused_unauthenticated(), calls);
  EXPECT_EQ(calls, 2 * 8);
}

TEST_F(PsSecurityTest, ClientsWithoutTheJobsCertificateCannotReachThePs) {
  // Right token, but a certificate of another CA (the PS refuses it and the
  // client refuses the PS's), or no TLS at all.
  ASSERT_OK_AND_ASSIGN(auto stranger, Security::Load(Stranger()));
  ASSERT_OK_AND_ASSIGN(auto plain, Security::Load(Config(false, true)));
  {
    // What a task of another CA logs while it waits for the PS.
    auto client = Client(stranger);
    absl::Status s = client->WaitUntilReady(absl::Seconds(1), false);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("with mutual TLS this is also how a refused handshake looks"),
              std::string::npos)
        << s;
  }
  for (const auto& security : {stranger, plain}) {
    auto client = Client(security);
    auto health = client->Health(0, absl::Seconds(3));
    EXPECT_EQ(health.status().code(), absl::StatusCode::kUnavailable) << health.status();
    std::vector<float> g(100, 1.0f);
    absl::Status s = client->PushAll(g.data(), {0});
    EXPECT_FALSE(s.ok());
  }
  ExpectUntouched();
}

// The PS's frame port under TLS: a plaintext client, a task of another CA
// and a hello without the token are each refused and change nothing; the
// job's own client exchanges frames inside TLS and its push applies once.
TEST_F(PsSecurityTest, TheFramePortTakesOnlyTlsWithTheJobsCertificatesAndTheToken) {
  const int port = ps_->frame_port(0);
  ASSERT_GT(port, 0) << "a PS with TLS offers no frame port";
  std::shared_ptr<BufferPool> pool = BufferPool::Create();
  auto hello_answer = [&](FrameSocket& socket, const std::string& token) -> absl::Status {
    v1::FrameHeader hello;
    hello.set_tcp_hello(true);
    hello.set_tcp_token(token);
    PSTRAIN_RETURN_IF_ERROR(socket.Write(EncodeFrame(hello, {})));
    PSTRAIN_ASSIGN_OR_RETURN(grpc::ByteBuffer answer, socket.Read(*pool, 1 << 20));
    DecodedFrame frame;
    PSTRAIN_RETURN_IF_ERROR(frame.Parse(answer));
    return absl::Status(static_cast<absl::StatusCode>(frame.header().code()),
                        frame.header().message());
  };
  {
    // Plaintext: the hello is no TLS record; the PS closes without a word.
    ASSERT_OK_AND_ASSIGN(auto plain, FrameSocket::Connect("127.0.0.1", port, absl::Seconds(5)));
    plain->SetTimeout(absl::Seconds(10));
    absl::Status s = hello_answer(*plain, security_->token());
    EXPECT_TRUE(s.code() == absl::StatusCode::kOutOfRange ||
                s.code() == absl::StatusCode::kUnavailable)
        << s;
  }
  {
    // Another job's CA: this side already refuses the PS's certificate.
    ASSERT_OK_AND_ASSIGN(auto stranger, Security::Load(Stranger()));
    ASSERT_OK_AND_ASSIGN(auto tls, FrameTls::Make(*stranger, FrameTls::Side::kClient));
    ASSERT_OK_AND_ASSIGN(auto socket, FrameSocket::Connect("127.0.0.1", port, absl::Seconds(5)));
    absl::Status s = socket->StartTls(*tls, "127.0.0.1", absl::Seconds(5));
    EXPECT_THAT(std::string(s.message()),
                ::testing::HasSubstr("its certificate: self-signed certificate in certificate chain "
                                     "(this job's CA, --tls_ca, did not sign it"));
  }
  ASSERT_OK_AND_ASSIGN(auto tls, FrameTls::Make(*security_, FrameTls::Side::kClient));
  {
    // The job's certificates, but no token in the hello.
    ASSERT_OK_AND_ASSIGN(auto socket, FrameSocket::Connect("127.0.0.1", port, absl::Seconds(5)));
    ASSERT_OK(socket->StartTls(*tls, "127.0.0.1", absl::Seconds(5)));
    absl::Status s = hello_answer(*socket, "");
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("no cluster token"));
  }
  ExpectUntouched();
  // The job's client: its frames go over the port inside TLS, and its one
  // push of 1s at SGD 1.0 moves every value by exactly -1.
  std::vector<float> g(100, 1.0f), now(100);
  ASSERT_OK(client_->PushPullAll(g.data(), now.data(), {0}).status());
  EXPECT_TRUE(client_->frames_over_tcp(0));
  EXPECT_TRUE(client_->frames_over_tls(0));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(now[i], init_[i] - 1.0f) << i;
  EXPECT_EQ(ps_->store(0).global_step(), 1);
}

// A certificate signed by the job's CA but past its end date (one that
// expired while its task ran: a task refuses it at start) reaches neither
// the gRPC port nor the frame port, and nothing it sent is applied.
TEST_F(PsSecurityTest, ACertificatePastItsEndDateReachesNeitherPort) {
  ASSERT_OK_AND_ASSIGN(const std::string expired, testing::MakeExpiredCerts("job"));
  const std::string dir = testing::TempDir() + "/certs/job";
  std::vector<float> g(100, 1.0f);
  v1::FrameHeader push;
  push.set_request_id(5);
  push.add_push()->set_key("w/part_0");
  {
    grpc::SslCredentialsOptions o;
    ASSERT_OK_AND_ASSIGN(o.pem_root_certs, ReadFile(dir + "/ca.pem"));
    ASSERT_OK_AND_ASSIGN(o.pem_cert_chain, ReadFile(expired + "/cert.pem"));
    ASSERT_OK_AND_ASSIGN(o.pem_private_key, ReadFile(expired + "/key.pem"));
    grpc::ChannelArguments args;
    args.SetInt("pstrain.test_channel", ++channels_);
    auto channel =
        grpc::CreateCustomChannel(ps_->addresses()[0].ToString(), grpc::SslCredentials(o), args);
    client::PsStream stream(channel, "ps:0", "/pstrain.v1.PsService/Exchange");
    absl::Status s =
        stream.Call(push, {grpc::Slice(reinterpret_cast<const char*>(g.data()), g.size() * 4)},
                    absl::Seconds(3), [](const DecodedFrame&) { return absl::OkStatus(); });
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  }
  {
    // The frame port, through OpenSSL directly: the hello with the token
    // and a push go out in the handshake's wake, and the PS answers
    // neither.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(ps_->frame_port(0)));
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    ASSERT_EQ(SSL_CTX_use_certificate_file(ctx, (expired + "/cert.pem").c_str(), SSL_FILETYPE_PEM),
              1);
    ASSERT_EQ(SSL_CTX_use_PrivateKey_file(ctx, (expired + "/key.pem").c_str(), SSL_FILETYPE_PEM),
              1);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_connect(ssl);  // TLS 1.3: done on this side before the PS checks
    v1::FrameHeader hello;
    hello.set_tcp_hello(true);
    hello.set_tcp_token(security_->token());
    std::string bytes;
    for (const grpc::ByteBuffer& frame :
         {EncodeFrame(hello, {}), EncodeFrame(push, {BorrowSlice(g.data(), g.size() * 4)})}) {
      const std::string body = testing::Flatten(frame);
      for (int i = 0; i < 8; ++i) {  // the frame's length, then the frame
        bytes.push_back(static_cast<char>(uint64_t{body.size()} >> (8 * i)));
      }
      bytes += body;
    }
    SSL_write(ssl, bytes.data(), static_cast<int>(bytes.size()));
    char byte;
    EXPECT_LE(SSL_read(ssl, &byte, 1), 0) << "the PS answered a task with an expired certificate";
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
  }
  ExpectUntouched();
}

TEST_F(PsSecurityTest, RequestsPastALimitGetResourceExhaustedNamingItAndChangeNothing) {
  auto channel = Channel(*security_);
  auto call = [&](client::PsStream& stream, const v1::FrameHeader& h, std::string payload) {
    return stream.Call(h, {grpc::Slice(payload)}, absl::Seconds(5),
                       [](const DecodedFrame&) { return absl::OkStatus(); });
  };
  absl::Status s;
  {
  client::PsStream stream(channel, "ps:0");
  v1::FrameHeader many;
  for (int i = 0; i < 9; ++i) many.add_pull()->set_key("w/part_0");
  s = call(stream, many, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), "ps:0: Exchange: the frame names 9 tensors; the limit is 8 per "
                         "request (--max_tensors_per_request)");
  v1::FrameHeader ids;
  v1::TensorRef* r = ids.add_pull();
  r->set_key("emb");
  for (int i = 0; i < 101; ++i) r->add_ids(i);
  s = call(stream, ids, "");
  EXPECT_EQ(s.message(), "ps:0: Exchange: the frame names 101 table ids; the limit is 100 per "
                         "request (--max_ids_per_request)");
  v1::FrameHeader big;
  big.add_push()->set_key("w/part_0");
  s = call(stream, big, std::string(2 << 20, '\0'));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("larger than max"), std::string::npos) << s;
  }

  // Streams held open on one connection: the fifth is refused.
  std::vector<std::unique_ptr<client::PsStream>> open;
  v1::FrameHeader ping;
  for (int i = 0; i < 4; ++i) {
    // The streams of the block above may not all have been closed on the
    // PS yet: a refusal then is theirs, and the next attempt gets through.
    absl::Status opened;
    for (int attempt = 0; attempt < 50; ++attempt) {
      open.push_back(std::make_unique<client::PsStream>(channel, "ps:0"));
      opened = call(*open.back(), ping, "");
      if (opened.ok()) break;
      open.pop_back();
      absl::SleepFor(absl::Milliseconds(20));
    }
    ASSERT_OK(opened);
  }
  client::PsStream fifth(channel, "ps:0");
  s = call(fifth, ping, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find(" already has 4 calls in flight, the limit per client "
                             "(--max_calls_per_client)"),
            std::string::npos)
      << s;
  // Other connections are not held back by it.
  ExpectUntouched();
  open.clear();
  // Once they close, the connection may open streams again.
  client::PsStream again(channel, "ps:0");
  absl::Status later;
  for (int attempt = 0; attempt < 50; ++attempt) {
    later = call(again, ping, "");
    if (later.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_OK(later);
  ASSERT_OK_AND_ASSIGN(auto stats, client_->Stats());
  EXPECT_GE(stats[0].refused_over_limit(), 1);
}

}  // namespace
}  // namespace pstrain
