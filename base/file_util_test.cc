#include "base/file_util.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
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

// A permission error says who this process is and what to grant (a
// container's user writing to a volume mounted from the host); other
// errors say nothing more.
TEST(FileUtilTest, PermissionErrorsNameTheUserAndTheDirectory) {
  EXPECT_EQ(PermissionHint(EACCES, "/data/output/run.json.tmp"),
            absl::StrCat(" (this process runs as uid ", ::getuid(), ", gid ", ::getgid(),
                         ": give that user write access to /data/output, or run the task as "
                         "one that has it)"));
  EXPECT_NE(PermissionHint(EPERM, "run.json").find("write access to ."), std::string::npos);
  EXPECT_EQ(PermissionHint(ENOENT, "/data/output/run.json"), "");
  EXPECT_EQ(PermissionHint(EROFS, "/data/output/run.json"), "");
}

TEST(FileUtilTest, SelfExecutablePathIsThisTestsBinary) {
  const std::string self = SelfExecutablePath();
  ASSERT_FALSE(self.empty());
  EXPECT_EQ(self.front(), '/') << self;
  EXPECT_EQ(self.substr(self.rfind('/') + 1), "file_util_test") << self;
  EXPECT_EQ(::access(self.c_str(), X_OK), 0) << self;
}

}  // namespace
}  // namespace pstrain
