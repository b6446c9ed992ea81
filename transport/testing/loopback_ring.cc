#include "transport/testing/loopback_ring.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "base/subprocess.h"
#include "gtest/gtest.h"

namespace pstrain::testing {

std::vector<RingMember> LoopbackMembers(int n) {
  std::vector<int> ports = PickFreePorts(n).value();
  std::vector<RingMember> members;
  for (int i = 0; i < n; ++i)
    members.push_back({absl::StrCat("worker:", i), "127.0.0.1", ports[i]});
  return members;
}

RingOptions LoopbackRingOptions(const std::vector<RingMember>& members, int rank) {
  RingOptions o;
  o.members = members;
  o.rank = rank;
  o.job_key = "test";
  o.connect_timeout = absl::Seconds(20);
  o.timeout = absl::Seconds(20);
  return o;
}

void OnLoopbackRing(int n, const std::function<void(RingOptions&)>& tweak,
                    const std::function<void(int rank, Ring& ring)>& body) {
  const std::vector<RingMember> members = LoopbackMembers(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      RingOptions o = LoopbackRingOptions(members, r);
      if (tweak) tweak(o);
      absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Form(o);
      if (!ring.ok()) {
        ADD_FAILURE() << "member " << r << ": " << ring.status();
        return;
      }
      body(r, **ring);
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace pstrain::testing
