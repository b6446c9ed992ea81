// Parses the TF_CONFIG environment variable's JSON into a validated cluster
// description. Every role's main calls ParseTfConfig once and passes the
// result down; library code never reads the environment.
//
// Accepted dialects (TensorFlow, Kubeflow TFJob, UAI-Train-style platforms):
//   - "chief" or "master" (synonyms; at most one of them, with one address);
//   - the evaluator listed in "cluster" (Kubeflow's TFJob lists every
//     replica type) or left out of it (AI Platform); it never takes part in
//     training;
//   - unknown top-level keys ("rpc_layer", "job", ...) are ignored;
//   - addresses "host:port", "1.2.3.4:port" or "[v6addr]:port".
// Values are plain data; thread-compatible.
#ifndef PSTRAIN_CLUSTER_TF_CONFIG_H_
#define PSTRAIN_CLUSTER_TF_CONFIG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

enum class Role { kChief, kPs, kWorker, kEvaluator };

// "chief", "ps", "worker" or "evaluator".
const char* RoleName(Role role);

// A parsed "host:port". `host` has no brackets, even for IPv6.
struct HostPort {
  std::string host;
  int port = 0;

  // "host:port", or "[host]:port" when host contains ':' (IPv6).
  std::string ToString() const;
  bool operator==(const HostPort& o) const {
    return host == o.host && port == o.port;
  }
};

// Parses "host:port" or "[v6]:port". InvalidArgument naming `what` (for
// example "cluster.ps[1]") when the host is empty, the port is missing, not a
// number, or outside 1..65535.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text,
                                       absl::string_view what);

struct TaskId {
  Role role = Role::kWorker;
  int index = 0;
  // "worker:1".
  std::string ToString() const;
  bool operator==(const TaskId& o) const { return role == o.role && index == o.index; }
};

struct ClusterSpec {
  std::optional<HostPort> chief;
  // True when the chief was given under the key "master".
  bool chief_named_master = false;
  std::vector<HostPort> ps;
  std::vector<HostPort> worker;
  std::vector<HostPort> evaluator;

  // Entries of `role` (0 or 1 for the chief).
  int Count(Role role) const;
  // Address of a task. REQUIRES: 0 <= index < Count(role).
  const HostPort& Address(Role role, int index) const;
};

struct TfConfig {
  ClusterSpec cluster;
  TaskId task;
  // The "environment" value, or empty. "cloud" selects cloud defaults such as
  // the /data/output output directory.
  std::string environment;

  // This task's own address; nullopt only for an evaluator left out of
  // "cluster".
  std::optional<HostPort> task_address() const;
  // True for the chief, or for worker 0 when the cluster has no chief
  // (TensorFlow's rule).
  bool HasChiefDuties() const;
  // The address of the task with chief duties (chief, else worker 0).
  // nullopt when the cluster has neither.
  std::optional<HostPort> chief_duties_address() const;
  // Where the Coordinator service is served: the task with chief duties in
  // a job with ps; nullopt in one without (its chief's address is its
  // ring's, where nothing else may connect) or with no such task.
  std::optional<HostPort> coordinator_address() const;

  // Serialises back to TF_CONFIG JSON (the chief under "chief", or "master"
  // when it was given so).
  std::string ToJson() const;
};

// The tasks that train, in replica order: the chief first when the cluster
// has one and `chief_trains` (as replica 0, TensorFlow's convention), then
// worker 0, 1, ... Every task of a job computes the same list, so replica
// numbers agree without being exchanged.
std::vector<TaskId> TrainingReplicas(const ClusterSpec& cluster, bool chief_trains);

// `task`'s replica number in TrainingReplicas, or -1 when it does not train.
int ReplicaIndexOf(const ClusterSpec& cluster, const TaskId& task, bool chief_trains);

// Parses "worker:1", "chief:0" ("master:0" too), "ps:2", "evaluator:0".
// InvalidArgument for anything else.
absl::StatusOr<TaskId> ParseTaskName(absl::string_view name);

// Parses and validates TF_CONFIG. On bad input returns InvalidArgument with one
// line that starts with "TF_CONFIG" and names the field: malformed JSON,
// missing or non-object "cluster" or "task", unknown task.type or cluster key,
// both chief and master, a chief list with more than one address, task.index
// negative, not an integer or out of range, an entry that is not a string,
// empty or duplicate addresses, a port that is not a number.
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json);

// For a TF_CONFIG that ParseTfConfig refuses only because its task is not
// one of its cluster's (task.index out of range, or a type the cluster has
// no entries for): the config as given, task included, so that the task can
// tell the job's chief why it cannot take part (a job waiting for a task
// that was started under another index would otherwise wait forever).
// nullopt for any other TF_CONFIG, well-formed or not.
std::optional<TfConfig> TaskOutsideItsCluster(absl::string_view json);

// Checks what a parameter-server job needs beyond a well-formed TF_CONFIG (a
// MultiWorkerMirroredStrategy config with no "ps" parses, but cannot train
// here): at least one ps and one worker. InvalidArgument naming the field.
absl::Status ValidateForParameterServerTraining(const TfConfig& cfg);

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_TF_CONFIG_H_
