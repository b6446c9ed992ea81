// Rings of members on loopback, each member on a thread of the test's own,
// for tests of the ring and of what runs over it.
#ifndef PSTRAIN_TRANSPORT_TESTING_LOOPBACK_RING_H_
#define PSTRAIN_TRANSPORT_TESTING_LOOPBACK_RING_H_

#include <functional>
#include <vector>

#include "transport/ring.h"

namespace pstrain::testing {

// n members, "worker:0" .. "worker:<n-1>", on 127.0.0.1 at free ports.
std::vector<RingMember> LoopbackMembers(int n);

// Member `rank`'s options: job key "test", 20 s to form and per collective.
RingOptions LoopbackRingOptions(const std::vector<RingMember>& members, int rank);

// Forms a ring of `n` loopback members, each on a thread of its own with
// LoopbackRingOptions adjusted by `tweak` (may be null), runs body(rank,
// ring) on each, and joins them. A member whose ring does not form fails
// the test (its body does not run).
void OnLoopbackRing(int n, const std::function<void(RingOptions&)>& tweak,
                    const std::function<void(int rank, Ring& ring)>& body);

}  // namespace pstrain::testing

#endif  // PSTRAIN_TRANSPORT_TESTING_LOOPBACK_RING_H_
