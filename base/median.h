// Order statistics of a sample, what every bench and experiment here
// reports. Median: the mean of the middle two for an even count; 0 for an
// empty sample.
#ifndef PSTRAIN_BASE_MEDIAN_H_
#define PSTRAIN_BASE_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace pstrain {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The value below which a share `p` (in [0, 1]) of the sample lies (the
// element at index p * size, clamped); 0 for an empty sample.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const size_t at = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + at, v.end());
  return v[at];
}

}  // namespace pstrain

#endif  // PSTRAIN_BASE_MEDIAN_H_
