// Prepares batches ahead of the training loop: a background thread draws
// them from a BatchSource (gathering shuffled examples into contiguous
// batches, or reading and decoding a stream) up to `depth` batches ahead,
// so a step never waits for its input. Batches come out in exactly the
// source's order; the source's first error comes out in its batch's place,
// and again from every later call.
// Thread-safe for one consumer.
#ifndef PSTRAIN_DATA_PREFETCHER_H_
#define PSTRAIN_DATA_PREFETCHER_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "data/batch_source.h"

namespace pstrain::data {

class Prefetcher {
 public:
  // Starts the thread. REQUIRES: `source` outlives the prefetcher and is
  // not used by anyone else meanwhile; depth >= 1. With `with_ids` batches
  // carry the source's ids too.
  explicit Prefetcher(BatchSource* source, int depth = 4, bool with_ids = false);
  // Stops the thread (a batch being prepared is finished first).
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Copies the next batch out (batch_size x example_dim features, the ids
  // unless `ids` is null, and the labels), waiting for it if it is not
  // ready; returns its epoch, or the source's error.
  absl::StatusOr<int64_t> Next(float* features, int32_t* labels, int64_t* ids = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // How long Next has waited for batches in all: the time training stood
  // still for its input.
  absl::Duration waited() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until `depth` batches are ready, which leaves the thread waiting
  // for room; false when that takes longer than `timeout`. For warming up
  // before a timed run, and for tests.
  bool WaitUntilFull(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Slot {
    std::vector<float> features;
    std::vector<int64_t> ids;
    std::vector<int32_t> labels;
    absl::StatusOr<int64_t> epoch = 0;
  };
  void Produce() ABSL_LOCKS_EXCLUDED(mu_);

  BatchSource* const source_;
  absl::Mutex mu_;
  std::vector<Slot> slots_;                    // a ring; contents owned by whoever the counters say
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;  // batches filled so far
  int64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;  // batches taken so far
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration waited_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_PREFETCHER_H_
