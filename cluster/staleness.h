// The staleness histogram every PS keeps and every tool reads: how many
// updates a pushed gradient's tensor had taken since the pull it was
// computed from, in buckets 0, 1, 2, 3-4, 5-8, 9-16, 17-32, 33-64 and 65 or
// more (proto/ps_service.proto SliceStats.staleness_histogram).
#ifndef PSTRAIN_CLUSTER_STALENESS_H_
#define PSTRAIN_CLUSTER_STALENESS_H_

#include <cstdint>

namespace pstrain {

inline constexpr int kStalenessBuckets = 9;

// The bucket of `staleness` (negative counts as 0).
int StalenessBucket(int64_t staleness);

// For bucket b in [0, kStalenessBuckets): its name ("0", "3-4", "65+"), its
// largest staleness (65 for the open last one) and the midpoint a mean
// takes for it.
const char* StalenessBucketName(int b);
double StalenessBucketUpper(int b);
double StalenessBucketMid(int b);

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_STALENESS_H_
