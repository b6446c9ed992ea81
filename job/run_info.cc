#include "job/run_info.h"

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "base/file_util.h"

namespace pstrain {
namespace {

absl::Mutex version_mu(absl::kConstInit);
std::string* version ABSL_GUARDED_BY(version_mu) = nullptr;
std::string* commit ABSL_GUARDED_BY(version_mu) = nullptr;

}  // namespace

void SetBinaryVersion(const std::string& v, const std::string& c) {
  absl::MutexLock lock(&version_mu);
  delete version;
  delete commit;
  version = new std::string(v);
  commit = new std::string(c);
}

Json ClusterOf(const TfConfig& cfg) {
  auto tf = ParseJson(cfg.ToJson());
  if (!tf.ok()) return Json::object();
  const Json* cluster = FindMember(*tf, "cluster");
  return cluster != nullptr ? *cluster : Json::object();
}

Json RunInfo(const CliArgs& args, const TfConfig& cfg) {
  Json run = Json::object();
  {
    absl::MutexLock lock(&version_mu);
    run["version"] = version != nullptr ? *version : "unknown";
    run["commit"] = commit != nullptr ? *commit : "unknown";
  }
  run["flags"] = args.raw_flags();
  if (Json cluster = ClusterOf(cfg); !cluster.empty()) run["cluster"] = std::move(cluster);
  for (const std::string& flag : args.raw_flags()) {
    for (absl::string_view prefix : {"--model_config=", "--config="}) {
      if (!absl::StartsWith(flag, prefix)) continue;
      const std::string path = flag.substr(prefix.size());
      if (auto text = ReadFile(path); text.ok()) {
        run["model_config_file"] = path;
        run["model_config"] = *text;
      }
    }
  }
  return run;
}

}  // namespace pstrain
