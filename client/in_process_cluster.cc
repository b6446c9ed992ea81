#include "client/in_process_cluster.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace pstrain::client {

InProcessCluster::InProcessCluster(int num_ps, ps::PsControlOptions options)
    : num_ps_(num_ps), options_(options) {
  absl::MutexLock lock(&mu_);
  for (int ps = 0; ps < num_ps; ++ps) nodes_.push_back(std::make_shared<Node>(ps, num_ps, options));
  shutdowns_.assign(num_ps, {"", -1});
}

std::string InProcessCluster::PsName(int ps) const { return absl::StrCat("ps:", ps, " (in process)"); }

absl::StatusOr<std::shared_ptr<InProcessCluster::Node>> InProcessCluster::NodeOf(int ps) {
  absl::MutexLock lock(&mu_);
  if (nodes_[ps] == nullptr) {
    return absl::UnavailableError(absl::StrCat(PsName(ps), ": stopped"));
  }
  return nodes_[ps];
}

std::shared_ptr<ps::ShardStore> InProcessCluster::store(int ps) {
  absl::MutexLock lock(&mu_);
  return nodes_[ps] == nullptr ? nullptr : nodes_[ps]->store;
}

void InProcessCluster::Stop(int ps) {
  absl::MutexLock lock(&mu_);
  nodes_[ps] = nullptr;
}

void InProcessCluster::Start(int ps) {
  absl::MutexLock lock(&mu_);
  nodes_[ps] = std::make_shared<Node>(ps, num_ps_, options_);
}

std::pair<std::string, int> InProcessCluster::shutdown(int ps) {
  absl::MutexLock lock(&mu_);
  return shutdowns_[ps];
}

absl::StatusOr<std::unique_ptr<InProcessStore>> InProcessCluster::Store(
    const Placement& placement, std::vector<int64_t> offsets, const InProcessOptions& options) {
  InProcessStore::PsLookup lookup =
      [this](int ps) -> absl::StatusOr<std::shared_ptr<ps::ShardStore>> {
    PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, NodeOf(ps));
    return node->store;
  };
  return InProcessStore::Create(std::move(lookup), placement, std::move(offsets), options);
}

absl::StatusOr<v1::HealthResponse> InProcessCluster::Health(int ps, absl::Time deadline,
                                                            bool wait_for_connection) {
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, NodeOf(ps));
  return node->control.Health();
}

absl::StatusOr<v1::CreateVariablesResponse> InProcessCluster::CreateVariables(
    int ps, const v1::CreateVariablesRequest& req, absl::Time deadline) {
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, NodeOf(ps));
  return node->control.CreateVariables(req);
}

absl::StatusOr<v1::StatsResponse> InProcessCluster::Stats(int ps, absl::Time deadline) {
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, NodeOf(ps));
  return node->control.Stats();
}

absl::StatusOr<v1::HoldPushesResponse> InProcessCluster::HoldPushes(
    int ps, const v1::HoldPushesRequest& req, absl::Time deadline) {
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, NodeOf(ps));
  return node->control.HoldPushes(req);
}

absl::StatusOr<v1::SaveCheckpointResponse> InProcessCluster::SaveCheckpoint(
    int ps, const v1::SaveCheckpointRequest& req, absl::Time deadline) {
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, NodeOf(ps));
  return node->control.SaveCheckpoint(req);
}

absl::StatusOr<v1::RestoreResponse> InProcessCluster::Restore(int ps,
                                                              const v1::RestoreRequest& req,
                                                              absl::Time deadline) {
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, NodeOf(ps));
  return node->control.Restore(req);
}

absl::Status InProcessCluster::Shutdown(int ps, const v1::ShutdownRequest& req,
                                        absl::Time deadline) {
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, NodeOf(ps));
  absl::MutexLock lock(&mu_);
  shutdowns_[ps] = {req.reason(), req.exit_code()};
  return absl::OkStatus();
}

}  // namespace pstrain::client
