// A synthetic click data set drawn from a known model, so that a click
// model trained on it has a known ceiling: the generating model's own AUC
// on the test split (no model can rank the test clicks better in
// expectation).
//
// Each example has eight categorical features, one id each (int64, ids
// 1..V; 0 is never drawn), as a display-ad log has them:
//   user 20000, item 5000, site 1000, category 200, position 10,
//   device 50, hour 24, weekday 7
// drawn with Zipf-like frequencies (id k in proportion to 1 / k^1.1), and a
// label, 1 for a click, drawn from Bernoulli(sigmoid(logit)) with
//   logit = bias + sum over features f of w_f[id_f]
//                + <v_category[id], v_device[id]>   (taste: what is
//                  read on which kind of device)
//                + <v_site[id], v_position[id]>          (placement)
// where every w and v is drawn from normal distributions with the seed.
// The same seed gives the same files, byte for byte, on any machine (the
// generator draws its numbers with its own arithmetic, not the standard
// library's distributions).
//
// Written under an output directory:
//   train-SSSSS-of-NNNNN.tfrecord[.gz]   the training split in N files
//   test-00000-of-00001.tfrecord[.gz]    the test split
//   README.md                            the features, the true model's
//                                        test AUC and log loss
// Each record is a tf.train.Example with one int64_list per feature and
// "label" (an int64_list of 0 or 1).
// Stateless; thread-safe for distinct outputs.
#ifndef PSTRAIN_DATA_CLICK_DATA_H_
#define PSTRAIN_DATA_CLICK_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/byte_source.h"

namespace pstrain::data {

struct ClickFeature {
  std::string name;
  int64_t vocabulary = 0;  // ids 1..vocabulary (a table needs vocabulary + 1 rows)
};

// The eight features, in the order the examples hold them.
const std::vector<ClickFeature>& ClickFeatures();

// The generating model of a seed.
class ClickModel {
 public:
  explicit ClickModel(uint64_t seed);

  // The logit of an example's ids (one per feature, ClickFeatures() order).
  double Logit(const int64_t* ids) const;
  // Draws one example's ids into `ids` from the generator state `state`.
  void DrawIds(uint64_t* state, int64_t* ids) const;

 private:
  double bias_ = 0;
  std::vector<std::vector<double>> weight_;  // per feature, per id (0 unused)
  std::vector<double> category_taste_, device_taste_, site_slot_, position_slot_;
  std::vector<std::vector<double>> cdf_;  // per feature: P(id <= k), k = 1..V
};

// The area under the ROC curve of `scores` against `labels` (1 positive):
// the chance that a positive scores above a negative, ties counted half.
// 0.5 without both kinds of example.
double ExactAuc(const std::vector<double>& scores, const std::vector<int32_t>& labels);

struct ClickDataOptions {
  std::string out;
  int64_t train_examples = 4000000;
  int64_t test_examples = 100000;
  int train_files = 4;
  uint64_t seed = 1;
  Compression compression = Compression::kGzip;
};

struct ClickDataSummary {
  std::vector<std::string> files;  // every file written
  double train_click_rate = 0;
  double test_click_rate = 0;
  // The generating model on the test split: its AUC and mean log loss.
  double true_test_auc = 0;
  double true_test_log_loss = 0;
};

// Writes the data set to options.out (created if needed). InvalidArgument
// for fewer than 1000 training or 100 test examples, more than 10^9, or
// train_files outside 1..min(99999, train_examples); FailedPrecondition
// when `out` holds train-* or test-* files already; write errors naming
// the file. Files are each written whole or not at all.
absl::StatusOr<ClickDataSummary> WriteClickData(const ClickDataOptions& options);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_CLICK_DATA_H_
