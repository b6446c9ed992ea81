#include "transport/security.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace pstrain {
namespace {

constexpr char kBearer[] = "Bearer ";

absl::StatusOr<std::string> ReadNamed(const std::string& path, const char* what) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " cannot be read: ", text.status().message()));
  }
  return text;
}

// Never prompts for a pass phrase: an encrypted key is refused.
int NoPassword(char*, int, int, void*) { return 0; }

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no detail";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct StoreDeleter {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxDeleter {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct StackDeleter {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;

std::vector<X509Ptr> ReadCertificates(const std::string& pem) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, NoPassword, nullptr)) {
    certs.emplace_back(x);
  }
  ERR_clear_error();  // the end of the file reads as an error
  return certs;
}

// The certificate chain in `cert_pem` belongs to the key and verifies
// against the CA certificates in `ca_pem`.
absl::Status CheckTlsFiles(const SecurityConfig& c, const std::string& cert_pem,
                           const std::string& key_pem, const std::string& ca_pem) {
  std::vector<X509Ptr> chain = ReadCertificates(cert_pem);
  if (chain.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls_cert ", c.tls_cert, " holds no PEM certificate"));
  }
  std::vector<X509Ptr> cas = ReadCertificates(ca_pem);
  if (cas.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls_ca ", c.tls_ca, " holds no PEM certificate"));
  }
  std::unique_ptr<BIO, BioDeleter> key_bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  std::unique_ptr<EVP_PKEY, KeyDeleter> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassword, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tls_key ", c.tls_key, " holds no unencrypted PEM private key (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(chain[0].get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("tls_key ", c.tls_key, " is not the key of the certificate in ", c.tls_cert));
  }
  std::unique_ptr<X509_STORE, StoreDeleter> store(X509_STORE_new());
  for (const X509Ptr& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<STACK_OF(X509), StackDeleter> untrusted(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) {
    X509_up_ref(chain[i].get());
    sk_X509_push(untrusted.get(), chain[i].get());
  }
  std::unique_ptr<X509_STORE_CTX, StoreCtxDeleter> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), chain[0].get(), untrusted.get());
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "the certificate in tls_cert ", c.tls_cert, " does not verify against tls_ca ", c.tls_ca,
        ": ", X509_verify_cert_error_string(err), CertificateErrorHint(err, "")));
  }
  return absl::OkStatus();
}

// Adds the token to every call's initial metadata.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* value) : value_(value) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kTokenMetadataKey, *value_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const value_;
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string value) : value_(std::move(value)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&value_);
  }

 private:
  const std::string value_;
};

}  // namespace

std::string CertificateErrorHint(long err, const std::string& name) {
  switch (err) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return absl::StrCat(" (it does not name ", name,
                          ": deploy/make_certs.sh OUT HOST names a host, --tls_server_name sets "
                          "the name checked)");
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return " (this job's CA, --tls_ca, did not sign it: a task of another job?)";
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return " (it or its CA is past its end date: deploy/make_certs.sh makes new ones, "
             "PSTRAIN_CERT_DAYS days long, and keeps a CA already in its folder)";
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return " (it is before its start date: is this host's clock right?)";
    default:
      return "";
  }
}

SecurityConfig CertsDirConfig(const std::string& dir, bool token) {
  SecurityConfig c;
  c.tls_cert = dir + "/cert.pem";
  c.tls_key = dir + "/key.pem";
  c.tls_ca = dir + "/ca.pem";
  if (token) c.token_file = dir + "/token";
  return c;
}

absl::StatusOr<std::shared_ptr<const Security>> Security::Load(const SecurityConfig& c) {
  std::shared_ptr<Security> s(new Security());
  s->insecure_ = c.insecure;
  s->kernel_tls_ = c.kernel_tls;
  const int given = !c.tls_cert.empty() + !c.tls_key.empty() + !c.tls_ca.empty();
  if (given != 0 && given != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("mutual TLS needs all of tls_cert, tls_key and tls_ca; got only ",
                     c.tls_cert.empty() ? "" : "tls_cert ", c.tls_key.empty() ? "" : "tls_key ",
                     c.tls_ca.empty() ? "" : "tls_ca"));
  }
  if (given == 3) {
    PSTRAIN_ASSIGN_OR_RETURN(s->cert_pem_, ReadNamed(c.tls_cert, "tls_cert"));
    PSTRAIN_ASSIGN_OR_RETURN(s->key_pem_, ReadNamed(c.tls_key, "tls_key"));
    PSTRAIN_ASSIGN_OR_RETURN(s->ca_pem_, ReadNamed(c.tls_ca, "tls_ca"));
    PSTRAIN_RETURN_IF_ERROR(CheckTlsFiles(c, s->cert_pem_, s->key_pem_, s->ca_pem_));
    s->server_name_ = c.tls_server_name;
  } else if (!c.tls_server_name.empty()) {
    return absl::InvalidArgumentError("tls_server_name is given without tls_cert, tls_key, tls_ca");
  }
  if (!c.token_file.empty() && !c.token.empty()) {
    return absl::InvalidArgumentError("both a token file and PSTRAIN_TOKEN are given: use one");
  }
  std::string token = c.token;
  const char* from = "PSTRAIN_TOKEN";
  std::string named_from = from;
  if (!c.token_file.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(token, ReadNamed(c.token_file, "token_file"));
    named_from = absl::StrCat("token_file ", c.token_file);
  }
  token = std::string(absl::StripAsciiWhitespace(token));
  if ((!c.token_file.empty() || !c.token.empty()) &&
      static_cast<int>(token.size()) < kMinTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the cluster token from ", named_from, " has ", token.size(), " characters; use at least ",
        kMinTokenLength, " (e.g. `openssl rand -hex 32`)"));
  }
  for (char ch : token) {
    if (ch < 0x21 || ch > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("the cluster token from ", named_from,
                       " holds a character that is not printable ASCII (or a space)"));
    }
  }
  s->token_ = std::move(token);
  return std::shared_ptr<const Security>(std::move(s));
}

std::shared_ptr<const Security> Security::None() {
  static const std::shared_ptr<const Security> none(new Security());
  return none;
}

std::string Security::Describe() const {
  if (tls() && has_token()) return "mutual TLS and a cluster token";
  if (tls()) return "mutual TLS";
  if (has_token()) return "a cluster token";
  return "no transport security";
}

std::shared_ptr<grpc::ServerCredentials> Security::ServerCredentials() const {
  if (!tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = ca_pem_;
  o.pem_key_cert_pairs.push_back({key_pem_, cert_pem_});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::Channel> Security::CreateChannel(const std::string& target,
                                                       grpc::ChannelArguments args) const {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (tls()) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ca_pem_;
    o.pem_private_key = key_pem_;
    o.pem_cert_chain = cert_pem_;
    creds = grpc::SslCredentials(o);
    if (!server_name_.empty()) args.SetSslTargetNameOverride(server_name_);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  if (!has_token()) return grpc::CreateCustomChannel(target, creds, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> f;
  f.push_back(std::make_unique<TokenInterceptorFactory>(absl::StrCat(kBearer, token_)));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args, std::move(f));
}

absl::Status Security::Authenticate(const grpc::ServerContextBase& ctx) const {
  if (!has_token()) return absl::OkStatus();
  const auto& md = ctx.client_metadata();
  auto it = md.find(kTokenMetadataKey);
  if (it == md.end()) {
    return absl::UnauthenticatedError("the call carries no cluster token");
  }
  const absl::string_view got(it->second.data(), it->second.size());
  if (!absl::StartsWith(got, kBearer)) {
    return absl::UnauthenticatedError("the call's cluster token is wrong");
  }
  return CheckToken(got.substr(strlen(kBearer)));
}

absl::Status Security::CheckToken(absl::string_view got) const {
  if (!has_token()) return absl::OkStatus();
  if (got.empty()) return absl::UnauthenticatedError("the call carries no cluster token");
  // Constant time in the token's contents; the length is not secret.
  if (got.size() != token_.size() || CRYPTO_memcmp(got.data(), token_.data(), token_.size()) != 0) {
    return absl::UnauthenticatedError("the call's cluster token is wrong");
  }
  return absl::OkStatus();
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost") || host == "::1") return true;
  std::vector<absl::string_view> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4) return false;
  for (absl::string_view p : parts) {
    int v = 0;
    if (p.empty() || !absl::SimpleAtoi(p, &v) || v < 0 || v > 255) return false;
  }
  return parts[0] == "127";
}

absl::Status CheckExposure(const ClusterSpec& cluster, const std::string& bind,
                           const Security& security) {
  if (security.tls() || security.has_token() || security.insecure()) return absl::OkStatus();
  std::string exposed;
  for (Role role : {Role::kChief, Role::kPs, Role::kWorker, Role::kEvaluator}) {
    for (int i = 0; i < cluster.Count(role) && exposed.empty(); ++i) {
      const HostPort& a = cluster.Address(role, i);
      if (!IsLoopbackHost(a.host)) {
        exposed = absl::StrCat(TaskId{role, i}.ToString(), " at ", a.ToString());
      }
    }
  }
  if (exposed.empty() && !bind.empty()) {
    auto b = ParseHostPort(bind, "--bind");
    if (b.ok() && !IsLoopbackHost(b->host)) exposed = absl::StrCat("--bind ", bind);
  }
  if (exposed.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to start without transport security: ", exposed,
      " is reachable beyond this machine, and anyone who reaches a port could read or "
      "change the model. Configure mutual TLS (--tls_cert, --tls_key, --tls_ca), a cluster "
      "token (--token_file FILE or the PSTRAIN_TOKEN environment variable), or both, the same "
      "for every task; or pass --insecure to run without"));
}

}  // namespace pstrain
