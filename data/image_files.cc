#include "data/image_files.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "data/example_parser.h"
#include "data/feature_spec.h"
#include "proto/example.pb.h"

namespace pstrain::data {

absl::StatusOr<std::vector<std::string>> ExpandImagePatterns(const std::string& patterns) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(patterns, ',', absl::SkipWhitespace())) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files,
                             ExpandFiles(std::string(absl::StripAsciiWhitespace(p)), ""));
    out.insert(out.end(), files.begin(), files.end());
  }
  if (out.empty()) return absl::InvalidArgumentError("no image file is named");
  return out;
}

absl::StatusOr<Dataset> LoadImageFiles(const InputSpec& input,
                                       const std::vector<std::string>& paths) {
  const std::vector<FeatureDef>& features = input.features.features;
  if (features.size() != 1 || !features[0].is_image()) {
    return absl::InvalidArgumentError(
        "image files are read as the value of the input's one image feature (decode png, jpeg "
        "or image); this input's features are not that");
  }
  // Labels are not known: the decoder is given 0 and no bound.
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ExampleDecoder> decoder,
                           ExampleDecoder::Create(input.features));
  Dataset ds;
  ds.example_dim = decoder->dense_width();
  ds.ids_dim = 0;
  ds.features.resize(paths.size() * ds.example_dim);
  ParsedExample parsed;
  for (size_t i = 0; i < paths.size(); ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(paths[i]));
    v1::Example e;
    auto& m = *e.mutable_features()->mutable_feature();
    m[features[0].name].mutable_bytes_list()->add_value(std::move(bytes));
    m[input.features.label].mutable_int64_list()->add_value(0);
    int32_t label = 0;
    absl::Status s = decoder->Decode(e.SerializeAsString(), &parsed,
                                     ds.features.data() + i * ds.example_dim, nullptr, &label, 0);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(paths[i], ": ", s.message()));
    ds.labels.push_back(0);
    ++ds.num_examples;
  }
  return ds;
}

}  // namespace pstrain::data
