#include "base/process_stats.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ProcessStatsTest, MinorFaultsCountPagesTouchedAnew) {
  ASSERT_OK_AND_ASSIGN(int64_t before, MinorFaults());
  const size_t bytes = 16 << 20;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  madvise(p, bytes, MADV_NOHUGEPAGE);  // one fault per 4 KiB page
  for (size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
  ASSERT_OK_AND_ASSIGN(int64_t after, MinorFaults());
  munmap(p, bytes);
  EXPECT_GE(after - before, 4096);
  EXPECT_EQ(MinorFaults(getpid()).ok(), true);
  EXPECT_FALSE(MinorFaults(-5).ok());
}

TEST(ProcessStatsTest, ThreadCountCountsAThreadWhileItRuns) {
  // A first thread, started and joined: a sanitizer's runtime starts its
  // own helper thread then, and it stays.
  std::thread([] {}).join();
  ASSERT_OK_AND_ASSIGN(int before, ThreadCount());
  EXPECT_GE(before, 1);
  std::atomic<bool> go{false};
  std::thread t([&] {
    while (!go.load()) std::this_thread::yield();
  });
  ASSERT_OK_AND_ASSIGN(int during, ThreadCount(getpid()));
  go = true;
  t.join();
  EXPECT_EQ(during, before + 1);
  ASSERT_OK_AND_ASSIGN(int after, ThreadCount());
  EXPECT_EQ(after, before);
  EXPECT_FALSE(ThreadCount(-5).ok());
}

TEST(ProcessStatsTest, TcpConnectionsToCountsThisProcesssEstablishedOnes) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ASSERT_OK_AND_ASSIGN(int none, TcpConnectionsTo({port}));
  EXPECT_EQ(none, 0);
  int clients[2];
  for (int& c : clients) {
    c = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  // Two connections to the port (the accepted ends have it as their local
  // port, not their peer's, and are not counted).
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_OK_AND_ASSIGN(int two, TcpConnectionsTo({port, 1}));
  EXPECT_EQ(two, 2);
  close(accepted);
  for (int c : clients) close(c);
  close(listener);
}

}  // namespace
}  // namespace pstrain
