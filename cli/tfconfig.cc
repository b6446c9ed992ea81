#include "cli/tfconfig.h"

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/file_util.h"

namespace pstrain {

absl::StatusOr<std::vector<TfConfig>> UaiTfConfigs(const std::vector<std::string>& nodes,
                                                   int ps_port, int worker_port) {
  if (nodes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nodes names ", nodes.size(),
        " host(s); a UAI-Train job needs at least 2: node 0 runs the master and a PS, every "
        "other node a PS and a worker"));
  }
  if (ps_port == worker_port) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ps-port and --worker-port are both ", ps_port, ": a node runs a PS and a worker"));
  }
  ClusterSpec cluster;
  cluster.chief_named_master = true;
  std::set<std::string> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!seen.insert(nodes[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--nodes names \"", nodes[i], "\" twice"));
    }
    const std::string where = absl::StrCat("--nodes[", i, "]");
    const std::string host =
        nodes[i].find(':') != std::string::npos ? absl::StrCat("[", nodes[i], "]") : nodes[i];
    auto ps = ParseHostPort(absl::StrCat(host, ":", ps_port), where);
    if (!ps.ok()) return ps.status();
    auto worker = ParseHostPort(absl::StrCat(host, ":", worker_port), where);
    if (!worker.ok()) return worker.status();
    cluster.ps.push_back(*ps);
    if (i == 0) {
      cluster.chief = *worker;
    } else {
      cluster.worker.push_back(*worker);
    }
  }
  std::vector<TfConfig> out;
  auto add = [&](Role role, int index) {
    TfConfig cfg;
    cfg.cluster = cluster;
    cfg.task = {role, index};
    cfg.environment = "cloud";
    out.push_back(std::move(cfg));
  };
  add(Role::kChief, 0);
  for (int i = 0; i < static_cast<int>(cluster.ps.size()); ++i) add(Role::kPs, i);
  for (int i = 0; i < static_cast<int>(cluster.worker.size()); ++i) add(Role::kWorker, i);
  return out;
}

int TfConfigMain(CliArgs& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "pstrain tfconfig: %s\n", std::string(s.message()).c_str());
    return kExitBadConfig;
  };
  if (args.positional().size() != 2 || args.positional()[1] != "uai") {
    return fail(absl::InvalidArgumentError(
        "usage: pstrain tfconfig uai --nodes HOST,HOST,... --ps-port P --worker-port W "
        "[--out DIR]"));
  }
  auto nodes = args.GetString("nodes", "");
  auto ps_port = args.GetInt("ps-port", 2223);
  auto worker_port = args.GetInt("worker-port", 2222);
  auto out_dir = args.GetString("out", "");
  for (const absl::Status& s :
       {nodes.status(), ps_port.status(), worker_port.status(), out_dir.status()}) {
    if (!s.ok()) return fail(s);
  }
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return fail(s);
  auto configs =
      UaiTfConfigs(absl::StrSplit(*nodes, ',', absl::SkipEmpty()), static_cast<int>(*ps_port),
                   static_cast<int>(*worker_port));
  if (!configs.ok()) return fail(configs.status());
  for (const TfConfig& cfg : *configs) {
    const std::string type = cfg.task.role == Role::kChief ? "master" : RoleName(cfg.task.role);
    const std::string name = absl::StrCat(type, ":", cfg.task.index);
    if (out_dir->empty()) {
      std::printf("%-9s %s\n", name.c_str(), cfg.ToJson().c_str());
      continue;
    }
    const std::string path = absl::StrCat(*out_dir, "/", type, "-", cfg.task.index, ".json");
    absl::Status s = MakeDirs(*out_dir);
    if (s.ok()) s = WriteFileAtomically(path, cfg.ToJson() + "\n");
    if (!s.ok()) {
      std::fprintf(stderr, "pstrain tfconfig: %s\n", std::string(s.message()).c_str());
      return CommandExitCode(s);
    }
    std::printf("%-9s %s\n", name.c_str(), path.c_str());
  }
  return kExitOk;
}

}  // namespace pstrain
