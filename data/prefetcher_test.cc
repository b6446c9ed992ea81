#include "data/prefetcher.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "data/dataset.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

Dataset Tiny(int64_t n, int dim) {
  Dataset d;
  d.num_examples = n;
  d.example_dim = dim;
  d.features.resize(n * dim);
  d.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    d.labels[i] = static_cast<int32_t>(i % 10);
    for (int j = 0; j < dim; ++j) d.features[i * dim + j] = static_cast<float>(i * 100 + j);
  }
  return d;
}

TEST(PrefetcherTest, YieldsExactlyTheIteratorsBatchesInOrderAcrossEpochs) {
  const Dataset d = Tiny(103, 3);
  ShardIterator direct(&d, 1, 2, 8, /*seed=*/7);
  ShardIterator behind(&d, 1, 2, 8, 7);
  Prefetcher prefetch(&behind, /*depth=*/3);
  std::vector<float> fa(24), fb(24);
  std::vector<int32_t> la(8), lb(8);
  for (int step = 0; step < 40; ++step) {  // 6 batches per epoch: several epochs
    const int64_t ea = *direct.Next(fa.data(), la.data());
    const int64_t eb = *prefetch.Next(fb.data(), lb.data());
    ASSERT_EQ(ea, eb) << step;
    ASSERT_EQ(fa, fb) << step;
    ASSERT_EQ(la, lb) << step;
  }
}

TEST(PrefetcherTest, CarriesEachExamplesIdsWithItsFeatures) {
  Dataset d = Tiny(40, 2);
  d.ids_dim = 3;
  for (int64_t i = 0; i < 40 * 3; ++i) d.ids.push_back(i / 3 * 1000 + i % 3);
  ShardIterator it(&d, 0, 1, 4, 5);
  Prefetcher prefetch(&it, /*depth=*/2, /*with_ids=*/true);
  std::vector<float> f(8);
  std::vector<int64_t> ids(12);
  std::vector<int32_t> l(4);
  for (int step = 0; step < 25; ++step) {
    ASSERT_TRUE(prefetch.Next(f.data(), l.data(), ids.data()).ok());
    for (int b = 0; b < 4; ++b) {
      const int64_t example = static_cast<int64_t>(f[b * 2]) / 100;  // features say which
      for (int k = 0; k < 3; ++k) ASSERT_EQ(ids[b * 3 + k], example * 1000 + k) << step;
      ASSERT_EQ(l[b], example % 10);
    }
  }
}

TEST(PrefetcherTest, DestructorEndsAProducerWaitingForRoomAndTakesNoMoreBatches) {
  const Dataset d = Tiny(50, 2);
  ShardIterator it(&d, 0, 1, 5, 1);
  ShardIterator reference(&d, 0, 1, 5, 1);
  std::vector<float> f(10), g(10);
  std::vector<int32_t> l(5), m(5);
  auto p = std::make_unique<Prefetcher>(&it, /*depth=*/2);
  ASSERT_TRUE(p->Next(f.data(), l.data()).ok());
  // Both slots filled again: the producer now waits for room.
  ASSERT_TRUE(p->WaitUntilFull(absl::Seconds(30)));
  absl::Notification destroyed;
  std::thread stopper([&] {
    p.reset();
    destroyed.Notify();
  });
  if (!destroyed.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    // The stopper is stuck in the destructor; ending here reports this test.
    std::fprintf(stderr, "the destructor did not end the waiting producer in 30 s\n");
    std::abort();
  }
  stopper.join();
  // The producer took exactly 1 + depth batches from the iterator: the next
  // one is the reference's fourth.
  ASSERT_TRUE(reference.Seek(3).ok());
  ASSERT_TRUE(it.Next(f.data(), l.data()).ok());
  ASSERT_TRUE(reference.Next(g.data(), m.data()).ok());
  EXPECT_EQ(f, g);
  EXPECT_EQ(l, m);
}

// A source whose batch `fail_at` (0-based) is an error: batch k holds k.
class FailingSource : public BatchSource {
 public:
  explicit FailingSource(int fail_at) : fail_at_(fail_at) {}
  int64_t example_dim() const override { return 1; }
  int64_t ids_dim() const override { return 0; }
  int batch_size() const override { return 1; }
  int64_t shard_size() const override { return 100; }
  absl::StatusOr<int64_t> Next(float* features, int32_t* labels, int64_t*) override {
    ++calls_;
    if (next_ == fail_at_) return absl::DataLossError("part-3 at byte 12: bad");
    features[0] = static_cast<float>(next_);
    labels[0] = next_++;
    return 0;
  }
  absl::Status Seek(int64_t) override { return absl::OkStatus(); }
  int calls() const { return calls_; }

 private:
  const int fail_at_;
  int next_ = 0;
  int calls_ = 0;
};

TEST(PrefetcherTest, HandsOutTheSourcesErrorInItsBatchsPlaceAndAgainAfter) {
  FailingSource source(/*fail_at=*/3);
  {
    Prefetcher prefetch(&source, /*depth=*/4);
    float f;
    int32_t l;
    for (int k = 0; k < 3; ++k) {
      ASSERT_TRUE(prefetch.Next(&f, &l).ok());
      EXPECT_EQ(l, k);
    }
    for (int again = 0; again < 2; ++again) {
      absl::StatusOr<int64_t> e = prefetch.Next(&f, &l);
      EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss);
      EXPECT_EQ(e.status().message(), "part-3 at byte 12: bad");
    }
  }
  // The producer asked no more of the source after its error.
  EXPECT_EQ(source.calls(), 4);
}

}  // namespace
}  // namespace pstrain::data
