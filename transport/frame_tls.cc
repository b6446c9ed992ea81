#include "transport/frame_tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace pstrain {
namespace {

// AES-128-GCM first: the fastest with AES instructions, as strong as the
// transport needs; the others as a peer may prefer them.
constexpr char kSuites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
    "TLS_CHACHA20_POLY1305_SHA256";

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The certificate chain and key of this task, and the CA as the trust
// store, into `ctx`.
absl::Status Configure(SSL_CTX* ctx, const Security& security, bool server) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  if (SSL_CTX_set_ciphersuites(ctx, kSuites) != 1) {
    return absl::InternalError(TakeTlsErrors("no TLS 1.3 cipher suite"));
  }
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_AUTO_RETRY);
  // A peer that goes without close_notify reads as a closed connection.
  SSL_CTX_set_options(ctx,
                      SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // This task's certificate (the first of its PEM) and any chain after it.
  BioPtr cert_bio = MemoryBio(security.cert_pem());
  X509* cert = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
  if (cert == nullptr || SSL_CTX_use_certificate(ctx, cert) != 1) {
    X509_free(cert);
    return absl::InvalidArgumentError(TakeTlsErrors("tls_cert holds no usable certificate"));
  }
  X509_free(cert);
  while (X509* extra = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add_extra_chain_cert(ctx, extra) != 1) {
      X509_free(extra);
      return absl::InvalidArgumentError(TakeTlsErrors("tls_cert's chain"));
    }
  }
  ERR_clear_error();  // the end of the chain reads as an error
  BioPtr key_bio = MemoryBio(security.key_pem());
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  const bool key_ok = key != nullptr && SSL_CTX_use_PrivateKey(ctx, key) == 1 &&
                      SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  if (!key_ok) {
    return absl::InvalidArgumentError(TakeTlsErrors("tls_key is not tls_cert's key"));
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  BioPtr ca_bio = MemoryBio(security.ca_pem());
  int authorities = 0;
  while (X509* ca = PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, ca);
    X509_free(ca);
    ++authorities;
  }
  ERR_clear_error();
  if (authorities == 0) return absl::InvalidArgumentError("tls_ca holds no certificate");
  SSL_CTX_set_verify(
      ctx, server ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER, nullptr);
  return absl::OkStatus();
}

}  // namespace

std::string TakeTlsErrors(const std::string& otherwise) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    const char* reason = ERR_reason_error_string(e);
    absl::StrAppend(&out, out.empty() ? "" : "; ", reason != nullptr ? reason : text);
  }
  return out.empty() ? otherwise : out;
}

absl::StatusOr<std::shared_ptr<const FrameTls>> FrameTls::Make(const Security& security,
                                                               Side side) {
  if (!security.tls()) return absl::InvalidArgumentError("the job has no TLS certificates");
  std::shared_ptr<FrameTls> tls(new FrameTls(side));
  tls->context_ = SSL_CTX_new(tls->server() ? TLS_server_method() : TLS_client_method());
  if (tls->context_ == nullptr) {
    return absl::InternalError(TakeTlsErrors("cannot make a TLS context"));
  }
  PSTRAIN_RETURN_IF_ERROR(Configure(tls->context_, security, tls->server()));
  tls->server_name_ = security.server_name();
  return std::shared_ptr<const FrameTls>(std::move(tls));
}

FrameTls::~FrameTls() { SSL_CTX_free(context_); }

}  // namespace pstrain
