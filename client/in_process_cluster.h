// A job's PS held in this process, each a ShardStore with its control
// logic (store/ps_control.h), reached by function call: the chief's parts
// and the trainer run against it in unit tests with a PS's real rules and
// real checkpoint files, no network and no processes. A test may stop a PS
// (its calls fail Unavailable, as a lost process's do) and start it again
// empty, as an orchestrator restarting it would.
//
// Thread-safe.
#ifndef PSTRAIN_CLIENT_IN_PROCESS_CLUSTER_H_
#define PSTRAIN_CLIENT_IN_PROCESS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/control_channel.h"
#include "client/in_process_store.h"
#include "store/ps_control.h"

namespace pstrain::client {

class InProcessCluster final : public PsControlChannel {
 public:
  // `num_ps` PS, started and empty.
  explicit InProcessCluster(int num_ps, ps::PsControlOptions options = {});

  // A replica's (or, with replica -1, an observer's) store over these PS.
  absl::StatusOr<std::unique_ptr<InProcessStore>> Store(const Placement& placement,
                                                        std::vector<int64_t> offsets,
                                                        const InProcessOptions& options);

  // PS `ps`'s store now (null while stopped).
  std::shared_ptr<ps::ShardStore> store(int ps) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops PS `ps`: calls to it fail Unavailable until Start.
  void Stop(int ps) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts PS `ps` again, empty (no variables, generation 0).
  void Start(int ps) ABSL_LOCKS_EXCLUDED(mu_);
  // The last Shutdown each PS was asked for: its reason and exit code
  // ("", -1 when none).
  std::pair<std::string, int> shutdown(int ps) ABSL_LOCKS_EXCLUDED(mu_);

  // PsControlChannel.
  int num_ps() const override { return num_ps_; }
  std::string PsName(int ps) const override;
  absl::StatusOr<v1::HealthResponse> Health(int ps, absl::Time deadline,
                                            bool wait_for_connection) override;
  absl::StatusOr<v1::CreateVariablesResponse> CreateVariables(int ps,
                                                              const v1::CreateVariablesRequest& req,
                                                              absl::Time deadline) override;
  absl::StatusOr<v1::StatsResponse> Stats(int ps, absl::Time deadline) override;
  absl::StatusOr<v1::HoldPushesResponse> HoldPushes(int ps, const v1::HoldPushesRequest& req,
                                                    absl::Time deadline) override;
  absl::StatusOr<v1::SaveCheckpointResponse> SaveCheckpoint(int ps,
                                                            const v1::SaveCheckpointRequest& req,
                                                            absl::Time deadline) override;
  absl::StatusOr<v1::RestoreResponse> Restore(int ps, const v1::RestoreRequest& req,
                                              absl::Time deadline) override;
  absl::Status Shutdown(int ps, const v1::ShutdownRequest& req, absl::Time deadline) override;

 private:
  // One PS: its store and control logic, kept alive by a call in progress.
  struct Node {
    explicit Node(int ps, int num_ps, const ps::PsControlOptions& options)
        : store(std::make_shared<ps::ShardStore>(ps, num_ps)), control(store.get(), options) {}
    std::shared_ptr<ps::ShardStore> store;
    ps::PsControl control;
  };
  // PS `ps`'s node, or Unavailable naming it while it is stopped.
  absl::StatusOr<std::shared_ptr<Node>> NodeOf(int ps) ABSL_LOCKS_EXCLUDED(mu_);

  const int num_ps_;
  const ps::PsControlOptions options_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Node>> nodes_ ABSL_GUARDED_BY(mu_);  // null: stopped
  std::vector<std::pair<std::string, int>> shutdowns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_IN_PROCESS_CLUSTER_H_
