// Image files given by name (`pstrain predict --images=photos/*.jpg`), read
// as the job's input reads its images: each file's bytes are the value of
// the input's one image feature, decoded, resized and scaled by its spec
// (data/feature_spec.h), so a photo is scored as training saw its images.
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_IMAGE_FILES_H_
#define PSTRAIN_DATA_IMAGE_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset.h"
#include "data/input.h"

namespace pstrain::data {

// The files `patterns` name (comma-separated globs, each sorted, in the
// order given). NotFound naming a pattern that matches no file.
absl::StatusOr<std::vector<std::string>> ExpandImagePatterns(const std::string& patterns);

// The images of `paths` as a data set of the input's dense layout, labels
// 0 (unknown). InvalidArgument when the input's features are not one image
// feature (decode png, jpeg or image) alone, and naming the file for one
// that does not decode ("FILE: feature \"image\": JPEG image: ...");
// a file that cannot be read is its read error, naming it.
absl::StatusOr<Dataset> LoadImageFiles(const InputSpec& input,
                                       const std::vector<std::string>& paths);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_IMAGE_FILES_H_
