#include "cli/describe.h"

#include "absl/strings/str_cat.h"
#include "base/json.h"

namespace pstrain {
namespace {

std::string RoleLabel(const TfConfig& cfg, Role role) {
  if (role == Role::kChief && cfg.cluster.chief_named_master) return "master";
  return RoleName(role);
}

std::string ChiefDuties(const TfConfig& cfg) {
  if (cfg.cluster.chief.has_value()) return absl::StrCat(RoleLabel(cfg, Role::kChief), ":0");
  if (!cfg.cluster.worker.empty()) return "worker:0 (the cluster has no chief)";
  return "nobody (the cluster has no chief and no worker)";
}

// How the cluster trains: by its ps, or, with none, by ring all-reduce.
std::string Mode(const TfConfig& cfg) {
  if (!cfg.cluster.ps.empty()) {
    return absl::StrCat("parameter servers (", cfg.cluster.ps.size(), " ps)");
  }
  const int replicas = cfg.cluster.Count(Role::kChief) + cfg.cluster.Count(Role::kWorker);
  return absl::StrCat("all-reduce (no ps: ", replicas, " replicas in a ring)");
}

constexpr Role kOrder[] = {Role::kChief, Role::kPs, Role::kWorker, Role::kEvaluator};

}  // namespace

std::string DescribeText(const TfConfig& cfg) {
  auto addr = cfg.task_address();
  std::string out = absl::StrCat(
      "task: ", RoleLabel(cfg, cfg.task.role), ":", cfg.task.index, " ",
      addr.has_value() ? addr->ToString() : "(no address: evaluator not listed in cluster)",
      "\n");
  absl::StrAppend(&out, "environment: ", cfg.environment.empty() ? "(none)" : cfg.environment, "\n");
  absl::StrAppend(&out, "chief duties: ", ChiefDuties(cfg), "\n");
  absl::StrAppend(&out, "mode: ", Mode(cfg), "\n");
  absl::StrAppend(&out, "cluster:\n");
  for (Role role : kOrder) {
    for (int i = 0; i < cfg.cluster.Count(role); ++i) {
      absl::StrAppend(&out, RoleLabel(cfg, role), ":", i, " ",
                      cfg.cluster.Address(role, i).ToString(), "\n");
    }
  }
  return out;
}

std::string DescribeJson(const TfConfig& cfg) {
  Json task = Json::object();
  task["type"] = RoleLabel(cfg, cfg.task.role);
  task["index"] = cfg.task.index;
  auto addr = cfg.task_address();
  task["address"] = addr.has_value() ? Json(addr->ToString()) : Json();
  Json cluster = Json::array();
  for (Role role : kOrder) {
    for (int i = 0; i < cfg.cluster.Count(role); ++i) {
      Json t = Json::object();
      t["type"] = RoleLabel(cfg, role);
      t["index"] = i;
      t["address"] = cfg.cluster.Address(role, i).ToString();
      cluster.push_back(std::move(t));
    }
  }
  Json root = Json::object();
  root["task"] = std::move(task);
  root["environment"] = cfg.environment;
  root["chief_duties"] = ChiefDuties(cfg);
  root["mode"] = cfg.cluster.ps.empty() ? "allreduce" : "ps";
  root["cluster"] = std::move(cluster);
  return root.dump() + "\n";
}

}  // namespace pstrain
