#include "model/cuda_device.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cuda_plugin.h"

namespace pstrain::model {
namespace {

// The test runs with PSTRAIN_CUDA_PLUGIN at the plugin this build made
// (model/BUILD).
TEST(CudaDeviceTest, ThePluginOfThisBuildLoads) {
  ASSERT_TRUE(CudaPluginLoaded()) << CudaPluginOrigin();
  EXPECT_EQ(CudaPluginOrigin().rfind('/'), CudaPluginOrigin().size() - 1 - strlen(kCudaPluginName))
      << CudaPluginOrigin();
  EXPECT_EQ(CudaPluginOrigin().front(), '/') << CudaPluginOrigin();
  if (CudaCompiled()) {
    // A device, or CUDA's own reason for none: the plugin answered.
    auto devices = ListCudaDevices();
    if (!devices.ok()) {
      EXPECT_THAT(std::string(devices.status().message()),
                  ::testing::Not(::testing::HasSubstr("plugin")));
    }
  }
}

TEST(CudaDeviceTest, DescribeNamesTheBuildAndDevices) {
  std::string line = DescribeCuda();
  EXPECT_EQ(line.rfind("cuda: ", 0), 0u) << line;
  if (!CudaCompiled()) {
    EXPECT_EQ(line, "cuda: not compiled in (CPU-only build)");
    EXPECT_EQ(ListCudaDevices().status().code(), absl::StatusCode::kUnavailable);
  }
}

TEST(CudaDeviceTest, SgdKernelComputesOnTheDevice) {
  auto devices = ListCudaDevices();
  if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().message();
  std::vector<float> v(1000), g(1000);
  for (int i = 0; i < 1000; ++i) {
    v[i] = i;
    g[i] = 2 * i;
  }
  ASSERT_OK(CudaSgdUpdate(absl::MakeSpan(v), g, 0.25f));
  for (int i = 0; i < 1000; ++i) EXPECT_FLOAT_EQ(v[i], i - 0.5f * i);
}

TEST(CudaDeviceTest, SizeMismatchIsInvalidArgument) {
  std::vector<float> v(3), g(2);
  EXPECT_EQ(CudaSgdUpdate(absl::MakeSpan(v), g, 1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::model
