// Loading a model's variables from a config file in Protocol Buffers text
// format (proto/model_config.proto).
#ifndef PSTRAIN_MODEL_MODEL_CONFIG_H_
#define PSTRAIN_MODEL_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/placement.h"

namespace pstrain::model {

// The variables `path` defines. InvalidArgument as "PATH:LINE:COLUMN: what"
// for text that does not parse (unknown field, wrong type), and
// "PATH: variable N (NAME): what" for a missing name or shape, a dimension
// that is not positive, a table that is not [vocabulary, dim], or a
// consistency or initializer that does not parse. NotFound when the file
// cannot be read.
absl::StatusOr<std::vector<VariableDef>> LoadModelConfig(const std::string& path);

// The same, from text; `name` stands for the path in messages.
absl::StatusOr<std::vector<VariableDef>> ParseModelConfig(const std::string& text,
                                                          const std::string& name);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_MODEL_CONFIG_H_
