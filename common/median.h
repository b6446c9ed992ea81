// The median of a sample (the mean of the middle two for an even count);
// 0 for an empty one. What every bench and experiment here reports.
#ifndef PSTRAIN_COMMON_MEDIAN_H_
#define PSTRAIN_COMMON_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace pstrain {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MEDIAN_H_
