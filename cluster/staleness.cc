#include "cluster/staleness.h"

#include <algorithm>

namespace pstrain {
namespace {

constexpr double kUpper[kStalenessBuckets] = {0, 1, 2, 4, 8, 16, 32, 64, 65};
constexpr double kMid[kStalenessBuckets] = {0, 1, 2, 3.5, 6.5, 12.5, 24.5, 48.5, 65};
constexpr const char* kName[kStalenessBuckets] = {"0",    "1",     "2",     "3-4", "5-8",
                                                  "9-16", "17-32", "33-64", "65+"};

}  // namespace

int StalenessBucket(int64_t s) {
  if (s <= 2) return static_cast<int>(std::max<int64_t>(s, 0));
  int width = 0;
  for (uint64_t v = s - 1; v != 0; v >>= 1) ++width;
  return std::min(kStalenessBuckets - 1, width + 1);
}

const char* StalenessBucketName(int b) { return kName[b]; }
double StalenessBucketUpper(int b) { return kUpper[b]; }
double StalenessBucketMid(int b) { return kMid[b]; }

}  // namespace pstrain
