// How the chief ends a job, against PS in the test's process: once every
// replica is done it writes the final checkpoint and final_metrics.json and
// stops the PS with 0; a job that failed for good stops them with its exit
// code; a finished replica whose steps a restore rolled back has its shard
// trained again before the end.
#include "coordinator/job_finisher.h"

#include <random>

#include "client/in_process_cluster.h"
#include "cluster/checkpoint_layout.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/trainer.h"

namespace pstrain::coordinator {
namespace {

using ::testing::HasSubstr;

// 128 examples of 16 features in 3 classes.
data::Dataset Examples() {
  data::Dataset d;
  d.num_examples = 128;
  d.example_dim = 16;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int i = 0; i < d.num_examples; ++i) {
    for (int j = 0; j < d.example_dim; ++j) d.features.push_back(u(rng));
    d.labels.push_back(i % 3);
  }
  return d;
}

// A chief and one worker training a small MLP on 2 PS in this process.
class JobFinisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.model = model::NetworkSpec::FromWidths(16, {8}, 3);
    job_.optimizer = {"sgd", 0.1f};
    job_.batch_size = 16;
    job_.epochs = 1;
    job_.device = model::Device::Cpu();
    ASSERT_OK_AND_ASSIGN(net_, model::Network::Create(job_.model, 1024));
    ASSERT_OK_AND_ASSIGN(placement_, ComputePlacement(net_->variables(), 2));
    dir_ = pstrain::testing::TempDir() + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    spec_.chief = HostPort{"127.0.0.1", 1};
    spec_.worker = {{"127.0.0.1", 2}};
    spec_.ps = {{"127.0.0.1", 3}, {"127.0.0.1", 4}};
    tracker_ = std::make_unique<JobTracker>(spec_, true);
    PsKeeperOptions keep;
    keep.output_dir = dir_;
    keep.placement = placement_;
    keep.offsets = net_->offsets();
    keep.create.optimizer = job_.optimizer;
    keep.create.num_replicas = 2;
    keep.create.seed = job_.seed;
    keep.initial_values = [this] { return net_->InitialParameters(job_.seed); };
    keeper_ = std::make_unique<PsKeeper>(&admin_, keep);
    ASSERT_OK_AND_ASSIGN(const int64_t generation, keeper_->TakeOver());
    tracker_->SetGeneration(generation);
    client::InProcessOptions observer;
    observer.replica = -1;
    ASSERT_OK_AND_ASSIGN(observer_, cluster_.Store(placement_, net_->offsets(), observer));
    test_ = Examples();
  }

  JobFinisherOptions Options() {
    JobFinisherOptions o;
    o.job = job_;
    o.output_dir = dir_;
    o.ps_wait = absl::Seconds(5);
    o.schedule = "test";
    o.started = absl::Now();
    o.poll = absl::Milliseconds(10);
    return o;
  }

  // Trains `replica` (0: chief:0, 1: worker:0) through the in-process PS;
  // its done report.
  absl::StatusOr<v1::ReportDoneRequest> Train(int replica) {
    client::InProcessOptions options;
    options.replica = replica;
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<client::InProcessStore> store,
                             cluster_.Store(placement_, net_->offsets(), options));
    PSTRAIN_RETURN_IF_ERROR(store->WaitUntilReady(absl::Seconds(5)));
    train::TrainerOptions trainer;
    trainer.job = job_;
    trainer.replica = replica;
    trainer.num_replicas = 2;
    trainer.log_every_steps = 1000;
    data::ShardIterator shard(&test_, replica, 2, job_.batch_size, job_.seed);
    PSTRAIN_ASSIGN_OR_RETURN(train::TrainerResult r, RunTrainer(trainer, &shard, store.get()));
    v1::ReportDoneRequest report;
    report.set_task_type(replica == 0 ? "chief" : "worker");
    report.set_task_index(0);
    report.set_steps(r.steps);
    report.set_examples(r.examples);
    report.set_schedule_steps(r.schedule_steps);
    return report;
  }

  model::JobSpec job_;
  std::unique_ptr<model::Network> net_;
  Placement placement_;
  std::string dir_;
  ClusterSpec spec_;
  client::InProcessCluster cluster_{2};
  client::PsAdmin admin_{&cluster_};
  std::unique_ptr<JobTracker> tracker_;
  std::unique_ptr<PsKeeper> keeper_;
  std::unique_ptr<client::InProcessStore> observer_;
  data::Dataset test_;
};

TEST_F(JobFinisherTest, EveryReplicaDoneEndsWithTheFinalCheckpointTheMetricsAndThePsStopped) {
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK_AND_ASSIGN(v1::ReportDoneRequest report, Train(r));
    ASSERT_OK(tracker_->MarkDone(report));
  }
  JobFinisherOptions options = Options();
  // The end is recorded before any PS is told to stop.
  std::vector<std::string> recorded;
  options.record_end = [&](const absl::Status& outcome) {
    recorded.push_back(absl::StrCat(outcome.ToString(), ", ps:0 told: ",
                                    cluster_.shutdown(0).second >= 0 ? "yes" : "no"));
  };
  JobFinisher finisher(&admin_, keeper_.get(), tracker_.get(), observer_.get(), net_.get(),
                       &test_, options);
  ASSERT_OK_AND_ASSIGN(Json metrics, finisher.Finish());
  EXPECT_EQ(recorded, std::vector<std::string>{"OK, ps:0 told: no"});
  // 64 examples per shard, batch 16: 4 steps each, 8 in all.
  EXPECT_EQ(metrics["global_step"].get<int64_t>(), 8);
  EXPECT_EQ(metrics["global_steps_expected"].get<int64_t>(), 8);
  EXPECT_EQ(metrics["global_steps_lost"].get<int64_t>(), 0);
  EXPECT_EQ(metrics["updates_applied"].get<int64_t>(), 8);
  EXPECT_EQ(metrics["repeated_pushes_not_applied"].get<int64_t>(), 0);
  EXPECT_EQ(metrics["test_examples"].get<int64_t>(), 128);
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadCheckpointIndex(dir_));
  EXPECT_EQ(index.step, 8);
  EXPECT_TRUE(index.final);
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir_ + "/final_metrics.json"));
  EXPECT_THAT(text, HasSubstr("\"schedule\":\"test\""));
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_EQ(cluster_.shutdown(ps), std::make_pair(std::string("job finished"), 0)) << ps;
  }
}

// An update applied twice (here: an unnumbered push from worker:0 after it
// ran its whole schedule, as a replica that started its shard over once
// sent) fails the job, naming the replica and both counts, and writes no
// final metrics.
TEST_F(JobFinisherTest, AnUpdateAppliedTwiceFailsTheJobWithBothCounts) {
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK_AND_ASSIGN(v1::ReportDoneRequest report, Train(r));
    ASSERT_OK(tracker_->MarkDone(report));
  }
  client::InProcessOptions again;
  again.replica = 1;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<client::InProcessStore> store,
                       cluster_.Store(placement_, net_->offsets(), again));
  ASSERT_OK(store->WaitUntilReady(absl::Seconds(5)));
  std::vector<float> grads(net_->num_parameters(), 0.01f);
  ASSERT_OK(store->PushAll(grads.data()));
  JobFinisher finisher(&admin_, keeper_.get(), tracker_.get(), observer_.get(), net_.get(),
                       &test_, Options());
  absl::Status s = finisher.Finish().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "updates were applied more than once (global step 9, schedule 8): worker:0 5 pushes "
            "applied of its 4; the parameters are not the job's");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/final_metrics.json"));
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_EQ(cluster_.shutdown(ps).first, "job failed") << ps;
  }
}

TEST_F(JobFinisherTest, AJobThatFailedForGoodStopsThePsWithItsExitCode) {
  // A task refused as it joined (the coordinator marks it the
  // configuration's): every PS exits 2.
  tracker_->Fail(WithFailureKind(absl::InvalidArgumentError("worker:0 runs another model"),
                                 FailureKind::kBadConfig));
  JobFinisherOptions options = Options();
  std::vector<std::string> recorded;
  options.record_end = [&](const absl::Status& outcome) {
    recorded.push_back(std::string(outcome.message()));
  };
  JobFinisher finisher(&admin_, keeper_.get(), tracker_.get(), observer_.get(), net_.get(),
                       &test_, options);
  absl::Status s = finisher.Finish().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(recorded, std::vector<std::string>{"worker:0 runs another model"});
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_EQ(cluster_.shutdown(ps), std::make_pair(std::string("job failed"), 2)) << ps;
  }
}

TEST_F(JobFinisherTest, AFailureWithNoKindIsPermanentWhateverItsCode) {
  // A library's FailedPrecondition once meant "bad configuration" by its
  // code alone; past setup, the chief judges it permanent (1).
  JobFinisher finisher(&admin_, keeper_.get(), tracker_.get(), observer_.get(), net_.get(),
                       &test_, Options());
  finisher.StopParameterServers(absl::FailedPreconditionError("a state no restart fixes"));
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_EQ(cluster_.shutdown(ps), std::make_pair(std::string("job failed"), 1)) << ps;
  }
}

TEST_F(JobFinisherTest, ARetryableFailureLeavesThePsRunning) {
  JobFinisherOptions options = Options();
  bool recorded = false;
  options.record_end = [&](const absl::Status&) { recorded = true; };  // not the job's end
  JobFinisher finisher(&admin_, keeper_.get(), tracker_.get(), observer_.get(), net_.get(),
                       &test_, options);
  finisher.StopParameterServers(absl::UnavailableError("ps:1 lost"));
  EXPECT_FALSE(recorded);
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_EQ(cluster_.shutdown(ps), std::make_pair(std::string(), -1)) << ps;
  }
}

TEST_F(JobFinisherTest, ARolledBackFinishedReplicaIsTrainedAgainBeforeTheEnd) {
  ASSERT_OK_AND_ASSIGN(v1::ReportDoneRequest worker, Train(1));
  ASSERT_OK(tracker_->MarkDone(worker));
  // A restore rolled every PS back to step 0 after worker:0 finished.
  ASSERT_OK_AND_ASSIGN(int64_t step, keeper_->RestoreAll({}));
  EXPECT_EQ(step, 0);
  tracker_->SetGeneration(keeper_->generation());
  ASSERT_OK_AND_ASSIGN(v1::ReportDoneRequest chief, Train(0));
  ASSERT_OK(tracker_->MarkDone(chief));
  JobFinisherOptions options = Options();
  std::vector<std::string> made_up;
  options.train_replica = [&](const TaskId& task) {
    made_up.push_back(task.ToString());
    return Train(1);
  };
  JobFinisher finisher(&admin_, keeper_.get(), tracker_.get(), observer_.get(), net_.get(),
                       &test_, options);
  ASSERT_OK_AND_ASSIGN(Json metrics, finisher.Finish());
  EXPECT_EQ(made_up, (std::vector<std::string>{"worker:0"}));
  EXPECT_EQ(metrics["global_step"].get<int64_t>(), 8);
  EXPECT_EQ(metrics["global_steps_made_up"].get<int64_t>(), 4);
  EXPECT_EQ(metrics["global_steps_lost"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace pstrain::coordinator
