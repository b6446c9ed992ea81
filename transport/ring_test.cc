#include "transport/ring.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/subprocess.h"
#include "base/testing/certs.h"
#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/frame_socket.h"
#include "transport/frame_tls.h"
#include "transport/security.h"
#include "transport/testing/loopback_ring.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

using testing::LoopbackMembers;

RingOptions Options(const std::vector<RingMember>& members, int rank) {
  return testing::LoopbackRingOptions(members, rank);
}

// Forms a ring of n members, each on a thread, and runs body(rank, ring) on
// each. Links share memory when `shared`, with `slots` slots each.
void OnRing(int n, const std::function<void(int, Ring&)>& body, int64_t piece_bytes = 512 << 10,
            bool shared = true, int slots = 8) {
  testing::OnLoopbackRing(
      n,
      [&](RingOptions& o) {
        o.piece_bytes = piece_bytes;
        o.shared_memory = shared;
        o.shared_slots = slots;
      },
      body);
}

std::vector<float> RandomData(int rank, int64_t count, int seed) {
  std::mt19937 rng(seed * 131 + rank);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(count);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(RingTest, AllReduceSumsEveryElementOnEveryMember) {
  for (bool shared : {true, false}) {
    for (int n : {1, 2, 3, 4}) {
      for (int64_t count : {int64_t{1}, int64_t{5}, int64_t{1000}, int64_t{100003}}) {
        std::vector<std::vector<float>> data(n);
        // Small pieces: many per chunk, so the forwarding overlaps; two
        // slots a shared link, so its writer waits for the reader.
        OnRing(
            n,
            [&](int r, Ring& ring) {
              data[r].resize(count);
              for (int64_t i = 0; i < count; ++i) {
                data[r][i] = static_cast<float>(r * 1000 + i % 977);
              }
              for (int round = 0; round < 2; ++round) {  // the slots' counts carry on
                ASSERT_OK(ring.AllReduceSum(absl::MakeSpan(data[r])));
                if (round == 0) {
                  for (int64_t i = 0; i < count; ++i) {
                    data[r][i] = static_cast<float>(r * 1000 + i % 977);
                  }
                }
              }
            },
            /*piece_bytes=*/4096, shared, /*slots=*/2);
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < count; ++i) {
            float want = 0;
            for (int m = 0; m < n; ++m) want += static_cast<float>(m * 1000 + i % 977);
            ASSERT_EQ(data[r][i], want) << "n=" << n << " count=" << count << " rank " << r
                                        << " element " << i << " shared " << shared;
          }
        }
      }
    }
  }
}

TEST(RingTest, ABfloat16WireSumsToBfloat16PrecisionAndEveryMemberHoldsTheSameBits) {
  for (bool shared : {true, false}) {
    for (int n : {2, 3, 4}) {
      const int64_t count = 50001;
      std::vector<std::vector<float>> data(n);
      OnRing(
          n,
          [&](int r, Ring& ring) {
            data[r] = RandomData(r, count, 5);
            for (int round = 0; round < 2; ++round) {
              if (round == 1) data[r] = RandomData(r, count, 5);
              ASSERT_OK(ring.AllReduceSum(absl::MakeSpan(data[r]), /*bfloat16_wire=*/true));
            }
          },
          /*piece_bytes=*/4096, shared, /*slots=*/2);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(std::memcmp(data[r].data(), data[0].data(), count * sizeof(float)), 0)
            << "n=" << n << " rank " << r << " shared " << shared;
      }
      // Each value is exactly a bfloat16, within n - 1 roundings (2^-8
      // relative each, of partial sums at most n in magnitude) plus the
      // rounding of the inputs themselves.
      std::vector<std::vector<float>> inputs(n);
      for (int m = 0; m < n; ++m) inputs[m] = RandomData(m, count, 5);
      for (int64_t i = 0; i < count; ++i) {
        float want = 0;
        for (int m = 0; m < n; ++m) want += inputs[m][i];
        const float got = data[0][i];
        uint32_t bits;
        std::memcpy(&bits, &got, 4);
        ASSERT_EQ(bits & 0xffffu, 0u) << i;
        ASSERT_NEAR(got, want, 2.0 * n * n / 256.0) << "n=" << n << " element " << i;
      }
    }
  }
}

TEST(RingTest, LinksOnOneHostShareMemoryUnlessAMemberSaysNo) {
  std::vector<std::string> links(3);
  std::vector<std::pair<bool, bool>> shared(3);
  OnRing(3, [&](int r, Ring& ring) {
    links[r] = ring.DescribeLinks();
    shared[r] = {ring.right_shared(), ring.left_shared()};
  });
  EXPECT_EQ(links[1], "to worker:2 by shared memory, from worker:0 by shared memory");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(shared[r], std::make_pair(true, true)) << r;
  // The offered names are gone from /dev/shm once the ring formed.
  std::string left_behind;
  std::unique_ptr<FILE, int (*)(FILE*)> ls(
      popen(absl::StrCat("ls /dev/shm | grep -c '^pstrain-", getpid(), "-'").c_str(), "r"),
      pclose);
  ASSERT_NE(ls, nullptr);
  char line[64] = {};
  ASSERT_NE(fgets(line, sizeof(line), ls.get()), nullptr);
  EXPECT_STREQ(line, "0\n");

  // worker:0 does not share: neither of its links does; worker:1 to worker:2 still does.
  const std::vector<RingMember> members = LoopbackMembers(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      RingOptions o = Options(members, r);
      o.shared_memory = r != 0;
      auto ring = Ring::Form(o);
      ASSERT_OK(ring.status());
      links[r] = (*ring)->DescribeLinks();
      std::vector<float> data(100000, static_cast<float>(r + 1));
      ASSERT_OK((*ring)->AllReduceSum(absl::MakeSpan(data)));
      EXPECT_EQ(data[0], 6.0f);
      EXPECT_EQ(data[99999], 6.0f);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(links[0], "to worker:1 by tcp, from worker:2 by tcp");
  EXPECT_EQ(links[1], "to worker:2 by shared memory, from worker:0 by tcp");
  EXPECT_EQ(links[2], "to worker:0 by tcp, from worker:1 by shared memory");
}

TEST(RingTest, SharedAndSocketLinksGiveTheSameBits) {
  const int n = 3;
  const int64_t count = 300001;
  std::vector<std::vector<float>> by_memory(n), by_socket(n);
  for (bool shared : {true, false}) {
    auto& out = shared ? by_memory : by_socket;
    OnRing(
        n,
        [&](int r, Ring& ring) {
          out[r] = RandomData(r, count, 11);
          ASSERT_OK(ring.AllReduceSum(absl::MakeSpan(out[r])));
        },
        /*piece_bytes=*/64 << 10, shared, /*slots=*/3);
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(std::memcmp(by_memory[r].data(), by_socket[0].data(), count * sizeof(float)), 0)
        << r;
  }
}

TEST(RingTest, EveryMemberHoldsTheSameBitsAndARerunRepeatsThem) {
  const int n = 3;
  const int64_t count = 250000;
  std::vector<std::vector<float>> first(n), second(n);
  for (auto* out : {&first, &second}) {
    OnRing(n, [&](int r, Ring& ring) {
      (*out)[r] = RandomData(r, count, 7);
      ASSERT_OK(ring.AllReduceSum(absl::MakeSpan((*out)[r])));
    });
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(std::memcmp(first[r].data(), first[0].data(), count * sizeof(float)), 0) << r;
    EXPECT_EQ(std::memcmp(second[r].data(), first[0].data(), count * sizeof(float)), 0) << r;
  }
}

TEST(RingTest, AllGatherReturnsEachMembersBytesInRankOrder) {
  const int n = 4;
  std::vector<std::vector<std::string>> got(n);
  OnRing(n, [&](int r, Ring& ring) {
    for (int round = 0; round < 3; ++round) {
      auto all = ring.AllGather(std::string(r * 3 + round, static_cast<char>('a' + r)));
      ASSERT_OK(all.status());
      got[r] = *all;
    }
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(got[r].size(), n);
    for (int m = 0; m < n; ++m) EXPECT_EQ(got[r][m], std::string(m * 3 + 2, 'a' + m));
  }
}

// An all-gather given a longer wait than the ring's timeout waits for a
// member that is late by more than the timeout (the chief scoring at a
// job's end); one without fails, naming how long it waited. After it the
// ring's timeout holds again.
TEST(RingTest, AnAllGatherWithAWaitOutlastsTheRingsTimeout) {
  const std::vector<RingMember> members = LoopbackMembers(3);
  std::vector<absl::Status> patient(3), hasty(3), after(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      RingOptions o = Options(members, r);
      o.timeout = absl::Milliseconds(300);
      auto ring = Ring::Form(o);
      ASSERT_OK(ring.status());
      if (r == 0) absl::SleepFor(absl::Milliseconds(900));
      patient[r] = (*ring)->AllGather("end", absl::Seconds(10)).status();
      std::vector<float> data(100, 1.0f);
      after[r] = (*ring)->AllReduceSum(absl::MakeSpan(data));
      if (r == 0) absl::SleepFor(absl::Milliseconds(900));
      hasty[r] = (*ring)->AllGather("late").status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_OK(patient[r]) << r;
    EXPECT_OK(after[r]) << r;
  }
  // worker:1 reads from worker:0, late by 900 ms against the ring's 300.
  EXPECT_TRUE(absl::IsDeadlineExceeded(hasty[1])) << hasty[1];
  EXPECT_THAT(hasty[1].message(), HasSubstr("nothing from worker:0"));
  EXPECT_THAT(hasty[1].message(), HasSubstr("for 300ms"));
}

TEST(RingTest, AMemberThatNeverComesIsNamed) {
  const std::vector<RingMember> members = LoopbackMembers(3);
  std::vector<absl::Status> formed(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {  // worker:2 never starts
    threads.emplace_back([&, r] {
      RingOptions o = Options(members, r);
      o.connect_timeout = absl::Milliseconds(600);
      formed[r] = Ring::Form(o).status();
    });
  }
  for (std::thread& t : threads) t.join();
  // worker:0 waits for worker:2 on its left; worker:1 cannot reach it on its right.
  EXPECT_THAT(formed[0].message(), HasSubstr("worker:2"));
  EXPECT_THAT(formed[1].message(), HasSubstr("could not reach its right neighbour worker:2"));
}

TEST(RingTest, AMemberThatStopsFailsTheCollectiveNamingIt) {
  const std::vector<RingMember> members = LoopbackMembers(3);
  std::vector<absl::Status> result(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      RingOptions o = Options(members, r);
      o.timeout = absl::Milliseconds(800);
      auto ring = Ring::Form(o);
      ASSERT_OK(ring.status());
      std::vector<float> data(1000, 1.0f);
      ASSERT_OK((*ring)->AllReduceSum(absl::MakeSpan(data)));
      if (r == 1) return;  // worker:1 stops: its ring closes
      result[r] = (*ring)->AllReduceSum(absl::MakeSpan(data));
    });
  }
  for (std::thread& t : threads) t.join();
  // worker:2 reads from worker:1, which went away; worker:0 reads from
  // worker:2, which stopped sending once its left neighbour failed, or
  // times out.
  EXPECT_FALSE(result[2].ok());
  EXPECT_THAT(result[2].message(), HasSubstr("worker:1"));
  EXPECT_FALSE(result[0].ok());
  EXPECT_THAT(result[0].message(), HasSubstr("worker:2"));
}

// A member that fails for good between collectives announces it: every
// other member, in an all-reduce of many pieces (more than a shared link's
// slots) or an all-gather, or arriving at one later, fails it with Aborted
// naming that member and holds the notice's text as it was sent; the
// announcer's notice comes back around (OK), and later collectives fail
// the same way. Over shared and socket links, and from each rank.
TEST(RingTest, AnAnnouncedFailureReachesEveryMemberWhateverItIsDoing) {
  for (bool shared : {true, false}) {
    for (bool gather : {false, true}) {
      for (int from : {0, 1, 3}) {
        SCOPED_TRACE(absl::StrCat(shared ? "shared" : "socket", gather ? ", all-gather" : "",
                                  ", from ", from));
        constexpr int kMembers = 4;
        std::vector<absl::Status> first(kMembers), later(kMembers);
        std::vector<std::optional<RingNotice>> notices(kMembers);
        absl::Status announced = absl::UnknownError("not announced");
        OnRing(
            kMembers,
            [&](int r, Ring& ring) {
              std::vector<float> data(100000, 1.0f);
              // Two rounds that every member finishes, then the announcer
              // fails while the others are in the third (member 2 comes
              // to it late).
              for (int round = 0; round < 2; ++round) {
                ASSERT_OK(ring.AllReduceSum(absl::MakeSpan(data)));
              }
              if (r == from) {
                announced = ring.Announce("1\n15\nthe data at byte 42 is bad");
                later[r] = ring.AllReduceSum(absl::MakeSpan(data));
                return;
              }
              if (r == 2) absl::SleepFor(absl::Milliseconds(300));
              first[r] = gather ? ring.AllGather(std::string(50000, 'x')).status()
                                : ring.AllReduceSum(absl::MakeSpan(data));
              notices[r] = ring.notice();
              later[r] = ring.AllGather("again").status();
            },
            /*piece_bytes=*/4096, shared, /*slots=*/2);
        EXPECT_OK(announced);
        for (int r = 0; r < kMembers; ++r) {
          if (r == from) {
            EXPECT_FALSE(later[r].ok()) << "the announcer's ring is shut down";
            continue;
          }
          SCOPED_TRACE(absl::StrCat("member ", r));
          EXPECT_EQ(first[r].code(), absl::StatusCode::kAborted) << first[r];
          EXPECT_EQ(std::string(first[r].message()),
                    absl::StrCat("ring: worker:", from, " announced that it failed for good"));
          ASSERT_TRUE(notices[r].has_value());
          EXPECT_EQ(notices[r]->from, from);
          EXPECT_EQ(notices[r]->text, "1\n15\nthe data at byte 42 is bad");
          EXPECT_EQ(later[r], first[r]);
        }
      }
    }
  }
}

// Two members announcing at once: the one after them learns the first
// notice to reach it, and both announcers end at once (one sees its
// notice come back, the other its left neighbour gone), never waiting for
// the ring's timeout.
TEST(RingTest, TwoMembersAnnouncingAtOnceEndAtOnce) {
  std::vector<absl::Status> status(3);
  std::vector<std::optional<RingNotice>> notices(3);
  const absl::Time start = absl::Now();
  testing::OnLoopbackRing(
      3, [](RingOptions& o) { o.timeout = absl::Seconds(20); },
      [&](int r, Ring& ring) {
        std::vector<float> data(1000, 1.0f);
        if (r == 2) {
          status[r] = ring.AllReduceSum(absl::MakeSpan(data));
        } else {
          status[r] = ring.Announce(absl::StrCat("member ", r));
        }
        notices[r] = ring.notice();
      });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(status[2].code(), absl::StatusCode::kAborted) << status[2];
  ASSERT_TRUE(notices[2].has_value());
  // Member 1 sends its own notice before it passes member 0's on.
  EXPECT_EQ(notices[2]->text, "member 1");
  EXPECT_EQ(notices[2]->from, 1);
  EXPECT_OK(status[1]);
  EXPECT_EQ(status[0].code(), absl::StatusCode::kUnavailable) << status[0];
}

TEST(RingTest, MembersThatDisagreeOnTheSizeAreTold) {
  std::vector<absl::Status> result(2);
  OnRing(2, [&](int r, Ring& ring) {
    std::vector<float> data(r == 0 ? 100 : 102, 1.0f);
    result[r] = ring.AllReduceSum(absl::MakeSpan(data));
  });
  EXPECT_THAT(absl::StrCat(result[0].message(), result[1].message()),
              HasSubstr("the members disagree on the collective"));
}

TEST(RingTest, AnotherJobsTaskIsNotTakenForTheLeftNeighbour) {
  const std::vector<RingMember> members = LoopbackMembers(2);
  std::vector<absl::Status> formed(2);
  std::thread stray([&] {
    RingOptions o = Options(members, 1);
    o.job_key = "another job";
    o.connect_timeout = absl::Milliseconds(700);
    Ring::Form(o).IgnoreError();
  });
  RingOptions o = Options(members, 0);
  o.connect_timeout = absl::Milliseconds(700);
  formed[0] = Ring::Form(o).status();
  stray.join();
  EXPECT_FALSE(formed[0].ok());
  EXPECT_THAT(formed[0].message(), HasSubstr("not by its left neighbour worker:1"));
}

// A connection that says nothing (a stray one: a port scan, a task of a
// launch gone) does not hold up the left neighbour's behind it: its hello
// is read on a thread of its own, and the ring forms at once.
TEST(RingTest, ASilentConnectionDoesNotHoldUpTheLeftNeighbour) {
  const std::vector<RingMember> members = LoopbackMembers(2);
  std::unique_ptr<FrameSocket> silent;
  std::vector<absl::Status> formed(2);
  std::thread first([&] {
    RingOptions o = Options(members, 0);
    formed[0] = Ring::Form(o).status();
  });
  // Connected to member 0's port before member 1 exists, and silent.
  for (int i = 0; i < 200 && silent == nullptr; ++i) {
    auto socket = FrameSocket::Connect(members[0].host, members[0].port, absl::Seconds(1));
    if (socket.ok()) {
      silent = *std::move(socket);
    } else {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  ASSERT_NE(silent, nullptr);
  const absl::Time start = absl::Now();
  std::thread second([&] {
    RingOptions o = Options(members, 1);
    formed[1] = Ring::Form(o).status();
  });
  first.join();
  second.join();
  EXPECT_OK(formed[0]);
  EXPECT_OK(formed[1]);
  // It used to wait out the silent connection's 5 s first.
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(RingTest, WithATokenOnlyAMemberPresentingItJoins) {
  const std::string token = "a-cluster-token-of-32-characters";
  // Both hold the token: the ring forms and sums.
  std::vector<float> sums(2);
  {
    const std::vector<RingMember> members = LoopbackMembers(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        RingOptions o = Options(members, r);
        o.token = token;
        auto ring = Ring::Form(o);
        ASSERT_OK(ring.status());
        std::vector<float> data(10, static_cast<float>(r + 1));
        ASSERT_OK((*ring)->AllReduceSum(absl::MakeSpan(data)));
        sums[r] = data[9];
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(sums, (std::vector<float>{3, 3}));
  // worker:1 presents another token, then none: worker:0 refuses it, and
  // its message does not echo what was presented.
  for (const std::string theirs : {std::string("another-token-of-32-characters!!"), std::string()}) {
    const std::vector<RingMember> members = LoopbackMembers(2);
    absl::Status formed;
    std::thread stray([&] {
      RingOptions o = Options(members, 1);
      o.token = theirs;
      o.connect_timeout = absl::Milliseconds(700);
      Ring::Form(o).IgnoreError();
    });
    RingOptions o = Options(members, 0);
    o.token = token;
    o.connect_timeout = absl::Milliseconds(700);
    formed = Ring::Form(o).status();
    stray.join();
    EXPECT_FALSE(formed.ok());
    EXPECT_THAT(formed.message(),
                HasSubstr(absl::StrCat("presenting ", theirs.empty() ? "no" : "a wrong",
                                       " cluster token: not taken for its left neighbour "
                                       "worker:1")));
    if (!theirs.empty()) EXPECT_THAT(formed.message(), ::testing::Not(HasSubstr(theirs)));
  }
}

// The TLS of a member holding the certificates of `job`, which
// testing::MakeCerts made (deploy/make_certs.sh, before the members' threads).
void WithTls(const std::string& job, RingOptions& o) {
  auto security =
      Security::Load(CertsDirConfig(absl::StrCat(testing::TempDir(), "/certs/", job), false));
  ASSERT_OK(security.status());
  auto server = FrameTls::Make(**security, FrameTls::Side::kServer);
  auto client = FrameTls::Make(**security, FrameTls::Side::kClient);
  ASSERT_OK(server.status());
  ASSERT_OK(client.status());
  o.tls_server = *server;
  o.tls_client = *client;
}

TEST(RingTest, WithTlsEveryLinkIsInsideTlsAndTheSumsAreTheSame) {
  // Three members holding the job's certificates, over sockets and over
  // shared memory: the same sums as without TLS, every link inside TLS.
  ASSERT_OK(testing::MakeCerts("job").status());
  for (bool shared : {false, true}) {
    std::vector<std::string> links(3);
    std::vector<std::vector<float>> got(3), plain(3);
    for (bool tls : {false, true}) {
      testing::OnLoopbackRing(
          3,
          [&](RingOptions& o) {
            o.piece_bytes = 64 << 10;
            o.shared_memory = shared;
            if (tls) WithTls("job", o);
          },
          [&](int r, Ring& ring) {
            std::vector<float> data = RandomData(r, 300001, 5);
            ASSERT_OK(ring.AllReduceSum(absl::MakeSpan(data)));
            ASSERT_OK_AND_ASSIGN(std::vector<std::string> all,
                                 ring.AllGather(absl::StrCat("member ", r)));
            EXPECT_EQ(all, (std::vector<std::string>{"member 0", "member 1", "member 2"}));
            (tls ? got : plain)[r] = data;
            if (tls) links[r] = ring.DescribeLinks();
          });
    }
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(got[r], plain[r]) << r;
      EXPECT_EQ(got[r], got[0]) << r;
    }
    EXPECT_THAT(links[1], ::testing::StartsWith(
                              shared ? "to worker:2 by shared memory, from worker:0 by shared "
                                       "memory; TLSv1.3 (TLS_AES_128_GCM_SHA256), records sealed "
                                     : "to worker:2 by tcp inside TLS, from worker:0 by tcp inside "
                                       "TLS; TLSv1.3 (TLS_AES_128_GCM_SHA256), records sealed "));
  }
}

TEST(RingTest, WithTlsAMemberOfAnotherCaOrWithoutTlsIsRefusedNamingWhy) {
  // worker:1 holds another job's certificates, then none at all: worker:0
  // refuses it as its left neighbour, saying why, and worker:1's ring does
  // not form either.
  for (const char* job : {"job", "other"}) ASSERT_OK(testing::MakeCerts(job).status());
  for (const std::string theirs : {std::string("other"), std::string()}) {
    const std::vector<RingMember> members = LoopbackMembers(2);
    absl::Status stray_formed;
    std::thread stray([&] {
      RingOptions o = Options(members, 1);
      if (!theirs.empty()) WithTls(theirs, o);
      // Trying for longer than worker:0 waits, so that every connection
      // worker:0 refuses is refused for what it presents.
      o.connect_timeout = absl::Milliseconds(3000);
      stray_formed = Ring::Form(o).status();
    });
    RingOptions o = Options(members, 0);
    WithTls("job", o);
    o.connect_timeout = absl::Milliseconds(1500);
    const absl::Status formed = Ring::Form(o).status();
    stray.join();
    EXPECT_FALSE(stray_formed.ok());
    EXPECT_EQ(formed.code(), absl::StatusCode::kFailedPrecondition) << formed;
    EXPECT_THAT(formed.message(), HasSubstr("ring: worker:0 was reached by 127.0.0.1:"));
    EXPECT_THAT(formed.message(),
                HasSubstr("not taken for its left neighbour worker:1 (127.0.0.1:"));
    EXPECT_THAT(formed.message(), HasSubstr("TLS handshake with 127.0.0.1:"));
    if (!theirs.empty()) {
      // Each refused the other's certificate: another CA signed it.
      EXPECT_THAT(std::string(formed.message()), HasSubstr("unknown ca"));
      EXPECT_THAT(std::string(stray_formed.message()), HasSubstr("unknown ca"));
    }
  }
}

}  // namespace
}  // namespace pstrain
