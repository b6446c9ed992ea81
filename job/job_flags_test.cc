#include "job/job_flags.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

CliArgs Args(std::vector<const char*> argv) {
  argv.insert(argv.begin(), "prog");
  auto a = CliArgs::Parse(argv.size(), argv.data());
  EXPECT_OK(a);
  return *a;
}

TEST(JobFlagsTest, DefaultsAndOverrides) {
  CliArgs none = Args({});
  ASSERT_OK_AND_ASSIGN(model::JobSpec d, JobSpecFromFlags(none));
  EXPECT_EQ(d.batch_size, 32);
  ASSERT_EQ(d.model.layers.size(), 2u);
  EXPECT_EQ(d.model.layers[0].units, 128);
  EXPECT_TRUE(d.model.layers[0].relu);
  EXPECT_EQ(d.model.num_classes(), 10);
  EXPECT_TRUE(d.shared_memory);
  EXPECT_TRUE(d.tcp_frames);
  CliArgs no_tcp = Args({"--notcp_frames"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec t, JobSpecFromFlags(no_tcp));
  EXPECT_FALSE(t.tcp_frames);
  EXPECT_FALSE(d.bfloat16_wire);
  CliArgs bf16 = Args({"--wire_dtype=bfloat16"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec b, JobSpecFromFlags(bf16));
  EXPECT_TRUE(b.bfloat16_wire);
  CliArgs half = Args({"--wire_dtype=float16"});
  EXPECT_EQ(JobSpecFromFlags(half).status().message(),
            "--wire_dtype=float16: must be float32 or bfloat16");
  EXPECT_EQ(d.bytes_per_pack, -1);  // auto
  for (const auto& [given, bytes] : {std::pair<std::string, int64_t>{"--bytes_per_pack=auto", -1},
                                     {"--bytes_per_pack=0", 0},
                                     {"--bytes_per_pack=262144", 262144}}) {
    CliArgs pack = Args({given.c_str()});
    ASSERT_OK_AND_ASSIGN(model::JobSpec p, JobSpecFromFlags(pack));
    EXPECT_EQ(p.bytes_per_pack, bytes) << given;
  }
  for (const std::string bad : {"-1", "1MB", ""}) {
    const std::string flag = "--bytes_per_pack=" + bad;
    CliArgs pack = Args({flag.c_str()});
    EXPECT_EQ(JobSpecFromFlags(pack).status().message(),
              absl::StrCat("--bytes_per_pack=", bad,
                           ": must be auto or a number of bytes (0 or more)"));
  }
  CliArgs no_shm = Args({"--noshared_memory"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec n, JobSpecFromFlags(no_shm));
  EXPECT_FALSE(n.shared_memory);
  CliArgs some = Args({"--hidden=256,64", "--epochs=3", "--learning_rate=0.1", "--seed=9"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec j, JobSpecFromFlags(some));
  ASSERT_EQ(j.model.layers.size(), 3u);
  EXPECT_EQ(j.model.layers[0].units, 256);
  EXPECT_EQ(j.model.layers[1].units, 64);
  EXPECT_EQ(j.model.layers[2].name, "dense_2");
  EXPECT_EQ(j.epochs, 3);
  EXPECT_FLOAT_EQ(j.optimizer.learning_rate, 0.1f);
  EXPECT_EQ(j.optimizer.name, "sgd");
  CliArgs adam = Args({"--optimizer=adam", "--learning_rate=0.001", "--beta2=0.99"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec a, JobSpecFromFlags(adam));
  EXPECT_EQ(a.optimizer.name, "adam");
  EXPECT_FLOAT_EQ(a.optimizer.beta2, 0.99f);
  CliArgs bad = Args({"--optimizer=rmsprop"});
  EXPECT_EQ(JobSpecFromFlags(bad).status().message(),
            "--optimizer=rmsprop: must be sgd, momentum, adagrad, adam, nadam or ftrl");
  EXPECT_EQ(j.seed, 9u);
  CliArgs softmax = Args({"--hidden="});
  ASSERT_OK_AND_ASSIGN(model::JobSpec s, JobSpecFromFlags(softmax));
  ASSERT_EQ(s.model.layers.size(), 1u);
  EXPECT_EQ(s.model.layers[0].units, 10);
}

TEST(JobFlagsTest, StragglersByTask) {
  CliArgs ok = Args({"--straggler=worker:1:50,master:0:5,all:20@0.25"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec j, JobSpecFromFlags(ok));
  ASSERT_EQ(j.stragglers.size(), 3u);
  EXPECT_EQ(j.stragglers["worker:1"].ms, 50);
  EXPECT_EQ(j.stragglers["worker:1"].probability, 1);
  EXPECT_EQ(j.stragglers["chief:0"].ms, 5);
  EXPECT_EQ(j.stragglers["all"].ms, 20);
  EXPECT_EQ(j.stragglers["all"].probability, 0.25);
  for (const char* bad : {"worker:x:50", "worker:1:50@0", "worker:1:50@1.5", "ps0:5"}) {
    const std::string flag = absl::StrCat("--straggler=", bad);
    CliArgs args = Args({flag.c_str()});
    EXPECT_EQ(JobSpecFromFlags(args).status().message(),
              absl::StrCat("--straggler=", bad, ": \"", bad,
                           "\" is not TASK:MS[@P] (a task such as worker:1 or chief:0, or all; "
                           "0..60000 ms; a probability per step in (0, 1])"));
  }
}

TEST(JobFlagsTest, AStragglerMustBeATrainingTaskOfTheCluster) {
  CliArgs args = Args({"--straggler=worker:1:50,all:5"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec j, JobSpecFromFlags(args));
  ClusterSpec cluster;
  cluster.chief = HostPort{"127.0.0.1", 1};
  cluster.worker.assign(2, HostPort{"127.0.0.1", 2});
  EXPECT_OK(CheckStragglers(j, cluster));
  cluster.worker.resize(1);
  EXPECT_EQ(CheckStragglers(j, cluster).message(),
            "--straggler names worker:1, which is not a training task of this cluster (chief:0, "
            "worker:0)");
  CliArgs chief = Args({"--straggler=chief:0:5", "--nochief_trains"});
  ASSERT_OK_AND_ASSIGN(j, JobSpecFromFlags(chief));
  EXPECT_EQ(CheckStragglers(j, cluster).code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobFlagsTest, ModelConfigSetsTheJobAndFlagsOverrideIt) {
  CliArgs plain = Args({"--model_config=configs/fashion_mnist_mlp.pbtxt"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec j, JobSpecFromFlags(plain));
  ASSERT_EQ(j.model.layers.size(), 3u);
  EXPECT_EQ(j.model.layers[1].units, 256);
  EXPECT_EQ(j.optimizer.name, "adam");
  EXPECT_FLOAT_EQ(j.optimizer.learning_rate, 0.001f);
  EXPECT_EQ(j.epochs, 2);
  CliArgs over = Args({"--model_config=configs/fashion_mnist_mlp.pbtxt", "--epochs=5",
                       "--batch_size=64", "--consistency=sync"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec o, JobSpecFromFlags(over));
  EXPECT_EQ(o.epochs, 5);
  EXPECT_EQ(o.batch_size, 64);
  EXPECT_EQ(o.consistency, Consistency::Sync());
  EXPECT_EQ(o.optimizer.name, "adam");
  CliArgs short_name = Args({"--config=configs/fashion_mnist_mlp.pbtxt"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec c, JobSpecFromFlags(short_name));
  EXPECT_EQ(c.model.layers[1].units, 256);
  CliArgs two = Args({"--config=a.pbtxt", "--model_config=b.pbtxt"});
  EXPECT_EQ(JobSpecFromFlags(two).status().message(),
            "--config and --model_config both name a file: use one");
  CliArgs both = Args({"--model_config=configs/fashion_mnist_mlp.pbtxt", "--hidden=8"});
  EXPECT_EQ(JobSpecFromFlags(both).status().message(),
            "--hidden and --model_config=configs/fashion_mnist_mlp.pbtxt both give the layers: "
            "use one");
  CliArgs variables = Args({"--model_config=configs/wide_and_deep.pbtxt"});
  EXPECT_EQ(JobSpecFromFlags(variables).status().message(),
            "--model_config=configs/wide_and_deep.pbtxt: the file lists variables but no layers, "
            "so there is no model to train (it is for `pstrain placement --config`)");
  CliArgs missing = Args({"--model_config=/nonexistent.pbtxt"});
  EXPECT_EQ(JobSpecFromFlags(missing).status().code(), absl::StatusCode::kNotFound);
}

TEST(JobFlagsTest, BadValuesNameTheFlag) {
  CliArgs a = Args({"--hidden=128,x"});
  EXPECT_EQ(JobSpecFromFlags(a).status().message(),
            "--hidden=128,x: \"x\" is not a layer width in 1..65536");
  CliArgs b = Args({"--batch_size=0"});
  EXPECT_EQ(JobSpecFromFlags(b).status().message(), "--batch_size=0: must be in 1..65536");
  CliArgs d = Args({"--device=tpu"});
  EXPECT_EQ(JobSpecFromFlags(d).status().message(), "--device=tpu: must be auto, cpu, cuda or cuda:N");
  CliArgs c = Args({"--learning_rate=-1"});
  EXPECT_EQ(JobSpecFromFlags(c).status().message(), "--learning_rate=-1: must be in (0, 100]");
}

TEST(JobFlagsTest, OutputDirDependsOnEnvironment) {
  CliArgs a = Args({});
  EXPECT_EQ(*OutputDirFromFlags(a, "cloud"), "/data/output");
  EXPECT_EQ(*OutputDirFromFlags(a, ""), "./output");
  CliArgs b = Args({"--output_dir=/tmp/x"});
  EXPECT_EQ(*OutputDirFromFlags(b, "cloud"), "/tmp/x");
}

TEST(JobFlagsTest, InputFlagsOverrideTheConfigsFilesAndPolicy) {
  CliArgs tf = Args({"--config=configs/fashion_mnist_tfrecord.pbtxt", "--train_files=/d/tr-*",
                     "--skip_bad_records"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec j, JobSpecFromFlags(tf));
  EXPECT_EQ(j.input.format, data::InputFormat::kTfRecord);
  EXPECT_EQ(j.input.train_files, "/d/tr-*");
  EXPECT_EQ(j.input.test_files, "test-*.tfrecord*");  // the config's
  EXPECT_TRUE(j.input.skip_bad_records);
  CliArgs idx = Args({"--train_files=/d/tr-*"});
  EXPECT_EQ(JobSpecFromFlags(idx).status().message(),
            "--train_files and --test_files name TFRecord or CSV files, whose features the "
            "model config's input block gives (format: tfrecord, csv or tsv); this "
            "job reads IDX files");
}

// A config that leaves its vocabulary and classes to the data: the job
// reads them from --data_dir's vocab.txt and labels.txt.
TEST(JobFlagsTest, SizesAConfigLeavesOutComeFromTheDataDirectory) {
  const std::string dir = testing::FreshTempDir("sized_job");
  ASSERT_OK(WriteFileAtomically(dir + "/vocab.txt", "the\nof\nand\n"));
  ASSERT_OK(WriteFileAtomically(dir + "/labels.txt", "a\nb\nc\n"));
  ASSERT_OK(WriteFileAtomically(
      dir + "/model.pbtxt",
      "input { format: tfrecord train_files: \"train-*\" test_files: \"test-*\"\n"
      "  feature { name: \"tokens\" type: \"int64\" max_len: 8 } }\n"
      "layer { embedding { dim: 4 ids_from: \"feature:tokens\" } }\n"
      "layer { flatten {} }\nlayer { dense {} }\n"));
  const std::string config = "--model_config=" + dir + "/model.pbtxt";
  const std::string data = "--data_dir=" + dir;
  CliArgs args = Args({config.c_str(), data.c_str()});
  ASSERT_OK_AND_ASSIGN(model::JobSpec job, JobSpecFromFlags(args));
  ASSERT_EQ(job.model.embeddings.size(), 1u);
  EXPECT_EQ(job.model.embeddings[0].vocabulary, 5);  // 3 words, pad, out of vocabulary
  EXPECT_EQ(job.model.num_classes(), 3);
  // Elsewhere (no such files) the config is incomplete, and says how.
  CliArgs elsewhere = Args({config.c_str()});
  EXPECT_NE(JobSpecFromFlags(elsewhere).status().message().find("vocab.txt in --data_dir"),
            std::string::npos);
}

TEST(JobFlagsTest, DenseTableUpdatesAreRefusedWhereThePsHoldTheTables) {
  model::JobSpec job;
  job.optimizer.dense_table_updates = true;
  ClusterSpec without_ps;
  without_ps.worker = {HostPort{"127.0.0.1", 1}, HostPort{"127.0.0.1", 2}};
  EXPECT_OK(CheckTableUpdates(job, without_ps));
  ClusterSpec with_ps = without_ps;
  with_ps.ps = {HostPort{"127.0.0.1", 3}};
  EXPECT_EQ(CheckTableUpdates(job, with_ps).message(),
            "optimizer.table_updates: dense is for tables held where the replicas train (train "
            "--local, a cluster without ps); the ps of this cluster move only the rows a push "
            "names (lazy): leave it out, or train without ps");
  job.optimizer.dense_table_updates = false;
  EXPECT_OK(CheckTableUpdates(job, with_ps));
}

}  // namespace
}  // namespace pstrain
