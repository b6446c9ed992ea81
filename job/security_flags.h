// The transport-security flags every role, `pstrain launch` and the tools
// that talk to a running job accept. Main-layer code only.
#ifndef PSTRAIN_JOB_SECURITY_FLAGS_H_
#define PSTRAIN_JOB_SECURITY_FLAGS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cli_args.h"
#include "transport/security.h"

namespace pstrain {

// tls_cert, tls_key, tls_ca, tls_server_name, token_file, insecure.
const std::vector<std::string>& SecurityFlagNames();

// Reads the flags above, the PSTRAIN_TOKEN environment variable and the
// `security` block of the --config (or --model_config) file, the flags
// winning over the file, and loads them (Security::Load and its errors; a
// config file that does not parse, with its line).
absl::StatusOr<std::shared_ptr<const Security>> SecurityFromFlags(CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_JOB_SECURITY_FLAGS_H_
