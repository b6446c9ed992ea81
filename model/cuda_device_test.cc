#include "model/cuda_device.h"

#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

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
