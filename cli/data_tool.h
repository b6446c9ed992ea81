// `pstrain data shard --data_dir=DIR --out=DIR --files=N`: writes a copy of
// a data set whose training split is N files (data/dataset.h
// WriteShardedCopy), so that a job's replicas can each read only their own
// files. Prints one line per file written.
// `pstrain data to-tfrecord --data_dir=DIR --out=DIR [--files=N]
// [--compression=GZIP|NONE] [--image_encoding=floats|raw|png]`: writes the
// IDX data set as TFRecord files of tf.train.Example, each image as floats,
// raw bytes or a PNG (data/convert.h).
// `pstrain data to-csv --data_dir=DIR --out=DIR`: writes the IDX data set
// as CSV in the layout of Kaggle's Fashion-MNIST CSV (data/convert.h).
// `pstrain data csv-to-tfrecord --model_config=FILE --out=DIR
// [--data_dir=DIR] [--compression=GZIP|NONE] [--skip_bad_records]`: writes
// the CSV or TSV files the config's input block names as TFRecord files of
// tf.train.Example (data/convert.h WriteCsvAsTfRecord).
#ifndef PSTRAIN_CLI_DATA_TOOL_H_
#define PSTRAIN_CLI_DATA_TOOL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "base/cli_args.h"

namespace pstrain {

// `pstrain data inspect --files=PATTERN [--data_dir=DIR] [--records=N]`:
// what the first N (1000) records of the TFRecord files PATTERN names
// (relative: under DIR) hold, a line per feature, and a model config's
// input block that reads them (data/record_survey.h). Errors of
// data::ExpandFiles and data::SurveyRecords.
absl::StatusOr<std::string> InspectRecords(const std::string& pattern, const std::string& data_dir,
                                           int64_t max_records);

// Exit 0 when written; 2 for bad flags; 1 when the data cannot be read or
// written (the message names the file).
int DataMain(CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_DATA_TOOL_H_
