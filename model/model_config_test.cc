#include "model/model_config.h"

#include "common/file_util.h"
#include "common/testing/status_testing.h"
#include "common/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

TEST(ModelConfigTest, LoadsVariablesWithKindsAndOverrides) {
  const std::string path = pstrain::testing::TempDir() + "/model.pbtxt";
  ASSERT_OK(WriteFileAtomically(path, R"pb(
    # dense layers train sync, the table async
    variable { name: "dense_0/kernel" shape: [784, 256] consistency: "sync" }
    variable { name: "dense_0/bias" shape: 256 }
    variable {
      name: "emb"
      shape: [100000, 16]
      embedding: true
      consistency: "async"
      initializer: "uniform:0.05"
    }
  )pb"));
  ASSERT_OK_AND_ASSIGN(auto vars, LoadModelConfig(path));
  ASSERT_EQ(vars.size(), 3u);
  EXPECT_EQ(vars[0].name, "dense_0/kernel");
  EXPECT_EQ(vars[0].shape, (std::vector<int64_t>{784, 256}));
  EXPECT_EQ(vars[0].consistency, "sync");
  EXPECT_FALSE(vars[0].embedding);
  EXPECT_EQ(vars[1].shape, (std::vector<int64_t>{256}));
  EXPECT_TRUE(vars[2].embedding);
  EXPECT_EQ(vars[2].initializer, "uniform:0.05");
}

TEST(ModelConfigTest, BadConfigsNameTheLineOrTheVariable) {
  auto r = ParseModelConfig("variable { name: \"a\" shape: [2] }\nvariable { nmae: \"b\" }\n",
                            "m.pbtxt");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()),
            "m.pbtxt:2:16: Message type \"pstrain.v1.VariableConfig\" has no field named "
            "\"nmae\".");
  r = ParseModelConfig("variable { name: \"a\" shape: [2, 0] }", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt: variable 0 (a): shape has a dimension of 0");
  r = ParseModelConfig("variable { shape: [2] }", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt: variable 0 (no name): name is missing");
  r = ParseModelConfig("variable { name: \"a\" }", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt: variable 0 (a): shape is missing");
  r = ParseModelConfig("variable { name: \"e\" shape: [5] embedding: true }", "m.pbtxt");
  EXPECT_EQ(r.status().message(),
            "m.pbtxt: variable 0 (e): an embedding table's shape is [vocabulary, dim]");
  r = ParseModelConfig("variable { name: \"a\" shape: [2] consistency: \"ssp\" }", "m.pbtxt");
  EXPECT_EQ(r.status().message(),
            "m.pbtxt: variable 0 (a): consistency \"ssp\" is not one of async, sync, ssp:S (S "
            "an integer from 0 to 1000000)");
  r = ParseModelConfig("", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt: no variable is defined");
  auto missing = LoadModelConfig("/nonexistent/m.pbtxt");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pstrain::model
