#include "transport/frame_tls.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
absl::Status Configure(SSL_CTX* ctx, const Security& security, bool server,
                       const std::string& suites) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  if (SSL_CTX_set_ciphersuites(ctx, suites.empty() ? kSuites : suites.c_str()) != 1) {
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

// The ex_data slot of an SSL that holds its TrafficSecrets.
int SecretsIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// OpenSSL's key log callback: a line "LABEL <client random> <secret>" (hex)
// per secret the handshake derives. The application traffic secrets go to
// the connection's TrafficSecrets (OpenSSL wipes the line after).
void KeepTrafficSecret(const SSL* ssl, const char* line) {
  auto* secrets = static_cast<TrafficSecrets*>(SSL_get_ex_data(ssl, SecretsIndex()));
  if (secrets == nullptr) return;
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3) return;
  std::string* into = nullptr;
  if (parts[0] == "CLIENT_TRAFFIC_SECRET_0") into = &secrets->client;
  if (parts[0] == "SERVER_TRAFFIC_SECRET_0") into = &secrets->server;
  if (into == nullptr) return;
  *into = absl::HexStringToBytes(parts[2]);
}

// HKDF-Expand-Label(secret, label, "", length) of RFC 8446 7.1.
absl::StatusOr<std::string> ExpandLabel(const EVP_MD* md, absl::string_view secret,
                                        absl::string_view label, size_t length) {
  const std::string full = absl::StrCat("tls13 ", label);
  std::string info;
  info.push_back(static_cast<char>(length >> 8));
  info.push_back(static_cast<char>(length & 0xff));
  info.push_back(static_cast<char>(full.size()));
  info += full;
  info.push_back(0);  // an empty context
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr), &EVP_PKEY_CTX_free);
  std::string out(length, '\0');
  size_t out_len = length;
  const bool ok =
      ctx != nullptr && EVP_PKEY_derive_init(ctx.get()) == 1 &&
      EVP_PKEY_CTX_set_hkdf_mode(ctx.get(), EVP_PKEY_HKDEF_MODE_EXPAND_ONLY) == 1 &&
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), md) == 1 &&
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), reinterpret_cast<const unsigned char*>(secret.data()),
                                 static_cast<int>(secret.size())) == 1 &&
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), reinterpret_cast<const unsigned char*>(info.data()),
                                  static_cast<int>(info.size())) == 1 &&
      EVP_PKEY_derive(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &out_len) == 1 &&
      out_len == length;
  if (!ok) {
    OPENSSL_cleanse(out.data(), out.size());
    return absl::InternalError(TakeTlsErrors("HKDF-Expand-Label failed"));
  }
  return out;
}

}  // namespace

TrafficSecrets::~TrafficSecrets() { Wipe(); }

void TrafficSecrets::Wipe() {
  OPENSSL_cleanse(client.data(), client.size());
  OPENSSL_cleanse(server.data(), server.size());
  client.clear();
  server.clear();
}

void AttachTrafficSecrets(SSL* ssl, TrafficSecrets* secrets) {
  SSL_set_ex_data(ssl, SecretsIndex(), secrets);
}

TrafficKeys::~TrafficKeys() {
  OPENSSL_cleanse(key.data(), key.size());
  OPENSSL_cleanse(iv.data(), iv.size());
}

absl::StatusOr<TrafficKeys> DeriveTrafficKeys(absl::string_view secret, int key_bytes) {
  if (secret.size() != 32 && secret.size() != 48) {
    return absl::InvalidArgumentError(
        absl::StrCat("a traffic secret of ", secret.size(), " bytes (32 or 48 expected)"));
  }
  if (key_bytes != 16 && key_bytes != 32) {
    return absl::InvalidArgumentError(absl::StrCat("a key of ", key_bytes, " bytes"));
  }
  const EVP_MD* md = secret.size() == 32 ? EVP_sha256() : EVP_sha384();
  TrafficKeys keys;
  PSTRAIN_ASSIGN_OR_RETURN(keys.key, ExpandLabel(md, secret, "key", key_bytes));
  PSTRAIN_ASSIGN_OR_RETURN(keys.iv, ExpandLabel(md, secret, "iv", 12));
  return keys;
}

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

absl::StatusOr<std::shared_ptr<const FrameTls>> FrameTls::Make(const Security& security, Side side,
                                                               bool kernel_receives,
                                                               const std::string& suites) {
  if (!security.tls()) return absl::InvalidArgumentError("the job has no TLS certificates");
  std::shared_ptr<FrameTls> tls(new FrameTls(side));
  tls->context_ = SSL_CTX_new(tls->server() ? TLS_server_method() : TLS_client_method());
  if (tls->context_ == nullptr) {
    return absl::InternalError(TakeTlsErrors("cannot make a TLS context"));
  }
  PSTRAIN_RETURN_IF_ERROR(Configure(tls->context_, security, tls->server(), suites));
  tls->server_name_ = security.server_name();
  tls->kernel_tls_ = security.kernel_tls();
  tls->kernel_receives_ = kernel_receives;
  SSL_CTX_set_keylog_callback(tls->context_, KeepTrafficSecret);
  return std::shared_ptr<const FrameTls>(std::move(tls));
}

FrameTls::~FrameTls() { SSL_CTX_free(context_); }

}  // namespace pstrain
