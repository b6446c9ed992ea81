#include "model/embeddings.h"

#include <map>
#include <string>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

// A bag over feature NAME, whose ids lie at `offset` of each example's ids.
EmbeddingBagSpec Bag(const std::string& name, int64_t vocabulary, int dim, int64_t offset,
                     int64_t length) {
  EmbeddingBagSpec spec;
  spec.name = name;
  spec.vocabulary = vocabulary;
  spec.dim = dim;
  spec.combiner = EmbeddingBagSpec::Combiner::kSum;
  spec.ids_from = "feature:" + name;
  spec.ids_offset = offset;
  spec.ids_length = length;
  return spec;
}

TEST(EmbeddingsTest, BagsLieSideBySideInTheirOrder) {
  // Two categorical features of one id each and one of two ids: widths 2,
  // 3 and 1.
  ASSERT_OK_AND_ASSIGN(
      Embeddings e,
      Embeddings::Create(
          {Bag("user", 10, 2, 0, 1), Bag("item", 5, 3, 1, 1), Bag("tags", 7, 1, 2, 2)}, 0));
  EXPECT_EQ(e.size(), 3);
  EXPECT_TRUE(e.reads_ids());
  EXPECT_EQ(e.output_width(), 6);
  EXPECT_EQ(e.output_shape(), (std::vector<int64_t>{6}));
  // Example 0: user 4, item 2, tags {1, 6}; example 1: user 4, item 3,
  // tags {5, padding}.
  const std::vector<int64_t> ids = {4, 2, 1, 6, 4, 3, 5, 0};
  EmbeddingBatch batch;
  ASSERT_OK(e.MakeBags(nullptr, ids.data(), 4, 2, &batch));
  EXPECT_EQ(batch.bags[0].unique_ids, (std::vector<int64_t>{4}));
  EXPECT_EQ(batch.bags[1].unique_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(batch.bags[2].unique_ids, (std::vector<int64_t>{1, 6, 5}));
  EXPECT_EQ(batch.num_rows(), 6);
  // Row r of table t holds (100 t + id, ...).
  std::map<std::string, int> asked;
  ASSERT_OK(e.FetchRows(
      [&](const std::string& table, absl::Span<const int64_t> row_ids, float* out) {
        const int t = table == "user/embeddings" ? 0 : table == "item/embeddings" ? 1 : 2;
        ++asked[table];
        const int dim = e[t].dim();
        for (size_t r = 0; r < row_ids.size(); ++r) {
          for (int j = 0; j < dim; ++j) out[r * dim + j] = 100.0f * t + row_ids[r] + 0.5f * j;
        }
        return absl::OkStatus();
      },
      &batch));
  EXPECT_EQ(asked, (std::map<std::string, int>{
                       {"item/embeddings", 1}, {"tags/embeddings", 1}, {"user/embeddings", 1}}));
  std::vector<float> out(12, -1.0f);
  e.Forward(batch, out.data());
  EXPECT_EQ(out, (std::vector<float>{4, 4.5f, 102, 102.5f, 103, 200 + 1 + 200 + 6,  //
                                     4, 4.5f, 103, 103.5f, 104, 205}));
  // Backward: each column's gradient reaches its own table's rows.
  std::vector<float> d_out = {1,  2,  3,  4,  5,  6,  //
                              10, 20, 30, 40, 50, 60};
  e.Backward(d_out.data(), &batch);
  EXPECT_EQ(batch.row_grads[0], (std::vector<float>{11, 22}));               // user 4, twice
  EXPECT_EQ(batch.row_grads[1], (std::vector<float>{3, 4, 5, 30, 40, 50}));  // items 2, 3
  EXPECT_EQ(batch.row_grads[2], (std::vector<float>{6, 6, 60}));             // tags 1, 6, 5
}

TEST(EmbeddingsTest, AFetchErrorIsReturned) {
  ASSERT_OK_AND_ASSIGN(Embeddings e, Embeddings::Create({Bag("user", 10, 2, 0, 1)}, 0));
  const std::vector<int64_t> ids = {3};
  EmbeddingBatch batch;
  ASSERT_OK(e.MakeBags(nullptr, ids.data(), 1, 1, &batch));
  EXPECT_EQ(e.FetchRows([](const std::string&, absl::Span<const int64_t>,
                           float*) { return absl::UnavailableError("ps:1 is gone"); },
                        &batch)
                .message(),
            "ps:1 is gone");
}

TEST(EmbeddingsTest, ASequenceStandsAloneAndNamesAreDistinct) {
  EmbeddingBagSpec tokens = Bag("tokens", 50, 4, 0, 6);
  tokens.sequence = true;
  ASSERT_OK_AND_ASSIGN(Embeddings alone, Embeddings::Create({tokens}, 0));
  EXPECT_EQ(alone.output_shape(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(alone.output_width(), 24);
  EXPECT_EQ(Embeddings::Create({Bag("user", 10, 2, 6, 1), tokens}, 0).status().message(),
            "embedding tokens: a sequence embedding ([T, dim]) must be the model's only "
            "embedding; several are concatenated flat, so make each an embedding_bag");
  EXPECT_EQ(
      Embeddings::Create({Bag("user", 10, 2, 0, 1), Bag("user", 5, 2, 1, 1)}, 0).status().message(),
      "embedding_bag user: the name is used twice");
  // EmbeddingBag::Create's own errors come through.
  EXPECT_EQ(Embeddings::Create({Bag("user", 0, 2, 0, 1)}, 0).status().message(),
            "embedding_bag user: vocabulary is 0: must be at least 1");
  // An id outside its table is named with its feature.
  ASSERT_OK_AND_ASSIGN(Embeddings two,
                       Embeddings::Create({Bag("user", 10, 2, 0, 1), Bag("item", 5, 3, 1, 1)}, 0));
  const std::vector<int64_t> ids = {3, 5};
  EmbeddingBatch batch;
  EXPECT_EQ(two.MakeBags(nullptr, ids.data(), 2, 1, &batch).message(),
            "embedding_bag item: example 0 has id 5 of feature item, outside the table's "
            "vocabulary of 5 rows");
}

}  // namespace
}  // namespace pstrain::model
