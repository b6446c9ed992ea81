#include "data/prefetcher.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
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
  Prefetcher prefetch(&behind, 8, 3, /*depth=*/3);
  std::vector<float> fa(24), fb(24);
  std::vector<int32_t> la(8), lb(8);
  for (int step = 0; step < 40; ++step) {  // 6 batches per epoch: several epochs
    const int64_t ea = direct.Next(fa.data(), la.data());
    const int64_t eb = prefetch.Next(fb.data(), lb.data());
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
  Prefetcher prefetch(&it, 4, 2, /*depth=*/2, /*ids_dim=*/3);
  std::vector<float> f(8);
  std::vector<int64_t> ids(12);
  std::vector<int32_t> l(4);
  for (int step = 0; step < 25; ++step) {
    prefetch.Next(f.data(), l.data(), ids.data());
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
  auto p = std::make_unique<Prefetcher>(&it, 5, 2, /*depth=*/2);
  p->Next(f.data(), l.data());
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
  for (int i = 0; i < 3; ++i) reference.Next(g.data(), m.data());
  it.Next(f.data(), l.data());
  reference.Next(g.data(), m.data());
  EXPECT_EQ(f, g);
  EXPECT_EQ(l, m);
}

}  // namespace
}  // namespace pstrain::data
