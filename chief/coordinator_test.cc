#include "chief/coordinator.h"

#include <thread>

#include "common/grpc_server.h"
#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::chief {
namespace {

v1::ReportDoneRequest Report(int index, int64_t steps) {
  v1::ReportDoneRequest r;
  r.set_task_type("worker");
  r.set_task_index(index);
  r.set_steps(steps);
  return r;
}

TEST(CoordinatorTest, WorkersReportOverGrpcAndTheChiefStopsWaiting) {
  JobTracker tracker({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}});
  CoordinatorServiceImpl service(&tracker);
  ASSERT_OK_AND_ASSIGN(auto server, GrpcServer::Create({"127.0.0.1:0"}, {&service}));
  HostPort chief{"127.0.0.1", server->bound_port()};
  std::thread w0([&] { EXPECT_OK(ReportDoneToChief(chief, Report(0, 10), absl::Seconds(5))); });
  std::thread w1([&] { EXPECT_OK(ReportDoneToChief(chief, Report(1, 12), absl::Seconds(5))); });
  EXPECT_OK(tracker.WaitForAll(absl::Seconds(10)));
  w0.join();
  w1.join();
  auto reports = tracker.reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].steps(), 12);
}

TEST(CoordinatorTest, WaitNamesTheWorkersStillMissing) {
  JobTracker tracker({{"127.0.0.1", 1001}, {"127.0.0.1", 1002}, {"::1", 1003}});
  ASSERT_OK(tracker.MarkDone(Report(1, 1)));
  absl::Status s = tracker.WaitForAll(absl::Milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "after 50ms still waiting for worker:0 (127.0.0.1:1001), worker:2 ([::1]:1003) "
            "to finish training");
}

TEST(CoordinatorTest, RejectsReportsFromOutsideTheCluster) {
  JobTracker tracker({{"127.0.0.1", 1001}});
  CoordinatorServiceImpl service(&tracker);
  ASSERT_OK_AND_ASSIGN(auto server, GrpcServer::Create({"127.0.0.1:0"}, {&service}));
  absl::Status s = ReportDoneToChief({"127.0.0.1", server->bound_port()}, Report(4, 1),
                                     absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ReportDone: ReportDone from worker:4: the cluster has 1 workers"),
            absl::string_view::npos)
      << s;
  EXPECT_TRUE(tracker.reports().empty());
}

}  // namespace
}  // namespace pstrain::chief
