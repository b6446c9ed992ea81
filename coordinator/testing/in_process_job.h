// A job for unit tests of the chief's parts: a small dense model and a
// table on PS held in the test's process (client/in_process_cluster.h), the
// admin the chief would use, a keeper writing real checkpoints under a
// fresh directory, and a replica's store to push through. testonly.
#ifndef PSTRAIN_COORDINATOR_TESTING_IN_PROCESS_JOB_H_
#define PSTRAIN_COORDINATOR_TESTING_IN_PROCESS_JOB_H_

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/in_process_cluster.h"
#include "client/ps_admin.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "base/testing/wait_until.h"
#include "cluster/tf_config.h"
#include "coordinator/ps_keeper.h"
#include "gtest/gtest.h"

namespace pstrain::coordinator::testing {

class InProcessJob {
 public:
  // `num_ps` PS, `replicas` training replicas (a chief and workers), an
  // empty output directory named `name`.
  // `ps_options`: the in-process PS's (their Env, say).
  InProcessJob(const std::string& name, int num_ps, int replicas = 2,
               const std::string& consistency = "async", ps::PsControlOptions ps_options = {})
      : cluster_(num_ps, ps_options), admin_(&cluster_) {
    dir_ = pstrain::testing::TempDir() + "/" + name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const std::vector<VariableDef> variables = {
        {"kernel", {400, 400}}, {"bias", {5}}, {"emb", {50, 4}, true}};
    auto placement = ComputePlacement(variables, num_ps);
    EXPECT_OK(placement);
    placement_ = *placement;
    // The kernel (640 KB) is split over two PS.
    offsets_ = {0, 400 * 400, 400 * 400 + 5};
    consistency_ = consistency;
    cluster_spec_.chief = HostPort{"127.0.0.1", 1};
    for (int w = 1; w < replicas; ++w) cluster_spec_.worker.push_back({"127.0.0.1", 1 + w});
    for (int ps = 0; ps < num_ps; ++ps) cluster_spec_.ps.push_back({"127.0.0.1", 100 + ps});
  }

  // The keeper's options: this job's model, SGD at 0.5, initial values
  // i / 1000 (mod 1).
  PsKeeperOptions KeeperOptions() const {
    PsKeeperOptions o;
    o.output_dir = dir_;
    o.placement = placement_;
    o.offsets = offsets_;
    o.create.optimizer = {"sgd", 0.5f};
    o.create.consistency = *ParseConsistency(consistency_);
    o.create.num_replicas = static_cast<int>(cluster_spec_.worker.size()) + 1;
    o.create.seed = 3;
    o.initial_values = [n = offsets_.back()] {
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000) / 1000.0f;
      return v;
    };
    o.restore_tries = 1;
    return o;
  }

  // Replica `replica`'s store, ready.
  std::unique_ptr<client::InProcessStore> Replica(int replica) {
    client::InProcessOptions options;
    options.replica = replica;
    options.consistency = *ParseConsistency(consistency_);
    auto store = cluster_.Store(placement_, offsets_, options);
    EXPECT_OK(store);
    EXPECT_OK((*store)->WaitUntilReady(absl::Seconds(5)));
    return *std::move(store);
  }

  // Pushes gradient `g` for every dense value `times` times as `replica`.
  void Push(int replica, float g, int times = 1) {
    std::unique_ptr<client::InProcessStore> store = Replica(replica);
    std::vector<float> grads(offsets_.back(), g);
    for (int i = 0; i < times; ++i) ASSERT_OK(store->PushAll(grads.data()));
  }

  // Every dense value, as an observer reads it.
  std::vector<float> Values() {
    client::InProcessOptions options;
    options.replica = -1;
    auto store = cluster_.Store(placement_, offsets_, options);
    EXPECT_OK(store);
    std::vector<float> v(offsets_.back());
    EXPECT_OK((*store)->PullAll(v.data()).status());
    return v;
  }

  client::InProcessCluster& cluster() { return cluster_; }
  client::PsAdmin& admin() { return admin_; }
  const std::string& dir() const { return dir_; }
  const ClusterSpec& cluster_spec() const { return cluster_spec_; }
  const Placement& placement() const { return placement_; }
  const std::vector<int64_t>& offsets() const { return offsets_; }

 private:
  client::InProcessCluster cluster_;
  client::PsAdmin admin_;
  std::string dir_;
  Placement placement_;
  std::vector<int64_t> offsets_;
  std::string consistency_;
  ClusterSpec cluster_spec_;
};

}  // namespace pstrain::coordinator::testing

#endif  // PSTRAIN_COORDINATOR_TESTING_IN_PROCESS_JOB_H_
