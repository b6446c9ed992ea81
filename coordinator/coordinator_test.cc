#include "coordinator/coordinator.h"

#include <filesystem>
#include <thread>

#include "base/exit_codes.h"
#include "base/file_util.h"
#include "job/chief_client.h"
#include "transport/grpc_server.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::coordinator {
namespace {

v1::ReportDoneRequest Report(int index, int64_t steps) {
  v1::ReportDoneRequest r;
  r.set_task_type("worker");
  r.set_task_index(index);
  r.set_steps(steps);
  return r;
}

// Join's answer, or a failure naming the status.
bool Joined(JobTracker& tracker, const TaskId& task) {
  auto done = tracker.Join(task);
  EXPECT_OK(done.status());
  return done.value_or(false);
}

ClusterSpec Cluster(std::vector<HostPort> workers, bool with_chief = false) {
  ClusterSpec c;
  if (with_chief) c.chief = HostPort{"127.0.0.1", 1000};
  c.ps = {{"127.0.0.1", 999}};
  c.worker = std::move(workers);
  return c;
}

TEST(CoordinatorTest, WorkersReportOverGrpcAndTheChiefStopsWaiting) {
  JobTracker tracker(Cluster({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}}), true);
  CoordinatorServiceImpl service(&tracker, Security::None());
  ASSERT_OK_AND_ASSIGN(auto server, GrpcServer::Create({"127.0.0.1:0"}, {&service}));
  HostPort chief{"127.0.0.1", server->bound_port()};
  std::thread w0([&] {
    EXPECT_OK(ReportDoneToChief(chief, Report(0, 10), absl::Seconds(5), *Security::None()));
  });
  std::thread w1([&] {
    EXPECT_OK(ReportDoneToChief(chief, Report(1, 12), absl::Seconds(5), *Security::None()));
  });
  EXPECT_OK(tracker.WaitForAll(absl::Seconds(10)));
  w0.join();
  w1.join();
  auto reports = tracker.reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].steps(), 12);
}

// A replica that failed for good says so, and the chief's wait ends at
// once with its code instead of waiting for a replica that will not come.
TEST(CoordinatorTest, AReplicaThatFailedForGoodFailsTheJobWithItsCode) {
  JobTracker tracker(Cluster({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}}), true);
  CoordinatorServiceImpl service(&tracker, Security::None());
  ASSERT_OK_AND_ASSIGN(auto server, GrpcServer::Create({"127.0.0.1:0"}, {&service}));
  HostPort chief{"127.0.0.1", server->bound_port()};
  ReportFailureToChief(chief, TaskId{Role::kWorker, 1},
                       absl::DataLossError("train-00003.tfrecord: truncated record"), 2,
                       *Security::None());
  const absl::Time start = absl::Now();
  absl::Status s = tracker.WaitForAll(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(s.message(), "worker:1 failed for good (exit 2): train-00003.tfrecord: truncated record");
  EXPECT_EQ(RoleExitCode(s, FailureKind::kPermanent), 2);
  EXPECT_TRUE(tracker.reports().empty());
}

// Once the job failed for good, the chief answers every task that asks
// with its code and why (what tells them when run.json cannot): a Join is
// refused with it, JobOutcome says it, JobFailureCheck returns it, and the
// chief counts who has been told. A failure only for now (a lost PS:
// retryable) is not answered.
TEST(CoordinatorTest, AFailureForGoodIsAnsweredToEveryTaskThatAsks) {
  JobTracker tracker(Cluster({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}}), true);
  tracker.SetGeneration(1);
  CoordinatorServiceImpl service(&tracker, Security::None());
  ASSERT_OK_AND_ASSIGN(auto server, GrpcServer::Create({"127.0.0.1:0"}, {&service}));
  HostPort chief{"127.0.0.1", server->bound_port()};
  auto stub = v1::Coordinator::NewStub(
      Security::None()->CreateChannel(chief.ToString(), grpc::ChannelArguments()));
  std::function<absl::Status()> check =
      JobFailureCheck(pstrain::testing::TempDir() + "/no-such-run", {}, Json::object(),
                      absl::Now(), chief, "evaluator:0", Security::None(), absl::ZeroDuration());

  tracker.Fail(absl::UnavailableError("ps:0 (127.0.0.1:999) lost for 60s"));
  EXPECT_EQ(AskChiefForFailure(*stub, "evaluator:0", absl::Seconds(5)), std::nullopt);
  EXPECT_OK(check());
  ASSERT_OK_AND_ASSIGN(bool done, JoinChief(chief, TaskId{Role::kWorker, 0}, absl::Seconds(5),
                                            *Security::None()));
  EXPECT_FALSE(done);

  JobTracker failed(Cluster({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}}), true);
  failed.SetGeneration(1);
  failed.Fail(WithFailureKind(absl::FailedPreconditionError("cannot create out/LOCK: Read-only "
                                                            "file system"),
                              FailureKind::kBadConfig));
  CoordinatorServiceImpl failed_service(&failed, Security::None());
  ASSERT_OK_AND_ASSIGN(auto failed_server,
                       GrpcServer::Create({"127.0.0.1:0"}, {&failed_service}));
  HostPort failed_chief{"127.0.0.1", failed_server->bound_port()};
  auto failed_stub = v1::Coordinator::NewStub(
      Security::None()->CreateChannel(failed_chief.ToString(), grpc::ChannelArguments()));
  EXPECT_FALSE(failed.WaitUntilTold({"worker:1", "evaluator:0"}, absl::Milliseconds(10)));
  absl::StatusOr<bool> join = JoinChief(failed_chief, TaskId{Role::kWorker, 1},
                                        absl::Seconds(5), *Security::None());
  const std::string said =
      "the job failed for good (exit 2): cannot create out/LOCK: Read-only file system";
  EXPECT_EQ(join.status().message(), said);
  EXPECT_EQ(RoleExitCode(join.status(), FailureKind::kRetryable), 2);
  std::optional<absl::Status> asked =
      AskChiefForFailure(*failed_stub, "evaluator:0", absl::Seconds(5));
  ASSERT_TRUE(asked.has_value());
  EXPECT_EQ(asked->message(), said);
  EXPECT_EQ(RoleExitCode(*asked, FailureKind::kRetryable), 2);
  EXPECT_TRUE(failed.WaitUntilTold({"worker:1", "evaluator:0"}, absl::Milliseconds(10)));
  std::function<absl::Status()> failed_check =
      JobFailureCheck(pstrain::testing::TempDir() + "/no-such-run", {}, Json::object(),
                      absl::Now(), failed_chief, "evaluator:1", Security::None(),
                      absl::ZeroDuration());
  absl::Status checked = failed_check();
  EXPECT_EQ(checked.message(), said);
  EXPECT_EQ(RoleExitCode(checked, FailureKind::kRetryable), 2);
}

TEST(CoordinatorTest, WaitNamesTheWorkersStillMissing) {
  JobTracker tracker(Cluster({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}, {"::1", 1003}}), false);
  ASSERT_OK(tracker.MarkDone(Report(1, 1)));
  absl::Status s = tracker.WaitForAll(absl::Milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "after 50ms still waiting for worker:0 (127.0.0.1:1001), worker:2 ([::1]:1003) "
            "to finish training");
}

// A training chief is replica 0 and reports like the workers, which follow it.
TEST(CoordinatorTest, ATrainingChiefIsReplicaZero) {
  JobTracker tracker(Cluster({{"127.0.0.1", 1001}}, /*with_chief=*/true), true);
  ASSERT_EQ(tracker.replicas().size(), 2u);
  ASSERT_OK(tracker.MarkDone(Report(0, 7)));
  absl::Status s = tracker.WaitForAll(absl::Milliseconds(10));
  EXPECT_EQ(s.message(),
            "after 10ms still waiting for chief:0 (127.0.0.1:1000) to finish training");
  v1::ReportDoneRequest chief = Report(0, 9);
  chief.set_task_type("chief");
  ASSERT_OK(tracker.MarkDone(chief));
  EXPECT_OK(tracker.WaitForAll(absl::Milliseconds(10)));
  auto reports = tracker.reports();
  EXPECT_EQ(reports[0].steps(), 9);
  EXPECT_EQ(reports[1].steps(), 7);

  // With the chief only coordinating, its report is refused.
  JobTracker coordinating(Cluster({{"127.0.0.1", 1001}}, true), false);
  s = coordinating.MarkDone(chief);
  EXPECT_EQ(s.message(),
            "ReportDone from chief:0: not one of the job's 1 training replicas (worker:0)");
}

TEST(CoordinatorTest, RejectsReportsFromOutsideTheCluster) {
  JobTracker tracker(Cluster({{"127.0.0.1", 1001}}), true);
  CoordinatorServiceImpl service(&tracker, Security::None());
  ASSERT_OK_AND_ASSIGN(auto server, GrpcServer::Create({"127.0.0.1:0"}, {&service}));
  absl::Status s = ReportDoneToChief({"127.0.0.1", server->bound_port()}, Report(4, 1),
                                     absl::Seconds(5), *Security::None());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.message().find("ReportDone: ReportDone from worker:4: not one of the job's 1 training "
                       "replicas (worker:0)"),
      absl::string_view::npos)
      << s;
  EXPECT_TRUE(tracker.reports().empty());
}

TEST(CoordinatorTest, ReportsWithoutTheTokenAreRefusedAndNotCounted) {
  JobTracker tracker(Cluster({{"127.0.0.1", 1001}}), true);
  SecurityConfig right, wrong;
  right.token = "the-right-token-0123456789";
  wrong.token = "the-wrong-token-0123456789";
  ASSERT_OK_AND_ASSIGN(auto server_side, Security::Load(right));
  ASSERT_OK_AND_ASSIGN(auto client_wrong, Security::Load(wrong));
  CoordinatorServiceImpl service(&tracker, server_side);
  ASSERT_OK_AND_ASSIGN(auto server, GrpcServer::Create({"127.0.0.1:0"}, {&service}));
  const HostPort chief{"127.0.0.1", server->bound_port()};
  absl::Status s = ReportDoneToChief(chief, Report(0, 1), absl::Seconds(5), *client_wrong);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_NE(s.message().find("the call's cluster token is wrong"), absl::string_view::npos) << s;
  s = ReportDoneToChief(chief, Report(0, 1), absl::Seconds(5), *Security::None());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_TRUE(tracker.reports().empty());
  EXPECT_OK(ReportDoneToChief(chief, Report(0, 1), absl::Seconds(5), *server_side));
  EXPECT_EQ(tracker.reports().size(), 1u);
}

// Reports kept in a directory are on disk before they are acknowledged and
// come back in a new tracker (a restarted chief). With the PS still on the
// same generation, the replica is done (Join says so) and not waited for;
// reports and joins wait for the generation to be known.
TEST(CoordinatorTest, KeptReportsSurviveARestartedChief) {
  const std::string dir = testing::TempDir() + "/kept_reports";
  std::filesystem::remove_all(dir);
  const ClusterSpec cluster = Cluster({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}}, true);
  const TaskId w0{Role::kWorker, 0}, w1{Role::kWorker, 1};
  {
    JobTracker tracker(cluster, true);
    ASSERT_OK_AND_ASSIGN(int read, tracker.KeepReportsIn(dir, absl::Seconds(60)));
    EXPECT_EQ(read, 0);
    v1::ReportDoneRequest r = Report(1, 12);
    r.set_schedule_steps(40);
    EXPECT_EQ(tracker.MarkDone(r).code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(tracker.Join(w1).status().code(), absl::StatusCode::kUnavailable);
    tracker.SetGeneration(3);
    ASSERT_OK(tracker.MarkDone(r));
    EXPECT_TRUE(std::filesystem::exists(dir + "/done/worker-1"));
  }
  JobTracker restarted(cluster, true);
  ASSERT_OK_AND_ASSIGN(int read, restarted.KeepReportsIn(dir, absl::Seconds(60)));
  EXPECT_EQ(read, 1);
  restarted.SetGeneration(3);
  EXPECT_TRUE(Joined(restarted, w1));
  EXPECT_FALSE(Joined(restarted, w0));
  auto reports = restarted.reports();
  ASSERT_EQ(reports.count(2), 1u);  // worker 1 is replica 2 after the chief
  EXPECT_EQ(reports[2].steps(), 12);
  EXPECT_EQ(reports[2].schedule_steps(), 40);
  EXPECT_EQ(reports[2].generation(), 3);
  absl::Status s = restarted.WaitForAll(absl::Milliseconds(10));
  EXPECT_EQ(s.message(),
            "after 10ms still waiting for chief:0 (127.0.0.1:1000), worker:0 (127.0.0.1:1001) to "
            "finish training");
}

// After a restore (a new generation), a kept report is stale: its replica,
// when it joins again, trains again (the report is dropped, from disk too);
// one that never comes back is counted once the rejoin grace has passed.
TEST(CoordinatorTest, ReportsRolledBackByARestoreAreRedoneOrCountedAfterAGrace) {
  const std::string dir = testing::TempDir() + "/stale_reports";
  std::filesystem::remove_all(dir);
  const ClusterSpec cluster = Cluster({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}});
  const TaskId w0{Role::kWorker, 0};
  {
    JobTracker tracker(cluster, true);
    ASSERT_OK(tracker.KeepReportsIn(dir, absl::ZeroDuration()).status());
    tracker.SetGeneration(1);
    ASSERT_OK(tracker.MarkDone(Report(0, 5)));
    ASSERT_OK(tracker.MarkDone(Report(1, 6)));
  }
  JobTracker restarted(cluster, true);
  ASSERT_OK(restarted.KeepReportsIn(dir, absl::Milliseconds(300)).status());
  restarted.SetGeneration(2);  // restored from a checkpoint
  EXPECT_FALSE(Joined(restarted, w0));
  EXPECT_FALSE(std::filesystem::exists(dir + "/done/worker-0"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/done/worker-1"));
  // worker:1 never joins: its stale report counts after the grace; worker:0
  // trains again and reports under the new generation.
  const absl::Time start = absl::Now();
  ASSERT_OK(restarted.MarkDone(Report(0, 7)));
  EXPECT_OK(restarted.WaitForAll(absl::Seconds(10)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_EQ(restarted.reports()[0].generation(), 2);
  EXPECT_EQ(restarted.reports()[1].generation(), 1);
  // Once the job finished, every join is answered done.
  restarted.SetFinished();
  EXPECT_TRUE(Joined(restarted, w0));
}

// A kept report that is damaged, or names a task outside the cluster (an
// output directory reused for another cluster), is refused by name.
TEST(CoordinatorTest, DamagedKeptReportsAreErrorsNamingTheFile) {
  const std::string dir = testing::TempDir() + "/damaged_reports";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/done");
  ASSERT_OK(WriteFileAtomically(dir + "/done/worker-0", "\xff\xff\xff"));
  JobTracker tracker(Cluster({{"127.0.0.1", 1001}}), true);
  absl::Status s = tracker.KeepReportsIn(dir, absl::ZeroDuration()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "done report " + dir + "/done/worker-0 does not parse");
  ASSERT_OK(WriteFileAtomically(dir + "/done/worker-0", Report(3, 1).SerializeAsString()));
  s = tracker.KeepReportsIn(dir, absl::ZeroDuration()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("is not one of this job's training replicas (ReportDone from "
                                   "worker:3: not one of the job's 1 training replicas"));
  // A report half written (never acknowledged) is passed over.
  std::filesystem::remove(dir + "/done/worker-0");
  ASSERT_OK(WriteFileAtomically(dir + "/done/worker-0.tmp", "partial"));
  ASSERT_OK_AND_ASSIGN(int read, tracker.KeepReportsIn(dir, absl::ZeroDuration()));
  EXPECT_EQ(read, 0);
}

}  // namespace
}  // namespace pstrain::coordinator
