// Model config files in Protocol Buffers text format
// (proto/model_config.proto, configs/*.pbtxt): either a list of variables
// (for placement) or a model to train, described by its layers, with the
// job settings it states (optimizer, batch size, epochs, consistency...).
#ifndef PSTRAIN_MODEL_MODEL_CONFIG_H_
#define PSTRAIN_MODEL_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/placement.h"
#include "model/job_spec.h"

namespace pstrain::model {

// The file's `security` block (paths; empty when not given).
struct SecuritySettings {
  std::string tls_cert, tls_key, tls_ca, tls_server_name, token_file;
};

struct ModelConfigFile {
  // The variables listed, or those of the layers.
  std::vector<VariableDef> variables;
  // True when the file describes layers: `job` then holds the model and the
  // settings the file states, defaults (model/job_spec.h) for the rest.
  bool trainable = false;
  JobSpec job;
  SecuritySettings security;
};

// Sizes of a model that follow from its data, for a config that leaves
// them out: the number of ids of a token feature (vocab.txt's words, plus
// 0 for padding and 1 for out of vocabulary, as data/text_corpus.h writes
// them) and the number of classes (labels.txt's lines).
struct DataSizes {
  int64_t vocabulary = 0;  // 0: not known
  int64_t classes = 0;     // 0: not known
  // Set: the size replaces what the config states as well (`pstrain
  // summary --vocabulary=N --classes=K`), not only where it leaves it out.
  bool replace_vocabulary = false;
  bool replace_classes = false;
  // Given on the command line (--input_shape, --alpha, --bn_momentum): in
  // place of the config's input_shape (and input_dim), its application's
  // alpha, and every batch normalization's momentum. Empty or negative:
  // the config's.
  std::vector<int64_t> input_shape;
  double alpha = -1;
  double bn_momentum = -1;
  // The shape of the data's images ([28, 28, 1] for Fashion-MNIST's IDX
  // files), when known: the input shape of a config that names an
  // application without one (the application's own input then fitted to
  // it by layers in front, model/applications.h).
  std::vector<int64_t> data_shape;
  // Where the job reads its data: for such a config whose input is
  // TFRecord files of images (one bytes feature, decode png or raw_uint8),
  // the shape is read there from the first training record
  // (data::FirstImageShape). Empty: not read.
  std::string data_dir;
};

// [rows, columns, 1] as the IDX training images in `data_dir` state them;
// empty when there are none or their header does not read.
std::vector<int64_t> IdxImageShapeOf(const std::string& data_dir);

// "32,32,3" -> [32, 32, 3]; InvalidArgument quoting `flag` and the text
// when it is not positive integers separated by commas.
absl::StatusOr<std::vector<int64_t>> ParseShapeFlag(const std::string& flag,
                                                    const std::string& text);

// The sizes `data_dir`'s vocab.txt and labels.txt give (each 0 when the
// file is not there; non-empty lines counted).
DataSizes DataSizesOf(const std::string& data_dir);

// Parses `text`; `name` stands for the path in messages. Every error is
// InvalidArgument as "NAME:LINE:COLUMN: what", pointing at the field or the
// entry at fault (1-based, as editors count): text that does not parse
// (unknown field or layer type, wrong value type), a missing field (a
// variable's name or shape, input_dim, a dense layer's units), a dimension
// that is not positive, a table that is not [vocabulary, dim], a layer whose
// input_dim does not chain with the layer before, an activation, initializer,
// loss, optimizer or consistency that is not known, a job setting out of
// range, or both variables and layers in one file. The closed sets
// (padding, activation, combiner, loss, format, compression) are proto
// enums: written bare (`padding: same`) or quoted as configs wrote them
// before (`padding: "same"`), an unknown value is named by the parser.
//
// `sizes` fills what the config leaves out (or, replacing, what it states
// too): the vocabulary of every int64 feature read as ids as they
// are (no vocabulary_file, no hash_buckets), the vocabulary of every
// embedding or embedding_bag layer reading a feature's ids, and the units
// of the last layer, the logits (1 for a sigmoid loss over 2 classes).
absl::StatusOr<ModelConfigFile> ParseModelConfigFile(const std::string& text,
                                                     const std::string& name,
                                                     const DataSizes& sizes = {});

// The same, read from `path`. NotFound when the file cannot be read.
absl::StatusOr<ModelConfigFile> LoadModelConfigFile(const std::string& path,
                                                    const DataSizes& sizes = {});

// The variables only (for placement): the errors above.
absl::StatusOr<std::vector<VariableDef>> LoadModelConfig(const std::string& path);
absl::StatusOr<std::vector<VariableDef>> ParseModelConfig(const std::string& text,
                                                          const std::string& name);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_MODEL_CONFIG_H_
