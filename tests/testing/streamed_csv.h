// A small CSV job whose training file is streamed (a shuffle buffer) and
// holds one record that does not parse, for tests of a failure for good
// met in mid-training rather than at launch.
#ifndef PSTRAIN_TESTS_TESTING_STREAMED_CSV_H_
#define PSTRAIN_TESTS_TESTING_STREAMED_CSV_H_

#include <string>

#include "absl/status/statusor.h"

namespace pstrain::testing {

// Writes into `dir` (created when missing) train-0.csv of `records`
// records (x0..x3 and label = x0 + x1 > x2 + x3) whose record `bad`
// (0-based; -1: none) has "oops" for x0, test.csv of 200 good records, and
// model.pbtxt: those files through a shuffle buffer of 100, dense 8 ReLU
// then 2 logits, SGD at 0.1, batch 20. Returns the config's path. With two
// replicas sharing by record, an odd `bad` is replica 1's record
// (bad - 1) / 2, met about that many examples into its first epoch.
absl::StatusOr<std::string> WriteStreamedCsvWithBadRecord(const std::string& dir, int records,
                                                          int bad);

}  // namespace pstrain::testing

#endif  // PSTRAIN_TESTS_TESTING_STREAMED_CSV_H_
