#ifndef PSTRAIN_OPTIM_COUNT_TABLE_H_
#define PSTRAIN_OPTIM_COUNT_TABLE_H_

// Per-count constants of an optimizer's step, computed once per count.
//
// Adam's bias correction and Nadam's schedule depend only on t, the count
// of updates a slice or table row has had. A table row is a few dozen
// floats, so recomputing them (two to fifty std::pow calls) for every row
// of every push costs more than the row's update: about an eighth of a
// PS's cycles on the embedding-bag model. A CountTable keeps K floats per
// count for t in [1, kLimit), filled a chunk of counts at a time on first
// use, each entry exactly what `fill` returns, so a step reads the same
// values as computing them anew.
//
// Thread-safe: Get may be called concurrently (each chunk is filled once,
// under absl::call_once); the table never changes a filled entry.

#include <array>
#include <cstdint>
#include <memory>

#include "absl/base/call_once.h"

namespace pstrain::optim {

template <int K>
class CountTable {
 public:
  static constexpr int64_t kChunk = 4096;
  static constexpr int64_t kChunks = 16;
  static constexpr int64_t kLimit = kChunk * kChunks;

  // The K floats of count t, filled by fill(t, float* out) for the whole
  // chunk holding t on its first use; nullptr when t is outside [1, kLimit)
  // (the caller computes them itself). `fill` must return the same values
  // for a count every time.
  template <typename Fill>
  const float* Get(int64_t t, const Fill& fill) const {
    if (t < 1 || t >= kLimit) return nullptr;
    const int64_t c = t / kChunk;
    Chunk& chunk = chunks_[c];
    absl::call_once(chunk.once, [&] {
      chunk.values.reset(new float[kChunk * K]);
      for (int64_t i = c == 0 ? 1 : 0; i < kChunk; ++i) {
        fill(c * kChunk + i, chunk.values.get() + i * K);
      }
    });
    return chunk.values.get() + (t - c * kChunk) * K;
  }

 private:
  struct Chunk {
    absl::once_flag once;
    std::unique_ptr<float[]> values;
  };
  mutable std::array<Chunk, kChunks> chunks_;
};

}  // namespace pstrain::optim

#endif  // PSTRAIN_OPTIM_COUNT_TABLE_H_
