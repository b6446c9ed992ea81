#include "transport/shared_memory.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

bool NameExists(const std::string& name) {
  return access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

TEST(SharedRegionTest, AnotherProcessSeesTheBytesThroughOpen) {
  auto made = SharedRegion::Create(1 << 20);
  ASSERT_TRUE(made.ok()) << made.status();
  SharedRegion& region = **made;
  EXPECT_TRUE(NameExists(region.name()));
  std::memcpy(region.data() + SharedRegion::kDataStart, "from parent", 12);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto opened = SharedRegion::Open(region.name(), region.size(), region.token());
    if (!opened.ok()) _exit(2);
    if (std::strcmp((*opened)->data() + SharedRegion::kDataStart, "from parent") != 0) _exit(3);
    std::memcpy((*opened)->data() + 4096, "from child", 11);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_STREQ(region.data() + 4096, "from child");
}

TEST(SharedRegionTest, UnlinkRemovesTheNameButKeepsTheMemory) {
  auto made = SharedRegion::Create(8192);
  ASSERT_TRUE(made.ok()) << made.status();
  const std::string name = (*made)->name();
  (*made)->data()[100] = 7;
  (*made)->Unlink();
  EXPECT_FALSE(NameExists(name));
  EXPECT_EQ((*made)->data()[100], 7);
  auto opened = SharedRegion::Open(name, 8192, (*made)->token());
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("cannot open shared memory " + name));
}

TEST(SharedRegionTest, DestructorRemovesTheName) {
  std::string name;
  {
    auto made = SharedRegion::Create(8192);
    ASSERT_TRUE(made.ok()) << made.status();
    name = (*made)->name();
    EXPECT_TRUE(NameExists(name));
  }
  EXPECT_FALSE(NameExists(name));
}

TEST(SharedRegionTest, OpenRefusesAWrongTokenSizeOrName) {
  auto made = SharedRegion::Create(8192);
  ASSERT_TRUE(made.ok()) << made.status();
  const SharedRegion& r = **made;
  auto wrong_token = SharedRegion::Open(r.name(), r.size(), r.token() + 1);
  ASSERT_FALSE(wrong_token.ok());
  EXPECT_THAT(wrong_token.status().message(), HasSubstr("does not hold the client's token"));
  auto wrong_size = SharedRegion::Open(r.name(), 4096, r.token());
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_THAT(wrong_size.status().message(), HasSubstr("is 8192 bytes, not 4096"));
  auto bad_name = SharedRegion::Open("/../etc/passwd", 8192, r.token());
  ASSERT_FALSE(bad_name.ok());
  EXPECT_THAT(bad_name.status().message(), HasSubstr("is not a shared memory name"));
  auto missing = SharedRegion::Open("/pstrain-no-such-region", 8192, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("another host"));
  EXPECT_FALSE(SharedRegion::Create(64).ok());
}

TEST(SharedRegionTest, ContainsChecksBoundsWithoutOverflow) {
  auto made = SharedRegion::Create(4096);
  ASSERT_TRUE(made.ok()) << made.status();
  const SharedRegion& r = **made;
  EXPECT_TRUE(r.Contains(64, 4032));
  EXPECT_FALSE(r.Contains(64, 4033));
  EXPECT_FALSE(r.Contains(0, 8));  // the token
  EXPECT_FALSE(r.Contains(64, -1));
  EXPECT_FALSE(r.Contains(100, INT64_MAX));
  EXPECT_FALSE(r.Contains(INT64_MAX, 1));
}

TEST(RegionRingTest, TakesAtTheHeadAndGivesBackAtTheTail) {
  RegionRing ring(64, 64 + 1024);
  EXPECT_EQ(ring.Allocate(100), 64);           // [64, 192)
  EXPECT_EQ(ring.Allocate(500), 192);          // [192, 704)
  EXPECT_EQ(ring.Allocate(384), 704);          // [704, 1088): full to the end
  EXPECT_EQ(ring.Allocate(1), std::nullopt);   // nothing free
  ring.FreeOldest();                           // frees [64, 192)
  EXPECT_EQ(ring.Allocate(200), std::nullopt); // 128 free at the start
  EXPECT_EQ(ring.Allocate(128), 64);           // wraps: [64, 192)
  EXPECT_EQ(ring.Allocate(1), std::nullopt);   // head meets tail
  ring.FreeOldest();                           // frees [192, 704)
  EXPECT_EQ(ring.Allocate(512), 192);          // between head and tail
  EXPECT_EQ(ring.held(), 3);
  ring.FreeOldest();
  ring.FreeOldest();
  ring.FreeOldest();
  EXPECT_EQ(ring.held(), 0);
  EXPECT_EQ(ring.Allocate(1024), 64);          // empty: the whole range
  ring.FreeOldest();
  EXPECT_EQ(ring.Allocate(1025), std::nullopt);
  EXPECT_EQ(ring.Allocate(0), std::nullopt);
}

}  // namespace
}  // namespace pstrain
