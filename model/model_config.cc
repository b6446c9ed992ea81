#include "model/model_config.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/consistency.h"
#include "common/file_util.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "proto/model_config.pb.h"

namespace pstrain::model {
namespace {

// Keeps the first error with its position (1-based, as editors count).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    error_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

bool ValidInitializer(absl::string_view spec) {
  if (spec.empty() || spec == "zeros") return true;
  float a;
  return absl::StartsWith(spec, "uniform:") && absl::SimpleAtof(spec.substr(8), &a) &&
         a >= 0 && a < 1e30f;
}

}  // namespace

absl::StatusOr<std::vector<VariableDef>> ParseModelConfig(const std::string& text,
                                                          const std::string& name) {
  v1::ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", errors.error()));
  }
  if (config.variable_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": no variable is defined"));
  }
  std::vector<VariableDef> out;
  std::set<std::string> names;
  for (int i = 0; i < config.variable_size(); ++i) {
    const v1::VariableConfig& v = config.variable(i);
    const std::string where = absl::StrCat(name, ": variable ", i, " (",
                                           v.name().empty() ? "no name" : v.name(), "): ");
    if (v.name().empty()) return absl::InvalidArgumentError(where + "name is missing");
    if (!names.insert(v.name()).second) {
      return absl::InvalidArgumentError(where + "the name is used twice");
    }
    if (v.shape_size() == 0) return absl::InvalidArgumentError(where + "shape is missing");
    for (int64_t d : v.shape()) {
      if (d < 1) {
        return absl::InvalidArgumentError(absl::StrCat(where, "shape has a dimension of ", d));
      }
    }
    if (v.embedding() && v.shape_size() != 2) {
      return absl::InvalidArgumentError(where + "an embedding table's shape is [vocabulary, dim]");
    }
    if (!v.consistency().empty()) {
      auto c = ParseConsistency(v.consistency());
      if (!c.ok()) return absl::InvalidArgumentError(where + std::string(c.status().message()));
    }
    if (!ValidInitializer(v.initializer())) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "initializer \"", v.initializer(), "\" is not zeros or uniform:A (A >= 0)"));
    }
    VariableDef def{v.name(), {v.shape().begin(), v.shape().end()}};
    def.embedding = v.embedding();
    def.consistency = v.consistency();
    def.initializer = v.initializer();
    out.push_back(std::move(def));
  }
  return out;
}

absl::StatusOr<std::vector<VariableDef>> LoadModelConfig(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return absl::NotFoundError(std::string(text.status().message()));
  return ParseModelConfig(*text, path);
}

}  // namespace pstrain::model
