// Transport security of a job: mutual TLS from PEM files and a cluster token.
//
// Every task of a job is given the same CA, its own (or a shared) certificate
// and key, and the same token. Servers then accept only TLS connections whose
// client certificate the CA signed, and every call must carry the token
// (metadata "authorization: Bearer <token>"); clients verify the server's
// certificate against the CA and the address they dial (or tls_server_name)
// and attach the token to every call. Either part may be used alone.
//
// Load checks the files before anything listens or dials, so a wrong path, a
// key that is not the certificate's, or a certificate the CA did not sign is
// reported at start, naming the file, not as a failed handshake later.
//
// Exposure rule (CheckExposure): a task whose cluster has an address that is
// not loopback, or that binds one, refuses to start without TLS or a token
// unless it was told --insecure.
// Thread-safe once loaded (immutable).
#ifndef PSTRAIN_TRANSPORT_SECURITY_H_
#define PSTRAIN_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cluster/tf_config.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

// What a task was told (flags, the config file's `security` block, the
// environment). File paths; empty means not given.
struct SecurityConfig {
  std::string tls_cert;         // this task's certificate chain (PEM)
  std::string tls_key;          // its private key (PEM, unencrypted)
  std::string tls_ca;           // the CA certificate(s) that sign every task's
  std::string tls_server_name;  // name servers' certificates must carry;
                                // empty: the host of the address dialled
  std::string token_file;       // a file holding the cluster token
  std::string token;            // the token itself (PSTRAIN_TOKEN)
  bool insecure = false;        // run exposed without TLS or a token
  // Frames inside TLS are sealed and opened by the kernel (kTLS) where it
  // has the tls module; false: by OpenSSL in the process, always.
  bool kernel_tls = true;
};

// What deploy/make_certs.sh DIR makes, as a task is given it: DIR's
// cert.pem, key.pem and ca.pem for mutual TLS, and with `token` DIR/token.
SecurityConfig CertsDirConfig(const std::string& dir, bool token = true);

// A hint on what to do about OpenSSL's certificate check error `err`
// (an X509_V_ERR_* code), to append after its own text: " (...)", or ""
// when there is nothing to add. `name`: the host name the check expected.
std::string CertificateErrorHint(long err, const std::string& name);

// Tokens shorter than this are refused: `openssl rand -hex 32` makes a good one.
inline constexpr int kMinTokenLength = 16;
// The metadata key that carries the token.
inline constexpr char kTokenMetadataKey[] = "authorization";

class Security {
 public:
  // Reads and checks what `config` names. InvalidArgument naming the file
  // and what is wrong: only some of tls_cert/tls_key/tls_ca given, a file
  // that cannot be read or holds no PEM certificate/key, a key that does not
  // belong to the certificate, a certificate that does not verify against
  // the CA (expired, other issuer), both token_file and token given, or a
  // token shorter than kMinTokenLength.
  static absl::StatusOr<std::shared_ptr<const Security>> Load(const SecurityConfig& config);
  // Neither TLS nor a token: plain gRPC, for loopback-only tools and tests.
  static std::shared_ptr<const Security> None();

  bool tls() const { return !cert_pem_.empty(); }
  bool has_token() const { return !token_.empty(); }
  bool insecure() const { return insecure_; }
  // "mutual TLS and a cluster token", "mutual TLS", "a cluster token", or
  // "no transport security".
  std::string Describe() const;

  // For ServerBuilder::AddListeningPort: TLS that requires and verifies a
  // client certificate, or insecure credentials.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  // A channel to `target` ("host:port") with TLS credentials and the token
  // attached to every call, as configured.
  std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                               grpc::ChannelArguments args) const;
  // Server side, at the start of every call: OK when no token is configured
  // or the call carries it; Unauthenticated ("no cluster token" / "wrong
  // cluster token") otherwise. Compares in constant time.
  absl::Status Authenticate(const grpc::ServerContextBase& ctx) const;
  // The same for a token presented outside gRPC metadata (without the
  // "Bearer " prefix; "" for none).
  absl::Status CheckToken(absl::string_view token) const;
  // The cluster token a client presents ("" when none is configured).
  const std::string& token() const { return token_; }
  // The PEM texts and the server name loaded (empty without TLS), for the
  // frame sockets' own TLS (transport/frame_tls.h).
  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }
  const std::string& ca_pem() const { return ca_pem_; }
  const std::string& server_name() const { return server_name_; }
  // SecurityConfig::kernel_tls.
  bool kernel_tls() const { return kernel_tls_; }

 private:
  Security() = default;
  std::string cert_pem_, key_pem_, ca_pem_, server_name_, token_;
  bool insecure_ = false;
  bool kernel_tls_ = true;
};

// Whether `host` names this machine's loopback interface: "localhost",
// 127.0.0.0/8, "::1".
bool IsLoopbackHost(absl::string_view host);

// FailedPrecondition, saying what to configure, when `cluster` has an address
// that is not loopback or `bind` ("host:port") is not, and `security` has
// neither TLS nor a token and is not insecure().
absl::Status CheckExposure(const ClusterSpec& cluster, const std::string& bind,
                           const Security& security);

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_SECURITY_H_
