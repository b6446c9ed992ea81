#include "job/security_flags.h"

#include <cstdlib>

#include "base/status_macros.h"
#include "job/flag_table.h"
#include "model/model_config.h"

namespace pstrain {

const std::vector<std::string>& SecurityFlagNames() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string>();
    for (const FlagDef& f : FlagTable()) {
      if (f.group == FlagGroup::kSecurity) out->push_back(f.name);
    }
    return out;
  }();
  return *names;
}

absl::StatusOr<std::shared_ptr<const Security>> SecurityFromFlags(CliArgs& args) {
  SecurityConfig c;
  PSTRAIN_ASSIGN_OR_RETURN(std::string config, args.GetString("config", ""));
  if (config.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(config, args.GetString("model_config", ""));
  }
  if (!config.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(model::ModelConfigFile file, model::LoadModelConfigFile(config));
    c.tls_cert = file.security.tls_cert;
    c.tls_key = file.security.tls_key;
    c.tls_ca = file.security.tls_ca;
    c.tls_server_name = file.security.tls_server_name;
    c.token_file = file.security.token_file;
  }
  PSTRAIN_ASSIGN_OR_RETURN(c.tls_cert, args.GetString("tls_cert", c.tls_cert));
  PSTRAIN_ASSIGN_OR_RETURN(c.tls_key, args.GetString("tls_key", c.tls_key));
  PSTRAIN_ASSIGN_OR_RETURN(c.tls_ca, args.GetString("tls_ca", c.tls_ca));
  PSTRAIN_ASSIGN_OR_RETURN(c.tls_server_name, args.GetString("tls_server_name", c.tls_server_name));
  PSTRAIN_ASSIGN_OR_RETURN(c.token_file, args.GetString("token_file", c.token_file));
  PSTRAIN_ASSIGN_OR_RETURN(c.insecure, args.GetBool("insecure", false));
  PSTRAIN_ASSIGN_OR_RETURN(c.kernel_tls, args.GetBool("kernel_tls", true));
  if (const char* token = std::getenv("PSTRAIN_TOKEN"); token != nullptr && *token != '\0') {
    // An explicit --token_file wins over the environment; a file named only
    // in the config yields to it.
    if (args.Has("token_file")) {
      return absl::InvalidArgumentError(
          "both --token_file and PSTRAIN_TOKEN are given: use one");
    }
    c.token_file.clear();
    c.token = token;
  }
  return Security::Load(c);
}

}  // namespace pstrain
