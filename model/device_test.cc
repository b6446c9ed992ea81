#include "model/device.h"

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

TEST(DeviceTest, EachFormReadsBackAsWritten) {
  for (const char* text : {"auto", "cpu", "cuda", "cuda:3"}) {
    ASSERT_OK_AND_ASSIGN(Device d, ParseDevice(text));
    EXPECT_EQ(d.ToString(), text);
  }
  ASSERT_OK_AND_ASSIGN(Device zero, ParseDevice("cuda:0"));
  EXPECT_EQ(zero, Device::Cuda(0));
  EXPECT_EQ(zero.ToString(), "cuda");
}

TEST(DeviceTest, AnythingElseIsRefusedNamingIt) {
  for (const char* text : {"gpu", "cuda:", "cuda:-1", "cuda:64", "cuda:x", "CPU", ""}) {
    absl::StatusOr<Device> d = ParseDevice(text);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(d.status().message().find(absl::StrCat("\"", text, "\"")), std::string::npos)
        << d.status();
  }
}

}  // namespace
}  // namespace pstrain::model
