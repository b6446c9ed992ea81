#include "transport/security.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "transport/call_guard.h"
#include "base/file_util.h"
#include "transport/grpc_server.h"
#include "base/testing/certs.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"

namespace pstrain {
namespace {

// Certificates made by deploy/make_certs.sh, as a user would: "job" is the
// job's CA and task certificate, "other" a second CA with its own.
class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* name : {"job", "other"}) ASSERT_OK(testing::MakeCerts(name).status());
  }
  static std::string Dir() { return testing::TempDir() + "/certs"; }
  static std::string Path(const std::string& name) { return Dir() + "/" + name; }
  static std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
    return Path(name);
  }
  static SecurityConfig Tls(const std::string& who, const std::string& ca_of) {
    SecurityConfig c;
    c.tls_cert = Path(who + "/cert.pem");
    c.tls_key = Path(who + "/key.pem");
    c.tls_ca = Path(ca_of + "/ca.pem");
    return c;
  }
};

TEST_F(SecurityTest, LoadsTlsAndATokenAndDescribesThem) {
  SecurityConfig c = Tls("job", "job");
  c.token_file = Path("job/token");
  ASSERT_OK_AND_ASSIGN(auto s, Security::Load(c));
  EXPECT_TRUE(s->tls());
  EXPECT_TRUE(s->has_token());
  EXPECT_EQ(s->Describe(), "mutual TLS and a cluster token");
  EXPECT_EQ(Security::None()->Describe(), "no transport security");
  SecurityConfig token_only;
  token_only.token = "  0123456789abcdef0123\n";
  ASSERT_OK_AND_ASSIGN(auto t, Security::Load(token_only));
  EXPECT_EQ(t->Describe(), "a cluster token");
}

TEST_F(SecurityTest, BadFilesAreNamedAtLoad) {
  auto message = [](const SecurityConfig& c) {
    auto s = Security::Load(c);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  };
  SecurityConfig partial;
  partial.tls_cert = Path("job/cert.pem");
  EXPECT_EQ(message(partial),
            "mutual TLS needs all of tls_cert, tls_key and tls_ca; got only tls_cert ");

  SecurityConfig missing = Tls("job", "job");
  missing.tls_ca = Path("nowhere.pem");
  EXPECT_EQ(message(missing).rfind(absl::StrCat("tls_ca ", Path("nowhere.pem"),
                                                " cannot be read"), 0),
            0u);

  SecurityConfig not_pem = Tls("job", "job");
  not_pem.tls_cert = Write("junk.pem", "not a certificate\n");
  EXPECT_EQ(message(not_pem), absl::StrCat("tls_cert ", Path("junk.pem"),
                                           " holds no PEM certificate"));

  SecurityConfig wrong_key = Tls("job", "job");
  wrong_key.tls_key = Path("other/key.pem");
  EXPECT_EQ(message(wrong_key),
            absl::StrCat("tls_key ", Path("other/key.pem"),
                         " is not the key of the certificate in ", Path("job/cert.pem")));

  SecurityConfig other_ca = Tls("job", "other");
  EXPECT_EQ(message(other_ca),
            absl::StrCat("the certificate in tls_cert ", Path("job/cert.pem"),
                         " does not verify against tls_ca ", Path("other/ca.pem"),
                         ": unable to get local issuer certificate (this job's CA, --tls_ca, did "
                         "not sign it: a task of another job?)"));

  // Signed by the job's CA, but past its end date.
  ASSERT_OK(testing::MakeExpiredCerts("job").status());
  SecurityConfig expired = Tls("job-expired", "job");
  EXPECT_EQ(message(expired),
            absl::StrCat("the certificate in tls_cert ", Path("job-expired/cert.pem"),
                         " does not verify against tls_ca ", Path("job/ca.pem"),
                         ": certificate has expired (it or its CA is past its end date: "
                         "deploy/make_certs.sh makes new ones, PSTRAIN_CERT_DAYS days long, and "
                         "keeps a CA already in its folder)"));

  SecurityConfig short_token;
  short_token.token_file = Write("short", "secret\n");
  EXPECT_EQ(message(short_token),
            absl::StrCat("the cluster token from token_file ", Path("short"),
                         " has 6 characters; use at least 16 (e.g. `openssl rand -hex 32`)"));
  SecurityConfig both;
  both.token_file = Path("job/token");
  both.token = "0123456789abcdef0123";
  EXPECT_EQ(message(both), "both a token file and PSTRAIN_TOKEN are given: use one");
}

TEST(ExposureTest, LoopbackClustersNeedNothingOthersNeedTlsATokenOrInsecure) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.8.9.10"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.2"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("127.example.com"));
  EXPECT_FALSE(IsLoopbackHost("ps-0.job.svc"));

  ClusterSpec local;
  local.ps = {{"127.0.0.1", 4000}};
  local.worker = {{"localhost", 4001}};
  EXPECT_OK(CheckExposure(local, "127.0.0.1:4000", *Security::None()));
  absl::Status s = CheckExposure(local, "0.0.0.0:4000", *Security::None());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("--bind 0.0.0.0:4000 is reachable beyond this machine"),
            std::string::npos)
      << s;

  ClusterSpec remote = local;
  remote.worker.push_back({"10.0.0.3", 2222});
  s = CheckExposure(remote, "127.0.0.1:4000", *Security::None());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message().rfind("refusing to start without transport security: worker:1 at "
                              "10.0.0.3:2222 is reachable beyond this machine",
                              0),
            0u)
      << s;
  EXPECT_NE(s.message().find("--tls_cert, --tls_key, --tls_ca"), std::string::npos);
  EXPECT_NE(s.message().find("--insecure"), std::string::npos);
  SecurityConfig token;
  token.token = "0123456789abcdef0123";
  ASSERT_OK_AND_ASSIGN(auto with_token, Security::Load(token));
  EXPECT_OK(CheckExposure(remote, "", *with_token));
  SecurityConfig insecure;
  insecure.insecure = true;
  ASSERT_OK_AND_ASSIGN(auto exposed, Security::Load(insecure));
  EXPECT_OK(CheckExposure(remote, "", *exposed));
}

// A real server whose one method admits calls through a CallGuard, as the PS
// and the chief do, and counts the calls it served.
class CountingCoordinator final : public v1::Coordinator::CallbackService {
 public:
  explicit CountingCoordinator(std::shared_ptr<const Security> s)
      : guard_(std::move(s), CallLimits()) {}
  grpc::ServerUnaryReactor* ReportDone(grpc::CallbackServerContext* ctx,
                                       const v1::ReportDoneRequest*,
                                       v1::ReportDoneResponse*) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    auto admitted = guard_.Admit(*ctx, "ReportDone");
    if (!admitted.ok()) {
      r->Finish(grpc::Status(static_cast<grpc::StatusCode>(admitted.status().code()),
                             std::string(admitted.status().message())));
      return r;
    }
    served_.fetch_add(1);
    r->Finish(grpc::Status::OK);
    return r;
  }
  int served() const { return served_.load(); }
  const CallGuard& guard() const { return guard_; }

 private:
  CallGuard guard_;
  std::atomic<int> served_{0};
};

class SecureServerTest : public SecurityTest {
 protected:
  void SetUp() override {
    SecurityConfig c = Tls("job", "job");
    c.token_file = Path("job/token");
    ASSERT_OK_AND_ASSIGN(server_security_, Security::Load(c));
    service_ = std::make_unique<CountingCoordinator>(server_security_);
    GrpcServerOptions o;
    o.address = "127.0.0.1:0";
    o.security = server_security_;
    ASSERT_OK_AND_ASSIGN(server_, GrpcServer::Create(o, {service_.get()}));
  }
  grpc::Status Call(const SecurityConfig& client) {
    auto security = Security::Load(client);
    EXPECT_OK(security.status());
    auto stub = v1::Coordinator::NewStub((*security)->CreateChannel(
        absl::StrCat("127.0.0.1:", server_->bound_port()), grpc::ChannelArguments()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ReportDoneRequest req;
    v1::ReportDoneResponse resp;
    return stub->ReportDone(&ctx, req, &resp);
  }
  std::shared_ptr<const Security> server_security_;
  std::unique_ptr<CountingCoordinator> service_;
  std::unique_ptr<GrpcServer> server_;
};

TEST_F(SecureServerTest, RightCertificateAndTokenAreServed) {
  SecurityConfig c = Tls("job", "job");
  c.token_file = Path("job/token");
  grpc::Status s = Call(c);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(service_->served(), 1);
}

TEST_F(SecureServerTest, WrongOrMissingTokenIsUnauthenticatedAndServesNothing) {
  SecurityConfig wrong = Tls("job", "job");
  wrong.token = "ffffffffffffffffffffffffffffffffffffffffffffffff";
  grpc::Status s = Call(wrong);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), "the call's cluster token is wrong");
  s = Call(Tls("job", "job"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), "the call carries no cluster token");
  EXPECT_EQ(service_->served(), 0);
  EXPECT_EQ(service_->guard().unauthenticated(), 2);
}

TEST_F(SecureServerTest, ClientOfAnotherCaOrWithoutCertificateCannotConnect) {
  // The client trusts another CA: it refuses the server's certificate.
  SecurityConfig other = Tls("other", "other");
  other.token_file = Path("job/token");
  grpc::Status s = Call(other);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("certificate verify failed"), std::string::npos)
      << s.error_message();
  // A plain client (no certificate, no TLS) against the TLS server.
  SecurityConfig plain;
  plain.token_file = Path("job/token");
  s = Call(plain);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // A TLS client that trusts the job's CA but shows no certificate of its
  // own: the server requires one. gRPC's SslCredentials sends a certificate
  // only when given both; make the handshake without one.
  auto no_cert = grpc::SslCredentials(grpc::SslCredentialsOptions{
      *ReadFile(Path("job/ca.pem")), "", ""});
  auto stub = v1::Coordinator::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server_->bound_port()), no_cert));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ReportDoneRequest req;
  v1::ReportDoneResponse resp;
  s = stub->ReportDone(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(service_->served(), 0);
}

}  // namespace
}  // namespace pstrain
