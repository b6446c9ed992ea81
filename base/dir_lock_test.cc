// DirLock against the real file system and a real second process: one
// holder at a time, the refusal quoting the holder, the lock free again as
// soon as its holder is gone (released, or the process killed).
#include "base/dir_lock.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string Dir() {
  const std::string dir = pstrain::testing::TempDir() + "/" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(DirLockTest, OneHolderAtATimeAndTheRefusalQuotesIt) {
  const std::string dir = Dir();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DirLock> first, DirLock::Acquire(dir, "job A's chief"));
  EXPECT_EQ(first->path(), dir + "/LOCK");
  ASSERT_OK(first->Claim());
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir + "/LOCK"));
  EXPECT_EQ(text, "job A's chief\n");
  // A second open of the file is another holder, even in this process.
  absl::StatusOr<std::unique_ptr<DirLock>> second = DirLock::Acquire(dir, "job B's chief");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(),
            absl::StrCat(dir, " is in use (", dir, "/LOCK held by: job A's chief)"));
  first.reset();
  ASSERT_OK_AND_ASSIGN(second, DirLock::Acquire(dir, "job B's chief"));
  ASSERT_OK((*second)->Claim());
  ASSERT_OK_AND_ASSIGN(text, ReadFile(dir + "/LOCK"));
  EXPECT_EQ(text, "job B's chief\n");  // the shorter line replaced the longer one whole
}

TEST(DirLockTest, TakingTheLockChangesNothingUntilItIsClaimed) {
  const std::string dir = Dir();
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DirLock> first, DirLock::Acquire(dir, "run 1's chief"));
    ASSERT_OK(first->Claim());
  }
  struct stat before;
  ASSERT_EQ(::stat((dir + "/LOCK").c_str(), &before), 0);
  {
    // A relaunch that takes the lock, then is refused: the file is as
    // the last holder left it, and a contender meanwhile quotes that line.
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DirLock> refused, DirLock::Acquire(dir, "run 2's chief"));
    EXPECT_THAT(DirLock::Acquire(dir, "run 3's chief").status().message(),
                HasSubstr("held by: run 1's chief)"));
  }
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir + "/LOCK"));
  EXPECT_EQ(text, "run 1's chief\n");
  struct stat after;
  ASSERT_EQ(::stat((dir + "/LOCK").c_str(), &after), 0);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  // A lock file that does not exist yet is created empty.
  const std::string fresh = Dir() + "/fresh";
  std::filesystem::create_directories(fresh);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DirLock> lock, DirLock::Acquire(fresh, "x"));
  ASSERT_OK_AND_ASSIGN(text, ReadFile(fresh + "/LOCK"));
  EXPECT_EQ(text, "");
}

TEST(DirLockTest, ALockWhoseProcessWasKilledIsFreeAtOnce) {
  const std::string dir = Dir();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = DirLock::Acquire(dir, ThisProcessAsHolder(", the child"));
    const char c = lock.ok() && (*lock)->Claim().ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    for (int i = 0; i < 600; ++i) ::sleep(1);  // until killed
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  absl::StatusOr<std::unique_ptr<DirLock>> taken = DirLock::Acquire(dir, "the parent");
  EXPECT_THAT(taken.status().message(),
              HasSubstr(absl::StrCat("held by: pid ", child, " on host ")));
  EXPECT_THAT(taken.status().message(), HasSubstr(" UTC, the child)"));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_OK(DirLock::Acquire(dir, "the parent").status());
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(DirLockTest, ADirectoryThatCannotTakeTheFileIsNamed) {
  if (::geteuid() == 0) {
    // root writes into read-only directories; a missing one fails alike.
    const std::string dir = Dir() + "/missing";
    absl::Status s = DirLock::Acquire(dir, "x").status();
    EXPECT_EQ(s.message(), absl::StrCat("cannot create the lock file ", dir,
                                        "/LOCK: No such file or directory"));
    return;
  }
  const std::string dir = Dir();
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  absl::Status s = DirLock::Acquire(dir, "x").status();
  ::chmod(dir.c_str(), 0755);
  EXPECT_EQ(s.message(),
            absl::StrCat("cannot create the lock file ", dir, "/LOCK: Permission denied"));
}

}  // namespace
}  // namespace pstrain
