// The all-reduce mode's correctness, on the real data: replicas that average
// their gradients over a ring on loopback (transport/ring.h,
// client/collective_store.h), each training with batch 32, hold the same
// bits after the run, a rerun repeats them, and two of them end where one
// local run of batch 64 fed the same examples ends, to float rounding (the
// data sharding makes the k-th batches of the two replicas together the
// k-th batch of 64; the ring averages the two mean gradients; both apply the
// same optimizer code). With an embedding table, the replicas all-gather
// their row gradients and apply them as the local run's table does. And a
// replica that cannot start, or that fails for good in mid-training, ends
// every replica with its code.
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "allreduce/allreduce_main.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/run_record.h"
#include "model/model_config.h"
#include "model/network.h"
#include "tests/testing/fashion_mnist.h"
#include "tests/testing/keyword_texts.h"
#include "tests/testing/streamed_csv.h"
#include "train/local_trainer.h"
#include "transport/ring.h"
#include "transport/testing/loopback_ring.h"

namespace pstrain {
namespace {

// Trains `job` on `n` replicas joined by a ring, each in a thread of this
// process (dense gradients as bfloat16 on the ring when `job` says so);
// their results by replica.
std::vector<train::LocalResult> TrainByAllReduce(
    const model::JobSpec& job, int n,
    const std::function<void(int replica, train::LocalOptions*)>& tweak = nullptr) {
  std::vector<train::LocalResult> results(n);
  std::vector<absl::Status> status(n);
  testing::OnLoopbackRing(n, nullptr, [&](int r, Ring& ring) {
    train::ReplicaGroup group;
    group.replica = r;
    group.num_replicas = n;
    for (int i = 0; i < n; ++i) group.names.push_back(absl::StrCat("worker:", i));
    if (absl::Status s = allreduce::TrainOverRing(&ring, &group, job); !s.ok()) {
      status[r] = s;
      return;
    }
    train::LocalOptions local;
    local.log_every_steps = 1000;
    local.group = &group;
    if (tweak) tweak(r, &local);
    auto result = train::RunLocal(job, local);
    if (!result.ok()) {
      status[r] = result.status();
      return;
    }
    results[r] = *std::move(result);
  });
  for (int r = 0; r < n; ++r) EXPECT_OK(status[r]) << "replica " << r;
  return results;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every id of each table, read from a result.
std::vector<std::vector<float>> TableRows(train::LocalResult& result) {
  std::vector<std::vector<float>> rows;
  for (int t = 0; t < result.tables.size(); ++t) {
    train::LocalTable& table = result.tables[t];
    std::vector<int64_t> ids(table.vocabulary());
    for (int64_t i = 0; i < table.vocabulary(); ++i) ids[i] = i;
    rows.emplace_back(ids.size() * table.dim());
    EXPECT_OK(table.Read(ids, rows.back().data()));
  }
  return rows;
}

// Two replicas of batch 32 against one local run of batch 64 after `steps`
// steps that move some parameter by more than `min_moved`.
void ExpectAllReduceEqualsLocal(model::JobSpec job, int steps, double min_moved,
                                double tolerance) {
  job.max_steps = steps;
  model::JobSpec local_job = job;
  local_job.batch_size = 64;
  ASSERT_OK_AND_ASSIGN(train::LocalResult local, train::RunLocal(local_job, 1000));
  ASSERT_OK_AND_ASSIGN(auto net, model::Network::Create(job.model, 64));
  const std::vector<float> initial = net->InitialParameters(job.seed);
  job.batch_size = 32;
  std::vector<train::LocalResult> replicas = TrainByAllReduce(job, 2);
  ASSERT_EQ(replicas[0].steps, steps);
  EXPECT_TRUE(SameBits(replicas[0].params, replicas[1].params)) << "the replicas differ";
  ASSERT_EQ(replicas[0].params.size(), local.params.size());
  double max_diff = 0, max_moved = 0;
  for (size_t i = 0; i < local.params.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double{replicas[0].params[i]} - local.params[i]));
    max_moved = std::max(max_moved, std::fabs(double{local.params[i]} - initial[i]));
  }
  std::printf("after %d steps: parameters moved up to %.3g; all-reduce and local differ by at "
              "most %.3g\n",
              steps, max_moved, max_diff);
  EXPECT_GT(max_moved, min_moved);
  EXPECT_LT(max_diff, tolerance) << "largest parameter difference, all-reduce vs local";
  std::vector<std::vector<float>> local_rows = TableRows(local);
  std::vector<std::vector<float>> rows0 = TableRows(replicas[0]);
  std::vector<std::vector<float>> rows1 = TableRows(replicas[1]);
  ASSERT_EQ(local_rows.size(), rows0.size());
  for (size_t t = 0; t < local_rows.size(); ++t) {
    EXPECT_TRUE(SameBits(rows0[t], rows1[t])) << "the replicas' table " << t << " differ";
    double row_diff = 0;
    for (size_t i = 0; i < local_rows[t].size(); ++i) {
      row_diff = std::max(row_diff, std::fabs(double{rows0[t][i]} - local_rows[t][i]));
    }
    std::printf("table %zu: all-reduce and local differ by at most %.3g\n", t, row_diff);
    EXPECT_GT(replicas[0].tables[t].rows(), 50);
    EXPECT_LT(row_diff, tolerance);
  }
}

class AllReduceMatchesLocalTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AllReduceMatchesLocalTest, TwoReplicasOfBatch32EqualOneLocalRunOfBatch64) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config, model::LoadModelConfigFile(GetParam()));
  model::JobSpec job = config.job;
  job.seed = 5;
  if (GetParam().find("resnet") != std::string::npos) {
    // As in sync_matches_local_test: rounding apart, a max pool may pick
    // another of two near-equal values, so a short run at a small rate.
    job.optimizer = OptimizerSpec{"sgd", 0.01f};
    ExpectAllReduceEqualsLocal(job, 10, 0.005, 1e-4);
    return;
  }
  ExpectAllReduceEqualsLocal(job, 60, 0.02, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Models, AllReduceMatchesLocalTest,
                         ::testing::Values("configs/fashion_mnist_mlp.pbtxt",
                                           "configs/fashion_mnist_cnn.pbtxt",
                                           "configs/fashion_mnist_resnet.pbtxt"),
                         [](const auto& info) {
                           const std::string& c = info.param;
                           return std::string(c.find("resnet") != std::string::npos ? "ResNet"
                                              : c.find("cnn") != std::string::npos  ? "Cnn"
                                                                                    : "Mlp");
                         });

// --bytes_per_pack=auto, settled by the whole ring: no packs where every
// link is shared memory (one host), 256 KiB packs where a link is TCP.
TEST(AllReduceAutoPackTest, PacksOnlyWhenALinkOfTheRingIsTcp) {
  for (bool shared : {true, false}) {
    int64_t packs[2] = {-2, -2};
    testing::OnLoopbackRing(
        2, [&](RingOptions& o) { o.shared_memory = shared; },
        [&](int r, Ring& ring) {
          train::ReplicaGroup group;
          model::JobSpec job;
          ASSERT_EQ(job.bytes_per_pack, -1);
          ASSERT_OK(allreduce::TrainOverRing(&ring, &group, job));
          packs[r] = group.bytes_per_pack;
        });
    const int64_t expected = shared ? 0 : model::kAutoPackBytes;
    EXPECT_EQ(packs[0], expected) << (shared ? "shared memory" : "tcp");
    EXPECT_EQ(packs[1], expected) << (shared ? "shared memory" : "tcp");
  }
}

// Every layer in a pack of its own (--bytes_per_pack=1), each all-reduced
// on the store's thread while backprop differentiates the layers below:
// still where the local run ends.
TEST(AllReduceMatchesLocalPackedTest, TwoReplicasOfBatch32EqualOneLocalRunOfBatch64) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_cnn.pbtxt"));
  model::JobSpec job = config.job;
  job.seed = 5;
  job.bytes_per_pack = 1;
  ExpectAllReduceEqualsLocal(job, 60, 0.02, 2e-5);
}

// The seeds' text CNN (embedding -> conv1d -> pool -> conv1d -> pool ->
// flatten -> dense) on a small corpus, 40 steps (see
// sync_matches_local_test.cc for why not more), its dense layers in packs
// of their own, the table rows' all-gathers between them.
TEST(AllReduceMatchesLocalTextCnnTest, TwoReplicasOfBatch32EqualOneLocalRunOfBatch64) {
  ASSERT_OK_AND_ASSIGN(const std::string corpus,
                       testing::WriteKeywordCorpus(testing::TempDir() + "/text_cnn"));
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::ParseModelConfigFile(absl::StrCat(testing::kKeywordCorpusInput, R"pb(
    layer { embedding { vocabulary: 502 dim: 7 ids_from: "feature:tokens" } }
    optimizer { name: "sgd" learning_rate: 0.1 }
    seed: 5
  )pb", testing::kSeedsTextCnnLayers),
                                                   "text_cnn.pbtxt"));
  model::JobSpec job = config.job;
  job.data_dir = corpus;
  job.bytes_per_pack = 1;
  ExpectAllReduceEqualsLocal(job, 40, 0.01, 2e-5);
}

// Three replicas (chunks of unequal sizes around the ring): the same bits
// on every replica, and the same again on a rerun, with the whole model in
// one pack and with each layer in its own (all-reduced while backprop
// goes on: the timing differs from run to run, the bits do not).
TEST(AllReduceDeterminismTest, ThreeReplicasHoldTheSameBitsAndARerunRepeatsThem) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_mlp.pbtxt"));
  for (int64_t pack : {0, 1}) {
  SCOPED_TRACE(absl::StrCat("--bytes_per_pack=", pack));
  model::JobSpec job = config.job;
  job.max_steps = 30;
  job.bytes_per_pack = pack;
  std::vector<train::LocalResult> first = TrainByAllReduce(job, 3);
  std::vector<train::LocalResult> second = TrainByAllReduce(job, 3);
  ASSERT_EQ(first[0].steps, 30);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(SameBits(first[r].params, first[0].params)) << "replica " << r;
    EXPECT_TRUE(SameBits(second[r].params, first[0].params)) << "rerun, replica " << r;
  }
  }
}

// --wire_dtype=bfloat16: the replicas still hold the same bits, and after
// 300 steps of the guide MLP the model scores as the float32 run's does.
// (Parameters are not compared one by one: Adam's normalised steps turn
// the wire's rounding of near-zero gradients into full-size moves.)
TEST(AllReduceDeterminismTest, ABfloat16WireKeepsTheReplicasIdenticalAndScoresAsFloat32) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_mlp.pbtxt"));
  model::JobSpec job = config.job;
  job.max_steps = 300;
  std::vector<train::LocalResult> exact = TrainByAllReduce(job, 2);
  job.bfloat16_wire = true;
  std::vector<train::LocalResult> narrow = TrainByAllReduce(job, 2);
  ASSERT_EQ(narrow[0].steps, 300);
  EXPECT_TRUE(SameBits(narrow[1].params, narrow[0].params));
  EXPECT_FALSE(SameBits(narrow[0].params, exact[0].params)) << "bfloat16 changed nothing";
  std::printf("after 300 steps: test accuracy %.4f with a bfloat16 wire, %.4f with float32\n",
              narrow[0].test_accuracy, exact[0].test_accuracy);
  EXPECT_GT(exact[0].test_accuracy, 0.78);
  EXPECT_NEAR(narrow[0].test_accuracy, exact[0].test_accuracy, 0.02);
}

// A stop signal to one replica only: the replicas agree on it in the next
// step's all-reduce and every one of them stops before the same step, the
// chief checkpointing it.
TEST(AllReduceStopTest, ASignalToOneReplicaStopsEveryReplicaBeforeTheSameStep) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_mlp.pbtxt"));
  model::JobSpec job = config.job;
  job.max_steps = 50;
  const std::string out = pstrain::testing::TempDir() + "/stopped";
  std::filesystem::remove_all(out);
  std::atomic<int> sigterm{SIGTERM};  // as if delivered before the first step
  std::vector<train::LocalResult> results =
      TrainByAllReduce(job, 3, [&](int r, train::LocalOptions* options) {
        if (r == 2) options->stop = &sigterm;
        if (r == 0) options->output_dir = out;
      });
  // Step 1's all-reduce carried worker:2's vote; nobody takes step 2.
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(results[r].stopped_by, SIGTERM) << "replica " << r;
    EXPECT_EQ(results[r].steps, 1) << "replica " << r;
    EXPECT_TRUE(SameBits(results[r].params, results[0].params)) << "replica " << r;
  }
  EXPECT_TRUE(std::filesystem::exists(out + "/ckpt-1"));
  EXPECT_FALSE(std::filesystem::exists(out + "/final_metrics.json"));
}

// The launch and end of a replica group: what run.json records of the
// command line, as allreduce_main gives it.
const Json kCluster = {{"worker", {"127.0.0.1:1", "127.0.0.1:2"}}};
const std::vector<std::string> kFlags = {"--max_steps=20"};

// Two replicas of the guide MLP (or `config_file`'s model) for 20 steps
// over a loopback ring, replica 0 writing the run's files into `out`, each
// replica's job as `tweak` (may be null) leaves it; `after` (may be null)
// runs on each replica's thread as its RunLocal returns. Each replica's
// outcome.
std::vector<absl::Status> TwoReplicas(
    const std::string& out, const std::function<void(int, model::JobSpec*)>& tweak,
    const std::function<void(int)>& after = nullptr,
    const std::string& config_file = "configs/fashion_mnist_mlp.pbtxt") {
  std::vector<absl::Status> status(2, absl::UnknownError("not run"));
  absl::StatusOr<model::ModelConfigFile> config = model::LoadModelConfigFile(config_file);
  EXPECT_OK(config.status());
  if (!config.ok()) return status;
  testing::OnLoopbackRing(2, nullptr, [&](int r, Ring& ring) {
    model::JobSpec job = config->job;
    job.max_steps = 20;
    train::ReplicaGroup group;
    group.replica = r;
    group.num_replicas = 2;
    group.names = {"worker:0", "worker:1"};
    ASSERT_OK(allreduce::TrainOverRing(&ring, &group, job));
    if (tweak) tweak(r, &job);
    train::LocalOptions local;
    local.group = &group;
    if (r == 0) {
      local.output_dir = out;
      local.run = {{"flags", kFlags}, {"cluster", kCluster}};
    }
    status[r] = train::RunLocal(job, local).status();
    if (after) after(r);
  });
  return status;
}

// A replica that cannot read its training data (a truncated file) fails
// its launch for good. Every replica learns it in the same exchange and
// fails with its code, the data's (2), rather than replica 0 waiting for a
// lost neighbour (retryable, 138). Replica 0 records the failure in
// run.json, which it had not yet written, as the job's other tasks read it
// (EndedBadly: the evaluator ends on it).
TEST(AllReduceLaunchTest, OneReplicasUnreadableDataFailsEveryReplicaWithItsCodeAndIsRecorded) {
  const std::string root = testing::TempDir() + "/unreadable";
  const std::string out = root + "/out";
  ASSERT_OK_AND_ASSIGN(const std::string images, testing::CopyFashionMnistCutShort(root + "/data"));
  const absl::Time started = absl::Now();
  const std::vector<absl::Status> status =
      TwoReplicas(out, [&](int r, model::JobSpec* job) {
        if (r == 1) job->data_dir = root + "/data";
      });
  EXPECT_THAT(std::string(status[1].message()), ::testing::HasSubstr(images));
  EXPECT_EQ(std::string(status[0].message()),
            "worker:1 failed: " + std::string(status[1].message()));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(RoleExitCode(status[r], FailureKind::kPermanent), kExitBadConfig)
        << r << ": " << status[r];
  }
  ASSERT_OK_AND_ASSIGN(const std::string text, ReadFile(out + "/run.json"));
  ASSERT_OK_AND_ASSIGN(const Json run, ParseJson(text));
  EXPECT_EQ(run["exit_code"], 2) << text;
  EXPECT_EQ(run["outcome"], absl::StrCat(absl::StatusCodeToString(status[1].code()),
                                         ": worker:1 failed: ", status[1].message()))
      << text;
  EXPECT_EQ(run["cluster"], kCluster) << text;
  EXPECT_EQ(run["mode"], "allreduce") << text;
  // What the job's evaluator (and a worker waiting for its chief) reads.
  std::optional<absl::Status> ended = EndedBadly(out, kFlags, kCluster, started);
  ASSERT_TRUE(ended.has_value()) << text;
  EXPECT_EQ(RoleExitCode(*ended, FailureKind::kPermanent), kExitBadConfig) << *ended;
  // Nothing else was written: no checkpoint, no metrics.
  EXPECT_FALSE(std::filesystem::exists(out + "/final_metrics.json"));
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    EXPECT_NE(entry.path().filename().string().rfind("ckpt-", 0), 0u) << entry.path();
  }
}

// A replica that fails for good in mid-training (a bad record in the file
// it streams, met at its step 20 or so) tells the others around the ring:
// every replica ends with that failure's code (1), not with a lost
// neighbour's (138, which an orchestrator restarts for ever), within
// seconds, and replica 0 records it in run.json as the run's end, where the
// job's evaluator reads it (EndedBadly). The checkpoint written before
// stays; no final metrics are written.
TEST(AllReduceLaunchTest, AFailureForGoodInMidTrainingEndsEveryReplicaWithItsCodeAndIsRecorded) {
  const std::string root = testing::TempDir() + "/bad_record";
  const std::string out = root + "/out";
  const std::string data = root + "/data";
  // Record 1201 is replica 1's 601st, in its 31st batch of 20.
  ASSERT_OK_AND_ASSIGN(const std::string config,
                       testing::WriteStreamedCsvWithBadRecord(data, 2000, 1201));
  const absl::Time started = absl::Now();
  const std::vector<absl::Status> status = TwoReplicas(
      out,
      [&](int, model::JobSpec* job) {
        job->data_dir = data;
        job->max_steps = 0;
        job->epochs = 1;
        job->checkpoint_every_secs = 0;
        job->checkpoint_every_steps = 10;
      },
      nullptr, config);
  const absl::Duration took = absl::Now() - started;
  EXPECT_EQ(status[1].code(), absl::StatusCode::kDataLoss) << status[1];
  EXPECT_THAT(std::string(status[1].message()), ::testing::HasSubstr("train-0.csv line"));
  EXPECT_EQ(std::string(status[0].message()),
            "worker:1 failed: " + std::string(status[1].message()));
  EXPECT_EQ(status[0].code(), absl::StatusCode::kDataLoss) << status[0];
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(RoleExitCode(status[r], FailureKind::kPermanent), kExitPermanent)
        << r << ": " << status[r];
  }
  EXPECT_LT(took, absl::Seconds(20));
  ASSERT_OK_AND_ASSIGN(const std::string text, ReadFile(out + "/run.json"));
  ASSERT_OK_AND_ASSIGN(const Json run, ParseJson(text));
  EXPECT_EQ(run["exit_code"], 1) << text;
  EXPECT_EQ(run["outcome"], absl::StrCat("DATA_LOSS: worker:1 failed: ", status[1].message()))
      << text;
  std::optional<absl::Status> ended = EndedBadly(out, kFlags, kCluster, started);
  ASSERT_TRUE(ended.has_value()) << text;
  EXPECT_EQ(RoleExitCode(*ended, FailureKind::kPermanent), kExitPermanent) << *ended;
  EXPECT_TRUE(std::filesystem::exists(out + "/ckpt-20/MANIFEST"));
  EXPECT_FALSE(std::filesystem::exists(out + "/final_metrics.json"));
}

// The replicas end together: none returns before replica 0 has written
// the job's end (the final checkpoint, final_metrics.json, run.json's
// end), so a replica 0 lost while writing it fails the others retryably
// rather than leaving them done and the job's end never written.
TEST(AllReduceLaunchTest, NoReplicaEndsBeforeReplicaZeroHasRecordedTheJobsEnd) {
  const std::string out = testing::TempDir() + "/ended_together";
  bool ended_first = false, metrics_first = false;
  const std::vector<absl::Status> status = TwoReplicas(out, nullptr, [&](int r) {
    if (r != 1) return;
    ended_first = EndedWell(out, kFlags, kCluster).has_value();
    metrics_first = std::filesystem::exists(out + "/final_metrics.json");
  });
  ASSERT_OK(status[0]);
  ASSERT_OK(status[1]);
  EXPECT_TRUE(ended_first) << "replica 1 returned before run.json recorded the job's end";
  EXPECT_TRUE(metrics_first) << "replica 1 returned before final_metrics.json was written";
  EXPECT_TRUE(std::filesystem::exists(out + "/ckpt-20/MANIFEST"));
}

}  // namespace
}  // namespace pstrain
