#include "base/file_util.h"

#include <cstdlib>

#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string TmpDir() { return testing::TempDir(); }

TEST(FileUtilTest, WritesAtomicallyAndReadsBack) {
  std::string dir = TmpDir() + "/a/b/c";
  ASSERT_OK(MakeDirs(dir));
  ASSERT_OK(MakeDirs(dir));  // idempotent
  std::string path = dir + "/f.json";
  ASSERT_OK(WriteFileAtomically(path, "first"));
  ASSERT_OK(WriteFileAtomically(path, "second"));
  ASSERT_OK_AND_ASSIGN(std::string got, ReadFile(path));
  EXPECT_EQ(got, "second");
  EXPECT_EQ(ReadFile(path + ".tmp").status().code(), absl::StatusCode::kNotFound);
}

TEST(FileUtilTest, ErrorsNameThePath) {
  auto r = ReadFile(TmpDir() + "/missing");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(),
            "cannot open " + TmpDir() + "/missing: No such file or directory");
  absl::Status s = WriteFileAtomically("/proc/pstrain-nope/x", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/proc/pstrain-nope/x.tmp"), absl::string_view::npos);
}

}  // namespace
}  // namespace pstrain
