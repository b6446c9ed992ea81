#include "tests/testing/streamed_csv.h"

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace pstrain::testing {
namespace {

std::string Rows(int n, int bad) {
  std::string text = "x0,x1,x2,x3,label\n";
  for (int i = 0; i < n; ++i) {
    const float x[4] = {(i % 7) / 7.0f, (i % 5) / 5.0f, (i % 3) / 3.0f, (i % 11) / 11.0f};
    absl::StrAppend(&text, i == bad ? "oops" : absl::StrCat(x[0]), ",", x[1], ",", x[2], ",", x[3],
                    ",", x[0] + x[1] > x[2] + x[3] ? 1 : 0, "\n");
  }
  return text;
}

}  // namespace

absl::StatusOr<std::string> WriteStreamedCsvWithBadRecord(const std::string& dir, int records,
                                                          int bad) {
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(dir + "/train-0.csv", Rows(records, bad)));
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(dir + "/test.csv", Rows(200, -1)));
  const std::string config = dir + "/model.pbtxt";
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(
      config,
      "input {\n  format: \"csv\"\n  train_files: \"train-*.csv\"\n  test_files: \"test.csv\"\n"
      "  shuffle_buffer: 100\n  feature { name: \"x\" column: \"x0\" length: 4 }\n}\n"
      "layer { dense { units: 8 activation: \"relu\" } }\nlayer { dense { units: 2 } }\n"
      "optimizer { name: \"sgd\" learning_rate: 0.1 }\nbatch_size: 20\nseed: 5\n"));
  return config;
}

}  // namespace pstrain::testing
