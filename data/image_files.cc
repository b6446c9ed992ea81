#include "data/image_files.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "data/feature_spec.h"

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
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ExampleDecoder> decoder,
                           ExampleDecoder::Create(input.features));
  Dataset ds;
  ds.example_dim = decoder->dense_width();
  ds.ids_dim = 0;
  ds.features.resize(paths.size() * ds.example_dim);
  for (size_t i = 0; i < paths.size(); ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(paths[i]));
    absl::Status s = decoder->DecodeEncoded(0, bytes, ds.features.data() + i * ds.example_dim);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(paths[i], ": ", s.message()));
  }
  // Labels are not known: 0.
  ds.num_examples = static_cast<int64_t>(paths.size());
  ds.labels.assign(paths.size(), 0);
  return ds;
}

}  // namespace pstrain::data
