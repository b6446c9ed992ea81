#include "data/click_data.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/splitmix64.h"
#include "base/status_macros.h"
#include "data/tfrecord.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

// Feature positions in ClickFeatures().
enum Feature { kUser, kItem, kSite, kCategory, kPosition, kDevice, kHour, kWeekday };

constexpr int kTasteDim = 4;
constexpr double kZipf = 1.2;

// Uniform in [0, 1).
double Uniform(uint64_t* state) { return static_cast<double>(SplitMix64(state) >> 11) * 0x1p-53; }

// Standard normal (Box-Muller).
double Normal(uint64_t* state) {
  const double u = 1.0 - Uniform(state);  // (0, 1]
  const double v = Uniform(state);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
}

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// The bytes of `e` with its features in name order (a map's order is
// otherwise unspecified), so that a seed gives the same files.
std::string Deterministic(const v1::Example& e) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    e.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace

const std::vector<ClickFeature>& ClickFeatures() {
  static const auto* features = new std::vector<ClickFeature>{
      {"user", 5000},   {"item", 2000}, {"site", 500}, {"category", 100},
      {"position", 10}, {"device", 20}, {"hour", 24},  {"weekday", 7}};
  return *features;
}

ClickModel::ClickModel(uint64_t seed) {
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + 17;
  const std::vector<ClickFeature>& features = ClickFeatures();
  // Each feature's spread of per-id effects.
  const double spread[] = {0.4, 0.4, 0.3, 0.4, 0.0, 0.2, 0.2, 0.1};
  bias_ = -1.4;
  for (size_t f = 0; f < features.size(); ++f) {
    const int64_t v = features[f].vocabulary;
    std::vector<double> w(v + 1, 0.0);
    for (int64_t id = 1; id <= v; ++id) w[id] = spread[f] * Normal(&state);
    // Lower positions on the page are clicked less.
    if (f == kPosition) {
      for (int64_t id = 1; id <= v; ++id) w[id] = -0.15 * static_cast<double>(id - 1);
    }
    weight_.push_back(std::move(w));
    std::vector<double> cdf(v);
    double total = 0;
    for (int64_t id = 1; id <= v; ++id) {
      total += std::pow(static_cast<double>(id), -kZipf);
      cdf[id - 1] = total;
    }
    for (double& c : cdf) c /= total;
    cdf_.push_back(std::move(cdf));
  }
  auto vectors = [&](int64_t n, double sd) {
    std::vector<double> out((n + 1) * kTasteDim, 0.0);
    for (int64_t i = kTasteDim; i < static_cast<int64_t>(out.size()); ++i) {
      out[i] = sd * Normal(&state);
    }
    return out;
  };
  category_taste_ = vectors(features[kCategory].vocabulary, 0.5);
  device_taste_ = vectors(features[kDevice].vocabulary, 0.5);
  site_slot_ = vectors(features[kSite].vocabulary, 0.4);
  position_slot_ = vectors(features[kPosition].vocabulary, 0.4);
}

void ClickModel::DrawIds(uint64_t* state, int64_t* ids) const {
  for (size_t f = 0; f < cdf_.size(); ++f) {
    const double u = Uniform(state);
    const auto it = std::upper_bound(cdf_[f].begin(), cdf_[f].end(), u);
    ids[f] = std::min<int64_t>(it - cdf_[f].begin(), cdf_[f].size() - 1) + 1;
  }
}

double ClickModel::Logit(const int64_t* ids) const {
  double z = bias_;
  for (size_t f = 0; f < weight_.size(); ++f) z += weight_[f][ids[f]];
  auto dot = [](const std::vector<double>& a, int64_t i, const std::vector<double>& b, int64_t j) {
    double d = 0;
    for (int k = 0; k < kTasteDim; ++k) d += a[i * kTasteDim + k] * b[j * kTasteDim + k];
    return d;
  };
  z += dot(category_taste_, ids[kCategory], device_taste_, ids[kDevice]);
  z += dot(site_slot_, ids[kSite], position_slot_, ids[kPosition]);
  return z;
}

double ExactAuc(const std::vector<double>& scores, const std::vector<int32_t>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double wins = 0, negatives_below = 0, positives = 0, negatives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    double pos = 0, neg = 0;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) {
      (labels[order[j]] == 1 ? pos : neg) += 1;
      ++j;
    }
    wins += pos * (negatives_below + 0.5 * neg);
    negatives_below += neg;
    positives += pos;
    negatives += neg;
    i = j;
  }
  if (positives == 0 || negatives == 0) return 0.5;
  return wins / (positives * negatives);
}

absl::StatusOr<ClickDataSummary> WriteClickData(const ClickDataOptions& options) {
  if (options.train_examples < 1000 || options.train_examples > 1000000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("train_examples ", options.train_examples, " is not in 1000..1000000000"));
  }
  if (options.test_examples < 100 || options.test_examples > 1000000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("test_examples ", options.test_examples, " is not in 100..1000000000"));
  }
  const int64_t max_files = std::min<int64_t>(99999, options.train_examples);
  if (options.train_files < 1 || options.train_files > max_files) {
    return absl::InvalidArgumentError(
        absl::StrCat("train_files ", options.train_files, " is not in 1..", max_files));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckNoSplitFiles(options.out));
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(options.out));
  const std::vector<ClickFeature>& features = ClickFeatures();
  const ClickModel model(options.seed);
  uint64_t state = options.seed * 0x9E3779B97F4A7C15ull + 1;
  std::vector<int64_t> ids(features.size());
  ClickDataSummary summary;
  std::vector<double> test_scores;
  std::vector<int32_t> test_labels;
  double test_log_loss = 0;

  // Writes examples [0, n) of a split into `path`; `test` keeps each
  // example's true probability and label.
  auto write = [&](const std::string& path, int64_t n, bool test, int64_t* clicks) -> absl::Status {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordWriter> writer,
                             TfRecordWriter::Open(path, options.compression));
    v1::Example e;
    auto& map = *e.mutable_features()->mutable_feature();
    for (const ClickFeature& f : features) map[f.name].mutable_int64_list()->add_value(0);
    map["label"].mutable_int64_list()->add_value(0);
    for (int64_t k = 0; k < n; ++k) {
      model.DrawIds(&state, ids.data());
      const double p = Sigmoid(model.Logit(ids.data()));
      const int32_t label = Uniform(&state) < p ? 1 : 0;
      *clicks += label;
      for (size_t f = 0; f < features.size(); ++f) {
        map[features[f].name].mutable_int64_list()->set_value(0, ids[f]);
      }
      map["label"].mutable_int64_list()->set_value(0, label);
      PSTRAIN_RETURN_IF_ERROR(writer->Write(Deterministic(e)));
      if (test) {
        test_scores.push_back(p);
        test_labels.push_back(label);
        test_log_loss -= std::log(label == 1 ? p : 1 - p);
      }
    }
    PSTRAIN_RETURN_IF_ERROR(writer->Close());
    summary.files.push_back(path);
    return absl::OkStatus();
  };
  int64_t train_clicks = 0, test_clicks = 0;
  const int64_t n = options.train_examples;
  const int files = options.train_files;
  for (int i = 0; i < files; ++i) {
    PSTRAIN_RETURN_IF_ERROR(
        write(TfRecordSplitPath(options.out, "train", i, files, options.compression),
              (i + 1) * n / files - i * n / files, false, &train_clicks));
  }
  PSTRAIN_RETURN_IF_ERROR(write(TfRecordSplitPath(options.out, "test", 0, 1, options.compression),
                                options.test_examples, true, &test_clicks));
  summary.train_click_rate = static_cast<double>(train_clicks) / n;
  summary.test_click_rate = static_cast<double>(test_clicks) / options.test_examples;
  summary.true_test_auc = ExactAuc(test_scores, test_labels);
  summary.true_test_log_loss = test_log_loss / options.test_examples;

  std::string readme = absl::StrFormat(
      "# Synthetic clicks (seed %d)\n\n"
      "%d training examples in %d files, %d test examples; click rate %.4f (train), "
      "%.4f (test).\n\n"
      "Drawn from a known model (data/click_data.h): per-id effects of every feature, a\n"
      "device x category taste and a site x position placement term. That model's own\n"
      "scores on the test split: AUC %.4f, log loss %.4f, the ceiling a trained model\n"
      "approaches.\n\n"
      "Features (tf.train.Example int64_list, one id each, ids 1..V):\n\n",
      options.seed, n, files, options.test_examples, summary.train_click_rate,
      summary.test_click_rate, summary.true_test_auc, summary.true_test_log_loss);
  for (const ClickFeature& f : features) {
    absl::StrAppend(&readme, "    feature { name: \"", f.name,
                    "\" type: \"int64\" vocabulary: ", f.vocabulary + 1, " }\n");
  }
  absl::StrAppend(&readme, "\nLabel: \"label\", 1 for a click.\n");
  const std::string readme_path = options.out + "/README.md";
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(readme_path, readme));
  summary.files.push_back(readme_path);
  return summary;
}

}  // namespace pstrain::data
