#include "model/embedding_bag.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "model/network.h"

namespace pstrain::model {
namespace {

using Combiner = EmbeddingBagSpec::Combiner;

EmbeddingBagSpec Spec(int64_t vocabulary, int dim, Combiner combiner, int buckets) {
  EmbeddingBagSpec s;
  s.name = "pixels";
  s.vocabulary = vocabulary;
  s.dim = dim;
  s.combiner = combiner;
  s.ids_from = "pixel_buckets:" + std::to_string(buckets);
  return s;
}

TEST(EmbeddingBagTest, IdsArePixelAndIntensityBucketOfNonZeroFeatures) {
  ASSERT_OK_AND_ASSIGN(EmbeddingBag bag, EmbeddingBag::Create(Spec(12, 2, Combiner::kSum, 4), 3));
  // Example 0: feature 1 at 0.3 (bucket 1), feature 2 at 1.0 (bucket 3);
  // example 1: feature 0 at 0.3 and feature 1 at 0.3 (both bucket 1);
  // example 2: nothing.
  const std::vector<float> x = {0, 0.3f, 1.0f, 0.3f, 0.3f, 0, 0, 0, 0};
  Bags bags;
  ASSERT_OK(bag.MakeBags(x.data(), nullptr, 0, 3, &bags));
  EXPECT_EQ(bags.unique_ids, (std::vector<int64_t>{5, 11, 1}));
  EXPECT_EQ(bags.slot, (std::vector<int32_t>{0, 1, 2, 0}));
  EXPECT_EQ(bags.starts, (std::vector<int64_t>{0, 2, 4, 4}));
}

TEST(EmbeddingBagTest, SumAndMeanForwardAndBackwardByHand) {
  Bags bags;
  bags.starts = {0, 2, 3, 3};
  bags.slot = {0, 1, 0};
  bags.unique_ids = {7, 9};
  const std::vector<float> rows = {1, 2, 10, 20};  // id 7: (1, 2); id 9: (10, 20)
  const std::vector<float> d_out = {1, -1, 0.5f, 2, 3, 3};
  std::vector<float> out(6), grads(4);

  ASSERT_OK_AND_ASSIGN(EmbeddingBag sum, EmbeddingBag::Create(Spec(40, 2, Combiner::kSum, 1), 40));
  sum.Forward(bags, rows.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{11, 22, 1, 2, 0, 0}));
  sum.Backward(bags, d_out.data(), grads.data());
  // id 7 is in bags 0 and 1; id 9 in bag 0; bag 2 is empty.
  EXPECT_EQ(grads, (std::vector<float>{1.5f, 1, 1, -1}));

  ASSERT_OK_AND_ASSIGN(EmbeddingBag mean, EmbeddingBag::Create(Spec(40, 2, Combiner::kMean, 1), 40));
  mean.Forward(bags, rows.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{5.5f, 11, 1, 2, 0, 0}));
  mean.Backward(bags, d_out.data(), grads.data());
  EXPECT_EQ(grads, (std::vector<float>{0.5f + 0.5f, -0.5f + 2, 0.5f, -0.5f}));
}

TEST(EmbeddingBagTest, CreateNamesWhatIsWrong) {
  EXPECT_EQ(EmbeddingBag::Create(Spec(3000, 8, Combiner::kMean, 4), 784).status().message(),
            "embedding_bag pixels: vocabulary 3000 is smaller than the 3136 ids that "
            "pixel_buckets:4 gives for 784 features");
  EmbeddingBagSpec s = Spec(3136, 8, Combiner::kMean, 4);
  s.ids_from = "hashed:10";
  EXPECT_EQ(EmbeddingBag::Create(s, 784).status().message(),
            "embedding_bag pixels: ids_from \"hashed:10\" is not feature:NAME or pixel_buckets:B "
            "with B in 1..256");
  EXPECT_EQ(EmbeddingBag::Create(Spec(3136, 0, Combiner::kMean, 4), 784).status().message(),
            "embedding_bag pixels: dim is 0: must be in 1..4096");
}

// A model with a bag: its table comes last among the variables, async, and
// takes no room in the flat array.
TEST(EmbeddingBagTest, MlpListsTheTableLast) {
  NetworkSpec spec = NetworkSpec::FromWidths(784, {16}, 10);
  spec.embeddings = {Spec(3136, 8, Combiner::kMean, 4)};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Network> mlp, Network::Create(spec, 4));
  ASSERT_EQ(mlp->variables().size(), 5u);
  EXPECT_EQ(mlp->variables()[0].name, "dense_0/kernel");
  EXPECT_EQ(mlp->variables()[0].shape, (std::vector<int64_t>{8, 16}));
  const VariableDef& table = mlp->variables()[4];
  EXPECT_EQ(table.name, "pixels/embeddings");
  EXPECT_EQ(table.shape, (std::vector<int64_t>{3136, 8}));
  EXPECT_TRUE(table.embedding);
  EXPECT_EQ(table.consistency, Consistency::Async());
  EXPECT_EQ(mlp->num_parameters(), 8 * 16 + 16 + 16 * 10 + 10);
  EXPECT_EQ(mlp->offsets()[4], mlp->num_parameters());
  EXPECT_EQ(mlp->layout().FirstTable(), 4);
  EXPECT_FALSE(mlp->layout().in_flat(4));
  EXPECT_EQ(mlp->layout().role_of(4), ParamRole::kTable);
  EXPECT_EQ(mlp->input_width(), 8);
  spec.embeddings[0].name = "dense_0";
  EXPECT_EQ(Network::Create(spec, 4).status().message(),
            "model layer 0 (dense_0): the name is an embedding's too");
}

// The whole chain (rows -> bag -> dense layers -> loss) against numerical
// gradients of the table rows, for both combiners.
TEST(EmbeddingBagTest, RowGradientsMatchNumericalGradients) {
  for (const Combiner combiner : {Combiner::kSum, Combiner::kMean}) {
    SCOPED_TRACE(combiner == Combiner::kSum ? "sum" : "mean");
    const int input_dim = 6, batch = 5;
    NetworkSpec spec = NetworkSpec::FromWidths(input_dim, {7}, 3);
    spec.embeddings = {Spec(input_dim * 3, 4, combiner, 3)};
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Network> mlp, Network::Create(spec, batch));
    const EmbeddingBag& bag = mlp->embeddings()[0];
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(0, 1);
    std::vector<float> x(batch * input_dim);
    for (float& v : x) v = u(rng) < 0.4f ? 0.0f : u(rng);
    const std::vector<int32_t> y = {0, 2, 1, 1, 0};
    const std::vector<float> params = mlp->InitialParameters(5);
    Bags bags;
    ASSERT_OK(bag.MakeBags(x.data(), nullptr, 0, batch, &bags));
    ASSERT_GT(bags.unique_ids.size(), 5u);
    std::vector<float> rows(bags.unique_ids.size() * 4);
    for (float& v : rows) v = u(rng) - 0.5f;

    std::vector<float> in(batch * 4), din(batch * 4), grads(mlp->num_parameters());
    std::vector<float> row_grads(rows.size());
    bag.Forward(bags, rows.data(), in.data());
    ASSERT_OK(mlp->ComputeGradients(params.data(), in.data(), y.data(), batch, grads.data(),
                                    nullptr, din.data()));
    bag.Backward(bags, din.data(), row_grads.data());

    auto loss = [&](const std::vector<float>& r) {
      std::vector<float> input(batch * 4);
      bag.Forward(bags, r.data(), input.data());
      BatchResult br = *mlp->Evaluate(params.data(), input.data(), y.data(), batch);
      return br.loss_sum / br.count;
    };
    const float h = 1e-3f;
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<float> plus = rows, minus = rows;
      plus[i] += h;
      minus[i] -= h;
      const double numeric = (loss(plus) - loss(minus)) / (2 * h);
      EXPECT_NEAR(row_grads[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << "element " << i;
    }
  }
}

TEST(EmbeddingBagTest, EvaluateExamplesFetchesEachChunksRows) {
  NetworkSpec spec = NetworkSpec::FromWidths(4, {3}, 2);
  spec.embeddings = {Spec(8, 2, Combiner::kSum, 2)};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Network> mlp, Network::Create(spec, 8));
  data::Dataset examples;
  examples.num_examples = 3;
  examples.example_dim = 4;
  examples.features = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0.2f, 0};
  examples.labels = {0, 1, 0};
  std::vector<std::vector<int64_t>> asked;
  std::vector<std::vector<float>> seen;
  auto fetch = [&](const std::string& table, absl::Span<const int64_t> ids, float* out) {
    EXPECT_EQ(table, "pixels/embeddings");
    asked.emplace_back(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size(); ++i) {
      out[2 * i] = static_cast<float>(ids[i]);
      out[2 * i + 1] = 1;
    }
    return absl::OkStatus();
  };
  auto evaluate = [&](const float* input, const int32_t*, int n) -> absl::StatusOr<BatchResult> {
    seen.emplace_back(input, input + 2 * n);
    BatchResult r;
    r.count = n;
    r.correct = 1;
    return r;
  };
  ASSERT_OK_AND_ASSIGN(BatchResult total,
                       EvaluateExamples(mlp->embeddings(), fetch, examples, 2, evaluate));
  EXPECT_EQ(total.count, 3);
  EXPECT_EQ(total.correct, 2);
  // Chunks of 2 then 1: ids 1 (feature 0, bucket 1) and 3; then 4.
  EXPECT_EQ(asked, (std::vector<std::vector<int64_t>>{{1, 3}, {4}}));
  EXPECT_EQ(seen, (std::vector<std::vector<float>>{{1, 1, 3, 1}, {4, 1}}));
  auto failing = [](const std::string&, absl::Span<const int64_t>, float*) {
    return absl::UnavailableError("ps:0 is gone");
  };
  EXPECT_EQ(EvaluateExamples(mlp->embeddings(), failing, examples, 2, evaluate).status().message(),
            "ps:0 is gone");
}

// An embedding of a sequence feature: ids at offset 1 of each example's 4
// ids (the first is another feature's), length 3.
EmbeddingBagSpec SequenceSpec(bool mask_zero) {
  EmbeddingBagSpec s;
  s.name = "words";
  s.vocabulary = 10;
  s.dim = 2;
  s.ids_from = "feature:words";
  s.sequence = true;
  s.mask_zero = mask_zero;
  s.ids_offset = 1;
  s.ids_length = 3;
  return s;
}

TEST(EmbeddingBagTest, SequenceKeepsEachIdsRowInPlaceAndMasksPadding) {
  ASSERT_OK_AND_ASSIGN(EmbeddingBag emb, EmbeddingBag::Create(SequenceSpec(true), 0));
  EXPECT_TRUE(emb.reads_ids());
  EXPECT_EQ(emb.output_shape(), (std::vector<int64_t>{3, 2}));
  // Example 0: words 4 7 4; example 1: word 7 then padding.
  const std::vector<int64_t> ids = {99, 4, 7, 4, 99, 7, 0, 0};
  Bags bags;
  ASSERT_OK(emb.MakeBags(nullptr, ids.data(), 4, 2, &bags));
  EXPECT_EQ(bags.unique_ids, (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(bags.slot, (std::vector<int32_t>{0, 1, 0, 1, -1, -1}));
  const std::vector<float> rows = {1, 2, 3, 4};  // id 4: (1, 2); id 7: (3, 4)
  std::vector<float> out(12);
  emb.Forward(bags, rows.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 0, 0, 0, 0}));
  const std::vector<float> d_out = {1, 1, 2, 2, 10, 10, 5, 5, 100, 100, 100, 100};
  std::vector<float> grads(4);
  emb.Backward(bags, d_out.data(), grads.data());
  // id 4 at two places, id 7 at two; the padding's gradient goes nowhere.
  EXPECT_EQ(grads, (std::vector<float>{11, 11, 7, 7}));

  // Without mask_zero id 0 is a row like any other (Keras's default).
  ASSERT_OK_AND_ASSIGN(EmbeddingBag plain, EmbeddingBag::Create(SequenceSpec(false), 0));
  ASSERT_OK(plain.MakeBags(nullptr, ids.data(), 4, 2, &bags));
  EXPECT_EQ(bags.unique_ids, (std::vector<int64_t>{4, 7, 0}));
  EXPECT_EQ(bags.slot, (std::vector<int32_t>{0, 1, 0, 1, 2, 2}));

  // An id the table has no row for is named.
  const std::vector<int64_t> bad = {0, 4, 10, 0};
  EXPECT_EQ(emb.MakeBags(nullptr, bad.data(), 4, 1, &bags).message(),
            "embedding words: example 0 has id 10 of feature words, outside the table's "
            "vocabulary of 10 rows");
}

TEST(EmbeddingBagTest, BagOfFeatureIdsDropsPaddingAndLargeVocabulariesUseAMap) {
  EmbeddingBagSpec spec = SequenceSpec(false);
  spec.sequence = false;
  spec.combiner = Combiner::kMean;
  spec.vocabulary = int64_t{1} << 30;  // beyond the slot table: a hash map
  ASSERT_OK_AND_ASSIGN(EmbeddingBag bag, EmbeddingBag::Create(spec, 0));
  EXPECT_EQ(bag.output_shape(), (std::vector<int64_t>{2}));
  const std::vector<int64_t> ids = {0, 900000000, 5, 0, 0, 0, 0, 0};
  Bags bags;
  ASSERT_OK(bag.MakeBags(nullptr, ids.data(), 4, 2, &bags));
  EXPECT_EQ(bags.unique_ids, (std::vector<int64_t>{900000000, 5}));
  EXPECT_EQ(bags.starts, (std::vector<int64_t>{0, 2, 2}));
  std::vector<float> out(4);
  bag.Forward(bags, std::vector<float>{2, 4, 6, 8}.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{4, 6, 0, 0}));
  // A sequence cannot take pixel buckets; a feature must be named.
  EmbeddingBagSpec pixels = SequenceSpec(false);
  pixels.ids_from = "pixel_buckets:4";
  EXPECT_EQ(EmbeddingBag::Create(pixels, 784).status().message(),
            "embedding words: ids_from \"pixel_buckets:4\" is not feature:NAME");
}

}  // namespace
}  // namespace pstrain::model
