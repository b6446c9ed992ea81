#include "job/security_flags.h"

#include <cstdlib>
#include <fstream>

#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

absl::StatusOr<std::shared_ptr<const Security>> FromFlags(std::vector<const char*> flags) {
  flags.insert(flags.begin(), "pstrain");
  auto args = CliArgs::Parse(static_cast<int>(flags.size()), flags.data(), 1);
  if (!args.ok()) return args.status();
  auto security = SecurityFromFlags(*args);
  if (security.ok()) {
    EXPECT_OK(args->CheckAllUsed());
  }
  return security;
}

TEST(SecurityFlagsTest, ConfigFileBlockFlagsAndEnvironment) {
  ::unsetenv("PSTRAIN_TOKEN");
  const std::string dir = testing::TempDir();
  std::ofstream(dir + "/token") << "0123456789abcdef0123456789abcdef\n";
  std::ofstream(dir + "/short") << "short\n";
  const std::string config = dir + "/job.pbtxt";
  std::ofstream(config) << "variable { name: \"w\" shape: [4] }\n"
                        << "security { token_file: \"" << dir << "/token\" }\n";
  // Nothing given: no security.
  ASSERT_OK_AND_ASSIGN(auto none, FromFlags({}));
  EXPECT_EQ(none->Describe(), "no transport security");
  // The config file's block; --config and --model_config alike.
  const std::string config_flag = "--config=" + config;
  ASSERT_OK_AND_ASSIGN(auto from_file, FromFlags({config_flag.c_str()}));
  EXPECT_EQ(from_file->Describe(), "a cluster token");
  const std::string model_config_flag = "--model_config=" + config;
  ASSERT_OK_AND_ASSIGN(auto from_model_config, FromFlags({model_config_flag.c_str()}));
  EXPECT_TRUE(from_model_config->has_token());
  // A flag overrides the file: this token is too short, so it was used.
  const std::string short_flag = "--token_file=" + dir + "/short";
  auto overridden = FromFlags({config_flag.c_str(), short_flag.c_str()});
  EXPECT_EQ(overridden.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(overridden.status().message().find("has 5 characters"), std::string::npos)
      << overridden.status();
  // PSTRAIN_TOKEN overrides a file named in the config, not a --token_file.
  ::setenv("PSTRAIN_TOKEN", "tiny", 1);
  auto from_env = FromFlags({config_flag.c_str()});
  EXPECT_NE(from_env.status().message().find("from PSTRAIN_TOKEN has 4 characters"),
            std::string::npos)
      << from_env.status();
  const std::string token_flag = "--token_file=" + dir + "/token";
  auto both = FromFlags({token_flag.c_str()});
  EXPECT_EQ(both.status().message(), "both --token_file and PSTRAIN_TOKEN are given: use one");
  ::unsetenv("PSTRAIN_TOKEN");
  ASSERT_OK_AND_ASSIGN(auto insecure, FromFlags({"--insecure"}));
  EXPECT_TRUE(insecure->insecure());
}

}  // namespace
}  // namespace pstrain
