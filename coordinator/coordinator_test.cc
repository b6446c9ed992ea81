#include "coordinator/coordinator.h"

#include <thread>

#include "common/grpc_server.h"
#include "common/testing/status_testing.h"
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
  std::thread w0([&] { EXPECT_OK(ReportDoneToChief(chief, Report(0, 10), absl::Seconds(5), *Security::None())); });
  std::thread w1([&] { EXPECT_OK(ReportDoneToChief(chief, Report(1, 12), absl::Seconds(5), *Security::None())); });
  EXPECT_OK(tracker.WaitForAll(absl::Seconds(10)));
  w0.join();
  w1.join();
  auto reports = tracker.reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].steps(), 12);
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
  EXPECT_NE(s.message().find("ReportDone: ReportDone from worker:4: not one of the job's 1 training "
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

}  // namespace
}  // namespace pstrain::coordinator
