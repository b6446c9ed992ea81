#include "cli/tools.h"

#include "absl/strings/str_cat.h"
#include "base/cli_args.h"
#include "base/json.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "model/network.h"

namespace pstrain {
namespace {

TEST(ToolsTest, PlacementTableShowsSlicesBytesPerPsAndImbalance) {
  ASSERT_OK_AND_ASSIGN(
      Placement p, ComputePlacement({{"dense_0/kernel", {784, 256}}, {"dense_0/bias", {256}}}, 2));
  std::string table = PlacementTable(p);
  EXPECT_NE(table.find("dense_0/kernel               0/2      [0, 392)               401408    0"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("dense_0/kernel               1/2      [392, 784)             401408    1"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("ps:0         402432 bytes   50.1%"), std::string::npos) << table;
  EXPECT_NE(table.find("total        803840 bytes; largest ps is 0.1% above the ideal 401920"),
            std::string::npos)
      << table;
}

TEST(ToolsTest, SummaryIsKerasTableWithTotalsAndWhereVariablesLive) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile f,
                       model::LoadModelConfigFile("configs/fashion_mnist_cnn.pbtxt"));
  ASSERT_OK_AND_ASSIGN(auto net, model::Network::Create(f.job.model, 1));
  ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement(net->variables(), 2));
  const std::string table = SummaryTable("cnn", net->graph(), p);
  for (const char* line : {
           " conv2d_0 (Conv2D)                    (None, 26, 26, 32)                  320\n",
           " max_pool2d_0 (MaxPooling2D)          (None, 13, 13, 32)                    0\n",
           " flatten_0 (Flatten)                  (None, 5408)                          0\n",
           " dense_0 (Dense)                      (None, 128)                      692352\n",
           " dense_1 (Dense)                      (None, 10)                         1290\n",
           "Total params: 693,962\n",
           "Non-trainable params: 0\n",
           "Variables on 2 PS:\n",
           " dense_0/kernel               [5408, 128]           2,768,896 bytes  2 slices: rows "
           "[0, "
           "2704) on ps 0, rows [2704, 5408) on ps 1\n",
       }) {
    EXPECT_NE(table.find(line), std::string::npos) << line << "\nnot in\n" << table;
  }
}

// Batch normalization's moving statistics are Keras's non-trainable
// params, and the PS lines say what moves them; a frozen layer's variables
// are non-trainable too.
TEST(ToolsTest, SummaryCountsNonTrainableVariablesAsKerasDoes) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile f,
                       model::LoadModelConfigFile("configs/fashion_mnist_mobile.pbtxt"));
  ASSERT_OK_AND_ASSIGN(auto net, model::Network::Create(f.job.model, 1));
  ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement(net->variables(), 1));
  std::string table = SummaryTable("mobile", net->graph(), p);
  for (const char* line : {
           " bn_Conv1 (BatchNormalization)        (None, 14, 14, 16)                   64   "
           "['Conv1[0][0]']\n",
           "Total params: 4,554\nTrainable params: 4,170\nNon-trainable params: 384\n",
           " bn_Conv1/moving_mean         [16]                         64 bytes  ps 0; "
           "non-trainable, moved by the replicas' increments\n",
           " bn_Conv1/gamma               [16]                         64 bytes  ps 0\n",
       }) {
    EXPECT_NE(table.find(line), std::string::npos) << line << "\nnot in\n" << table;
  }
  // placement says the same of each slice.
  const std::string placed = PlacementTable(p);
  EXPECT_NE(placed.find("bn_Conv1/moving_mean         0/1      [0, 16)                    64    0"
                        "  non-trainable (increment)\n"),
            std::string::npos)
      << placed;
  EXPECT_NE(placed.find("bn_Conv1/gamma               0/1      [0, 16)                    64    0\n"),
            std::string::npos)
      << placed;
  // Conv1 (144 weights) and bn_Conv1 (64) frozen.
  f.job.model.layers[0].trainable = false;
  f.job.model.layers[1].trainable = false;
  ASSERT_OK_AND_ASSIGN(net, model::Network::Create(f.job.model, 1));
  ASSERT_OK_AND_ASSIGN(p, ComputePlacement(net->variables(), 1));
  table = SummaryTable("mobile", net->graph(), p);
  const char* frozen = "Total params: 4,554\nTrainable params: 3,994\nNon-trainable params: 560\n";
  EXPECT_NE(table.find(frozen), std::string::npos) << table;
  EXPECT_NE(table.find(" Conv1/kernel                 [3, 3, 1, 16]               576 bytes  ps 0; "
                       "non-trainable, frozen\n"),
            std::string::npos)
      << table;
}

// A graph prints as Keras prints a functional model: the input's row and
// what each layer reads.
TEST(ToolsTest, SummaryOfAGraphSaysWhatEachLayerIsConnectedTo) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile f,
                       model::LoadModelConfigFile("configs/fashion_mnist_resnet.pbtxt"));
  ASSERT_OK_AND_ASSIGN(auto net, model::Network::Create(f.job.model, 1));
  ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement(net->variables(), 1));
  const std::string table = SummaryTable("resnet", net->graph(), p);
  for (const char* line : {
           " Layer (type)                         Output Shape                    Param #   "
           "Connected to\n",
           " input (InputLayer)                   [(None, 28, 28, 1)]                   0   []\n",
           " stem (Conv2D)                        (None, 28, 28, 16)                  160   "
           "['input[0][0]']\n",
           " block_add (Add)                      (None, 28, 28, 16)                    0   "
           "['stem[0][0]', 'block_conv_2[0][0]']\n",
           " branch_3x3 (Conv2D)                  (None, 14, 14, 16)                 2320   "
           "['pool_1[0][0]']\n",
           " branches (Concatenate)               (None, 14, 14, 32)                    0   "
           "['branch_1x1[0][0]', 'branch_3x3[0][0]']\n",
           " flatten (Flatten)                    (None, 1568)                          0   "
           "['pool_2[0][0]']\n",
           "Total params: 108,458\n",
       }) {
    EXPECT_NE(table.find(line), std::string::npos) << line << "\nnot in\n" << table;
  }
  // A stack keeps the Sequential table, without those columns.
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile cnn,
                       model::LoadModelConfigFile("configs/fashion_mnist_cnn.pbtxt"));
  ASSERT_OK_AND_ASSIGN(auto stack, model::Network::Create(cnn.job.model, 1));
  EXPECT_EQ(SummaryTable("cnn", stack->graph(), p).find("Connected to"), std::string::npos);
}

TEST(ToolsTest, SummaryOfTheSeedsTextCnnHasItsParameterCounts) {
  // The seed document's model: a vocabulary of 30,982 ids, length 300, 46
  // topics.
  ASSERT_OK_AND_ASSIGN(
      model::ModelConfigFile f,
      model::ParseModelConfigFile(
          R"pb(
            input {
              format: "tfrecord"
              train_files: "train-*"
              test_files: "test-*"
              feature { name: "tokens" type: "int64" max_len: 300 vocabulary: 30982 }
            }
            layer { embedding { vocabulary: 30982 dim: 7 ids_from: "feature:tokens" } }
            layer { conv1d { filters: 64 kernel_size: 5 activation: "relu" } }
            layer { max_pool1d { pool_size: 2 } }
            layer { conv1d { filters: 32 kernel_size: 3 activation: "relu" } }
            layer { max_pool1d { pool_size: 2 } }
            layer { flatten {} }
            layer { dense { units: 46 } }
          )pb",
          "seed.pbtxt"));
  ASSERT_OK_AND_ASSIGN(auto net, model::Network::Create(f.job.model, 1));
  ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement(net->variables(), 2));
  const std::string table = SummaryTable("seed", net->graph(), p);
  for (const char* line : {
           " embedding (Embedding)                (None, 300, 7)                   216874\n",
           " conv1d_0 (Conv1D)                    (None, 296, 64)                    2304\n",
           " max_pool1d_0 (MaxPooling1D)          (None, 148, 64)                       0\n",
           " conv1d_1 (Conv1D)                    (None, 146, 32)                    6176\n",
           " max_pool1d_1 (MaxPooling1D)          (None, 73, 32)                        0\n",
           " flatten_0 (Flatten)                  (None, 2336)                          0\n",
           " dense_0 (Dense)                      (None, 46)                       107502\n",
           "Total params: 332,856\n",
           " embedding/embeddings         [30982, 7]              867,496 bytes  embedding table, "
           "rows spread by hash(id) over every PS, pulled and pushed by id\n",
       }) {
    EXPECT_NE(table.find(line), std::string::npos) << line << "\nnot in\n" << table;
  }
}

// The seed document's Reuters model from the Debian-sized config in one
// command: `pstrain summary --config=configs/text_cnn.pbtxt
// --vocabulary=30982 --classes=46` prints its table exactly.
TEST(ToolsTest, SummaryTakesTheVocabularyAndClassesInPlaceOfTheConfigs) {
  std::vector<const char*> argv = {"pstrain", "summary", "--config=configs/text_cnn.pbtxt",
                                   "--vocabulary=30982", "--classes=46", "--ps=2"};
  ASSERT_OK_AND_ASSIGN(CliArgs args,
                       CliArgs::Parse(static_cast<int>(argv.size()), argv.data(), 2));
  ::testing::internal::CaptureStdout();
  const int code = SummaryMain(args);
  const std::string table = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(code, 0) << table;
  const std::string expected =
      " embedding (Embedding)                (None, 300, 7)                   216874\n"
      " conv1d_0 (Conv1D)                    (None, 296, 64)                    2304\n"
      " max_pool1d_0 (MaxPooling1D)          (None, 148, 64)                       0\n"
      " conv1d_1 (Conv1D)                    (None, 146, 32)                    6176\n"
      " max_pool1d_1 (MaxPooling1D)          (None, 73, 32)                        0\n"
      " flatten_0 (Flatten)                  (None, 2336)                          0\n"
      " dense_0 (Dense)                      (None, 46)                       107502\n"
      "==============================================================================\n"
      "Total params: 332,856\n";
  EXPECT_NE(table.find(expected), std::string::npos) << table;
  // Without them, the config's own sizes: the Debian corpus's.
  std::vector<const char*> plain = {"pstrain", "summary", "--config=configs/text_cnn.pbtxt"};
  ASSERT_OK_AND_ASSIGN(CliArgs debian, CliArgs::Parse(3, plain.data(), 2));
  ::testing::internal::CaptureStdout();
  ASSERT_EQ(SummaryMain(debian), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("Total params: 267,681\n"),
            std::string::npos);
}

TEST(ToolsTest, SummaryOfTheClickModelShowsEachEmbeddingAndTheirConcatenation) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile f,
                       model::LoadModelConfigFile("configs/click_model.pbtxt"));
  ASSERT_OK_AND_ASSIGN(auto net, model::Network::Create(f.job.model, 1));
  ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement(net->variables(), 2));
  const std::string table = SummaryTable("click", net->graph(), p);
  for (const char* line : {
           " user (EmbeddingBag)                  (None, 8)                         40008\n"
           " item (EmbeddingBag)                  (None, 8)                         16008\n",
           " weekday (EmbeddingBag)               (None, 4)                            32\n"
           " concatenate (Concatenate)            (None, 48)                            0\n"
           " dense_0 (Dense)                      (None, 64)                         3136\n",
           "Total params: 66,341\n",
           " weekday/embeddings           [8, 4]                      128 bytes  embedding table",
       }) {
    EXPECT_NE(table.find(line), std::string::npos) << line << "\nnot in\n" << table;
  }
}

TEST(ToolsTest, PlacementJsonIsParseable) {
  ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement({{"w", {10, 10}}}, 3));
  ASSERT_OK_AND_ASSIGN(Json j, ParseJson(PlacementJson(p)));
  EXPECT_EQ(FindMember(j, "num_ps")->get<double>(), 3);
  ASSERT_EQ(FindMember(j, "slices")->size(), 1u);
  EXPECT_EQ(FindMember((*FindMember(j, "slices"))[0], "key")->get<std::string>(), "w/part_0");
  EXPECT_EQ((*FindMember(j, "bytes_per_ps"))[0].get<double>(), 400);
  EXPECT_NEAR(FindMember(j, "imbalance_percent")->get<double>(), 200.0, 1e-9);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST(ToolsTest, StatusSumsSlicesPerVariableWithDropsAndStaleness) {
  v1::StatsResponse ps;
  ps.set_ps_index(1);
  ps.set_global_step(7);
  ps.set_resident_bytes(64 << 20);
  for (int part = 0; part < 2; ++part) {
    v1::SliceStats* s = ps.add_slices();
    s->set_key(absl::StrCat("w/part_", part));
    s->set_variable("w");
    s->set_consistency("sync");
    s->set_bytes(100);
    s->set_pushes(9);
    s->set_pulls(8);
    s->set_step(7 - part);
    s->set_dropped_stale(part);
    for (int b = 0; b < 9; ++b) s->add_staleness_histogram(b == 0 ? 8 : b == 1 ? part : 0);
  }
  const std::vector<HostPort> where = {{"127.0.0.1", 4001}};
  const std::string table = StatusTable(where, {ps});
  EXPECT_NE(table.find("ps:1 127.0.0.1:4001  global step 7  resident 64 MiB\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("  w                        sync             200        18        16"
                       "        6        1  16 1 0 0 0 0 0 0 0\n"),
            std::string::npos)
      << table;
  ASSERT_OK_AND_ASSIGN(Json j, ParseJson(StatusJson(where, {ps})));
  const Json& v = (*FindMember(j[0], "variables"))[0];
  EXPECT_EQ(FindMember(v, "variable")->get<std::string>(), "w");
  EXPECT_EQ(FindMember(v, "dropped_stale")->get<double>(), 1);
  EXPECT_EQ((*FindMember(v, "staleness_histogram"))[1].get<double>(), 1);
  EXPECT_EQ(FindMember(j[0], "resident_bytes")->get<double>(), 64 << 20);
}

}  // namespace
}  // namespace pstrain
