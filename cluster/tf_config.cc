#include "cluster/tf_config.h"

#include <cmath>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json.h"
#include "base/status_macros.h"

namespace pstrain {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kChief: return "chief";
    case Role::kPs: return "ps";
    case Role::kWorker: return "worker";
    case Role::kEvaluator: return "evaluator";
  }
  return "?";
}

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

std::string TaskId::ToString() const {
  return absl::StrCat(RoleName(role), ":", index);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text,
                                       absl::string_view what) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", text, "\": ", why));
  };
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  }
  HostPort hp;
  absl::string_view port_text;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return bad("missing ']' after IPv6 host");
    hp.host = std::string(text.substr(1, close - 1));
    absl::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return bad("missing ':port' after ']'");
    port_text = rest.substr(1);
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return bad("missing ':port'");
    hp.host = std::string(text.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) {
      return bad("IPv6 hosts must be written as [addr]:port");
    }
    port_text = text.substr(colon + 1);
  }
  if (hp.host.empty()) return bad("empty host");
  // Host names (letters, digits, '-', '_', '.') or IP addresses (IPv6 also
  // ':' and, for a zone, '%'); anything else would not survive being
  // written back into a TF_CONFIG or a gRPC target.
  const bool v6 = text.front() == '[';
  for (char c : hp.host) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                    c == '_' || c == '.' || (v6 && (c == ':' || c == '%'));
    if (!ok) {
      return bad(v6 ? "an IPv6 host holds only hex digits, ':', '.' and a '%zone'"
                    : "a host holds only letters, digits, '-', '_' and '.'");
    }
  }
  if (v6 && hp.host.find(':') == std::string::npos) {
    return bad("a bracketed host must be an IPv6 address");
  }
  if (port_text.empty()) return bad("empty port");
  for (char c : port_text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return bad(absl::StrCat("port \"", port_text, "\" is not a number"));
    }
  }
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return bad(absl::StrCat("port ", port_text, " is outside 1..65535"));
  }
  hp.port = port;
  return hp;
}

int ClusterSpec::Count(Role role) const {
  switch (role) {
    case Role::kChief: return chief.has_value() ? 1 : 0;
    case Role::kPs: return static_cast<int>(ps.size());
    case Role::kWorker: return static_cast<int>(worker.size());
    case Role::kEvaluator: return static_cast<int>(evaluator.size());
  }
  return 0;
}

const HostPort& ClusterSpec::Address(Role role, int index) const {
  switch (role) {
    case Role::kChief: return *chief;
    case Role::kPs: return ps[index];
    case Role::kWorker: return worker[index];
    case Role::kEvaluator: return evaluator[index];
  }
  return worker[index];
}

std::optional<HostPort> TfConfig::task_address() const {
  if (task.index < cluster.Count(task.role)) {
    return cluster.Address(task.role, task.index);
  }
  return std::nullopt;
}

bool TfConfig::HasChiefDuties() const {
  if (task.role == Role::kChief) return true;
  return !cluster.chief.has_value() && task.role == Role::kWorker &&
         task.index == 0;
}

std::optional<HostPort> TfConfig::chief_duties_address() const {
  if (cluster.chief.has_value()) return cluster.chief;
  if (!cluster.worker.empty()) return cluster.worker[0];
  return std::nullopt;
}

std::optional<HostPort> TfConfig::coordinator_address() const {
  if (cluster.ps.empty()) return std::nullopt;
  return chief_duties_address();
}

std::vector<TaskId> TrainingReplicas(const ClusterSpec& cluster, bool chief_trains) {
  std::vector<TaskId> replicas;
  if (cluster.chief.has_value() && chief_trains) replicas.push_back({Role::kChief, 0});
  for (int i = 0; i < static_cast<int>(cluster.worker.size()); ++i) {
    replicas.push_back({Role::kWorker, i});
  }
  return replicas;
}

int ReplicaIndexOf(const ClusterSpec& cluster, const TaskId& task, bool chief_trains) {
  const std::vector<TaskId> replicas = TrainingReplicas(cluster, chief_trains);
  for (int r = 0; r < static_cast<int>(replicas.size()); ++r) {
    if (replicas[r] == task) return r;
  }
  return -1;
}

absl::StatusOr<TaskId> ParseTaskName(absl::string_view name) {
  const size_t colon = name.find(':');
  int index = -1;
  if (colon != absl::string_view::npos && absl::SimpleAtoi(name.substr(colon + 1), &index) &&
      index >= 0) {
    const absl::string_view type = name.substr(0, colon);
    if (type == "chief" || type == "master") return TaskId{Role::kChief, index};
    if (type == "ps") return TaskId{Role::kPs, index};
    if (type == "worker") return TaskId{Role::kWorker, index};
    if (type == "evaluator") return TaskId{Role::kEvaluator, index};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name, "\" is not a task such as worker:1 or chief:0"));
}

std::string TfConfig::ToJson() const {
  Json c = Json::object();
  auto list = [](const std::vector<HostPort>& v) {
    Json a = Json::array();
    for (const HostPort& hp : v) a.push_back(hp.ToString());
    return a;
  };
  if (cluster.chief.has_value()) {
    c[cluster.chief_named_master ? "master" : "chief"] = list({*cluster.chief});
  }
  if (!cluster.ps.empty()) c["ps"] = list(cluster.ps);
  if (!cluster.worker.empty()) c["worker"] = list(cluster.worker);
  if (!cluster.evaluator.empty()) c["evaluator"] = list(cluster.evaluator);
  Json t = Json::object();
  const char* type = RoleName(task.role);
  if (task.role == Role::kChief && cluster.chief_named_master) type = "master";
  t["type"] = type;
  t["index"] = task.index;
  Json root = Json::object();
  root["cluster"] = std::move(c);
  root["task"] = std::move(t);
  if (!environment.empty()) root["environment"] = environment;
  return root.dump();
}

namespace {

absl::Status Invalid(absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG ", msg));
}

std::optional<Role> RoleFromName(absl::string_view name) {
  if (name == "chief" || name == "master") return Role::kChief;
  if (name == "ps") return Role::kPs;
  if (name == "worker") return Role::kWorker;
  if (name == "evaluator") return Role::kEvaluator;
  return std::nullopt;
}

constexpr const char* kKnownTypes = "chief, master, ps, worker, evaluator";

absl::StatusOr<std::vector<HostPort>> ParseAddressList(const std::string& key,
                                                       const Json& value) {
  if (!value.is_array()) {
    return Invalid(absl::StrCat("cluster.", key, " must be an array of \"host:port\" strings, not ",
                                value.type_name()));
  }
  std::vector<HostPort> out;
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& item = value[i];
    std::string what = absl::StrCat("cluster.", key, "[", i, "]");
    if (!item.is_string()) {
      return Invalid(absl::StrCat(what, " must be a \"host:port\" string, not ",
                                  item.type_name()));
    }
    auto hp = ParseHostPort(item.get<std::string>(), what);
    if (!hp.ok()) return Invalid(hp.status().message());
    out.push_back(*hp);
  }
  return out;
}

// TF_CONFIG's "cluster" object: each role's addresses, no address twice.
absl::Status ParseClusterEntries(const Json& cluster, ClusterSpec* out) {
  if (FindMember(cluster, "chief") != nullptr && FindMember(cluster, "master") != nullptr) {
    return Invalid("cluster has both \"chief\" and \"master\"; they are the same role, give one");
  }
  // Where each address was first seen, to name duplicates.
  std::map<std::string, std::string> seen;
  for (const auto& [key, value] : cluster.items()) {
    std::optional<Role> role = RoleFromName(key);
    if (!role.has_value()) {
      return Invalid(absl::StrCat("cluster.", key, " is not a known role (expected one of ",
                                  kKnownTypes, ")"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<HostPort> list, ParseAddressList(key, value));
    for (size_t i = 0; i < list.size(); ++i) {
      std::string where = absl::StrCat("cluster.", key, "[", i, "]");
      auto [it, inserted] = seen.emplace(list[i].ToString(), where);
      if (!inserted) {
        return Invalid(absl::StrCat(where, " \"", list[i].ToString(), "\" duplicates ",
                                    it->second));
      }
    }
    switch (*role) {
      case Role::kChief:
        if (list.size() != 1) {
          return Invalid(absl::StrCat("cluster.", key, " must hold exactly one address, has ",
                                      list.size()));
        }
        out->chief = list[0];
        out->chief_named_master = (key == "master");
        break;
      case Role::kPs: out->ps = std::move(list); break;
      case Role::kWorker: out->worker = std::move(list); break;
      case Role::kEvaluator: out->evaluator = std::move(list); break;
    }
  }
  return absl::OkStatus();
}

// task.index: a number, or digits in a string as some generators write it.
absl::StatusOr<int> ParseTaskIndex(const Json& index) {
  double d = 0;
  if (index.is_number()) {
    d = index.get<double>();
  } else if (index.is_string()) {
    if (!absl::SimpleAtod(index.get<std::string>(), &d)) {
      return Invalid(
          absl::StrCat("task.index \"", index.get<std::string>(), "\" is not an integer"));
    }
  } else {
    return Invalid(absl::StrCat("task.index must be an integer, not ", index.type_name()));
  }
  if (d != std::floor(d) || d < 0 || d > 1e6) {
    return Invalid(absl::StrCat("task.index ", d, " must be a non-negative integer"));
  }
  return static_cast<int>(d);
}

// TF_CONFIG's "task" object, checked against the cluster it names unless
// `outside` (a task that is not one of the cluster's: set when it is not).
absl::Status ParseTask(const Json& task, TfConfig* cfg, bool* outside = nullptr) {
  const Json* type = FindMember(task, "type");
  if (type == nullptr) return Invalid("task has no \"type\"");
  if (!type->is_string()) {
    return Invalid(absl::StrCat("task.type must be a string, not ", type->type_name()));
  }
  const std::string& type_name = type->get<std::string>();
  std::optional<Role> role = RoleFromName(type_name);
  if (!role.has_value()) {
    return Invalid(absl::StrCat("task.type \"", type_name, "\" is not one of ", kKnownTypes));
  }
  cfg->task.role = *role;
  if (const Json* index = FindMember(task, "index"); index != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(cfg->task.index, ParseTaskIndex(*index));
  }
  // "task.type: chief" with "cluster.master" (or the reverse) is accepted:
  // the two names are synonyms.
  int count = cfg->cluster.Count(cfg->task.role);
  std::string list_name = type_name;
  if (cfg->task.role == Role::kChief && cfg->cluster.chief.has_value()) {
    list_name = cfg->cluster.chief_named_master ? "master" : "chief";
  }
  if (cfg->task.role == Role::kEvaluator && count == 0) {
    // AI Platform leaves the evaluator out of "cluster"; it needs no address.
  } else if (count == 0 || cfg->task.index >= count) {
    if (outside != nullptr) {
      *outside = true;
      return absl::OkStatus();
    }
    if (count == 0) {
      return Invalid(
          absl::StrCat("task.type \"", type_name, "\" has no entries in cluster.", list_name));
    }
    return Invalid(absl::StrCat("task.index ", cfg->task.index, " out of range: cluster.",
                                list_name, " has ", count, count == 1 ? " entry" : " entries"));
  }
  return absl::OkStatus();
}

// ParseTfConfig; with `outside`, a task not in its cluster is read as
// given and flagged there (TaskOutsideItsCluster).
absl::StatusOr<TfConfig> ParseTfConfigImpl(absl::string_view json, bool* outside) {
  if (json.empty()) return Invalid("is empty");
  auto parsed = ParseJson(json);
  if (!parsed.ok()) {
    return Invalid(absl::StrCat("is not valid JSON: ", parsed.status().message()));
  }
  const Json& root = *parsed;
  if (!root.is_object()) {
    return Invalid(absl::StrCat("must be a JSON object, not ", root.type_name()));
  }
  const Json* cluster = FindMember(root, "cluster");
  if (cluster == nullptr) return Invalid("has no \"cluster\" object");
  if (!cluster->is_object()) {
    return Invalid(absl::StrCat("cluster must be an object, not ", cluster->type_name()));
  }
  const Json* task = FindMember(root, "task");
  if (task == nullptr) return Invalid("has no \"task\" object");
  if (!task->is_object()) {
    return Invalid(absl::StrCat("task must be an object, not ", task->type_name()));
  }
  TfConfig cfg;
  if (const Json* env = FindMember(root, "environment"); env != nullptr) {
    if (!env->is_string()) {
      return Invalid(absl::StrCat("environment must be a string, not ", env->type_name()));
    }
    cfg.environment = env->get<std::string>();
  }
  PSTRAIN_RETURN_IF_ERROR(ParseClusterEntries(*cluster, &cfg.cluster));
  PSTRAIN_RETURN_IF_ERROR(ParseTask(*task, &cfg, outside));
  return cfg;
}

}  // namespace

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json) {
  return ParseTfConfigImpl(json, nullptr);
}

std::optional<TfConfig> TaskOutsideItsCluster(absl::string_view json) {
  bool outside = false;
  absl::StatusOr<TfConfig> cfg = ParseTfConfigImpl(json, &outside);
  if (!cfg.ok() || !outside) return std::nullopt;
  return *std::move(cfg);
}

absl::Status ValidateForParameterServerTraining(const TfConfig& cfg) {
  if (cfg.cluster.ps.empty()) {
    return Invalid(
        "cluster.ps is empty or missing: a parameter-server job needs at least one ps");
  }
  if (cfg.cluster.worker.empty()) {
    return Invalid("cluster.worker is empty or missing: a job needs at least one worker");
  }
  return absl::OkStatus();
}

}  // namespace pstrain
