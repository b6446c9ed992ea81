// Certificates and a cluster token for tests, made as a user makes them:
// with deploy/make_certs.sh (the test lists //deploy:make_certs.sh in its
// `data`). testonly.
#ifndef PSTRAIN_BASE_TESTING_CERTS_H_
#define PSTRAIN_BASE_TESTING_CERTS_H_

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"

namespace pstrain::testing {

// Makes TempDir()/certs/<name>/ with ca.pem, ca.key, cert.pem (naming
// `hosts`, 127.0.0.1 and localhost), key.pem and token; a directory that
// already has them keeps its CA. Returns the directory.
inline absl::StatusOr<std::string> MakeCerts(const std::string& name,
                                             const std::vector<std::string>& hosts = {}) {
  const std::string dir = absl::StrCat(TempDir(), "/certs/", name);
  std::string cmd = "bash deploy/make_certs.sh " + dir;
  for (const std::string& h : hosts) absl::StrAppend(&cmd, " ", h);
  absl::StrAppend(&cmd, " >/dev/null");
  if (std::system(cmd.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(cmd, ": failed"));
  }
  return dir;
}

// Makes TempDir()/certs/<name>-expired/: the CA of MakeCerts(name) and a
// task certificate it signed, with its key, that expired the day before
// it was made (deploy/make_certs.sh with PSTRAIN_CERT_DAYS=-1). Returns
// the directory.
inline absl::StatusOr<std::string> MakeExpiredCerts(const std::string& name) {
  auto ca_dir = MakeCerts(name);
  if (!ca_dir.ok()) return ca_dir.status();
  const std::string dir = *ca_dir + "-expired";
  const std::string cmd =
      absl::StrCat("mkdir -p ", dir, " && cp ", *ca_dir, "/ca.pem ", *ca_dir, "/ca.key ", dir,
                   " && PSTRAIN_CERT_DAYS=-1 bash deploy/make_certs.sh ", dir, " >/dev/null");
  if (std::system(cmd.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(cmd, ": failed"));
  }
  return dir;
}

}  // namespace pstrain::testing

#endif  // PSTRAIN_BASE_TESTING_CERTS_H_
