// The stream a job's dense variables draw their initial values from, so
// that the chief, `train --local` and every PS agree on them without the
// values being sent: std::mt19937_64 seeded with the job's seed, each
// uniform element one draw of std::uniform_real_distribution<float>(-A, A)
// (one engine call per element), the variables in the model's layer order
// (kernel, then bias; zeros draw nothing). A variable's initializer names
// its limit and its first draw, "stream:A@K", and a PS holding rows
// [r0, r1) of it fills them from draw K + r0 * row_elements on.
#ifndef PSTRAIN_CLUSTER_INITIAL_STREAM_H_
#define PSTRAIN_CLUSTER_INITIAL_STREAM_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

struct StreamPlace {
  float limit = 0;         // uniform in [-limit, limit]
  int64_t first_draw = 0;  // the variable's element 0
};

// "stream:A@K", A printed so that it reads back as the same float.
std::string StreamInitializer(const StreamPlace& place);

// True when `spec` names the stream ("stream:" ...), well formed or not.
bool IsStreamInitializer(absl::string_view spec);

// InvalidArgument quoting `spec` unless it is "stream:A@K" with A finite
// and at least 0, K at least 0.
absl::StatusOr<StreamPlace> ParseStreamInitializer(absl::string_view spec);

// The stream itself, read forward. Thread-compatible.
class InitialStream {
 public:
  explicit InitialStream(uint64_t seed) : seed_(seed), rng_(seed) {}

  // Fills out[0, n) with draws [draw, draw + n) as uniform in [-limit,
  // limit]. A draw before the stream's position is drawn again from a
  // fresh engine (a skip back costs the draws up to it).
  void Fill(int64_t draw, float limit, int64_t n, float* out);

  // The next draw the stream gives.
  int64_t position() const { return position_; }

 private:
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  int64_t position_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_INITIAL_STREAM_H_
