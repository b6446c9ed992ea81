// One table of input problems across the three formats: for IDX, CSV and
// TFRecord alike, a missing directory, no matching files, an unreadable
// file and a bad record each give the one message form and exit code that
// data/input_error.h lists.
#include "data/input_error.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/idx_reader.h"
#include "data/input.h"
#include "data/tfrecord.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

using ::testing::StartsWith;

enum class Format { kIdx, kCsv, kTfRecord };

std::string Name(Format f) {
  return f == Format::kIdx ? "idx" : f == Format::kCsv ? "csv" : "tfrecord";
}

// The input block of a config for `f` (IDX: the default, no block).
InputSpec SpecOf(Format f) {
  if (f == Format::kIdx) return InputSpec{};
  const std::string block =
      f == Format::kCsv
          ? R"(input { format: csv train_files: "train-*.csv" test_files: "test-*.csv"
                       feature { name: "x" type: "float" column: "x1" length: 2 } label: "label" })"
          : R"(input { format: tfrecord train_files: "train-*.tfrecord" test_files: "test-*.tfrecord"
                       feature { name: "x" type: "float" length: 2 } label: "label" })";
  auto file = model::ParseModelConfigFile(
      absl::StrCat(block, "\nlayer { dense { units: 2 } }\ninput_dim: 2\n"), "test.pbtxt");
  EXPECT_OK(file.status());
  return file->job.input;
}

// The one training file of each format in `dir`: two examples of two
// values. Returns its path (IDX: the images file).
std::string WriteTrainFile(Format f, const std::string& dir) {
  switch (f) {
    case Format::kIdx: {
      EXPECT_OK(WriteIdxFile(dir + "/train-labels-idx1-ubyte", IdxArray{{2}, {0, 1}}));
      const std::string images = dir + "/train-images-idx3-ubyte";
      EXPECT_OK(WriteIdxFile(images, IdxArray{{2, 1, 2}, {1, 2, 3, 4}}));
      return images;
    }
    case Format::kCsv: {
      const std::string path = dir + "/train-0.csv";
      EXPECT_OK(WriteFileAtomically(path, "label,x1,x2\n0,1,2\n1,3,4\n"));
      return path;
    }
    case Format::kTfRecord: {
      const std::string path = dir + "/train-0.tfrecord";
      auto writer = TfRecordWriter::Open(path, Compression::kNone);
      EXPECT_OK(writer.status());
      for (int label : {0, 1}) {
        v1::Example e;
        auto& features = *e.mutable_features()->mutable_feature();
        features["x"].mutable_float_list()->add_value(1.0f + label);
        features["x"].mutable_float_list()->add_value(2.0f + label);
        features["label"].mutable_int64_list()->add_value(label);
        EXPECT_OK((*writer)->Write(e.SerializeAsString()));
      }
      EXPECT_OK((*writer)->Close());
      return path;
    }
  }
  return "";
}

struct Outcome {
  absl::Status status;
  int task_exit;  // what a task exits with (a replica loading its input)
};

Outcome Load(Format f, const std::string& dir) {
  absl::Status s = LoadInputSplit(dir, SpecOf(f), Split::kTrain, 2).status();
  return {s, RoleExitCode(s, FailureKind::kPermanent)};
}

class InputErrorTest : public ::testing::TestWithParam<Format> {
 protected:
  std::string Dir(const std::string& what) {
    return testing::FreshTempDir(absl::StrCat(Name(GetParam()), "_", what));
  }
  // The pattern the format looks for in `dir`, as messages show it.
  std::string Pattern(const std::string& dir) {
    switch (GetParam()) {
      case Format::kIdx:
        return dir + "/train-images-idx3-ubyte[.gz]";
      case Format::kCsv:
        return dir + "/train-*.csv";
      case Format::kTfRecord:
        return dir + "/train-*.tfrecord";
    }
    return "";
  }
};

TEST_P(InputErrorTest, TheFileReadsAsTwoExamples) {
  const std::string dir = Dir("good");
  WriteTrainFile(GetParam(), dir);
  ASSERT_OK_AND_ASSIGN(Dataset ds, LoadInputSplit(dir, SpecOf(GetParam()), Split::kTrain, 2));
  EXPECT_EQ(ds.num_examples, 2);
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{0, 1}));
}

TEST_P(InputErrorTest, AMissingDirectoryIsNamedAndExits2) {
  const std::string dir = Dir("missing") + "/nope";
  const Outcome o = Load(GetParam(), dir);
  EXPECT_EQ(o.status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(o.status.message(),
            absl::StrCat("no such directory ", dir, " (where the input's files ", Pattern(dir),
                         " are looked for)"));
  EXPECT_EQ(o.task_exit, 2);
}

TEST_P(InputErrorTest, NoMatchingFileIsNamedAndExits2) {
  const std::string dir = Dir("empty");
  ASSERT_OK(WriteFileAtomically(dir + "/README", "not data\n"));
  const Outcome o = Load(GetParam(), dir);
  EXPECT_EQ(o.status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(o.status.message(), absl::StrCat("no file matches ", Pattern(dir)));
  EXPECT_EQ(o.task_exit, 2);
}

TEST_P(InputErrorTest, AnUnreadableFileIsNamedAndExits2) {
  // A directory where the file should be: unreadable by anyone.
  const std::string dir = Dir("directory");
  const std::string path = WriteTrainFile(GetParam(), dir);
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  Outcome o = Load(GetParam(), dir);
  EXPECT_EQ(o.status.message(), absl::StrCat("cannot read ", path, ": Is a directory"));
  EXPECT_EQ(o.task_exit, 2);
  // A file this process may not read, where it runs as a user that
  // permissions bind (not root, which reads anything).
  if (::geteuid() == 0) return;
  const std::string locked_dir = Dir("locked");
  const std::string locked = WriteTrainFile(GetParam(), locked_dir);
  ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
  o = Load(GetParam(), locked_dir);
  EXPECT_EQ(o.status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(o.status.message(),
            absl::StrCat("cannot read ", locked, ": Permission denied (this process runs as uid ",
                         ::geteuid(), ", gid ", ::getegid(), ": give that user read access to ",
                         locked, ")"));
  EXPECT_EQ(o.task_exit, 2);
}

TEST_P(InputErrorTest, ABadRecordIsNamedWhereItIsAndExits1) {
  const std::string dir = Dir("bad");
  const std::string path = WriteTrainFile(GetParam(), dir);
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(path));
  std::string where;
  switch (GetParam()) {
    case Format::kIdx:
      bytes[2] = 0x09;  // the data type
      where = " at byte 2: ";
      break;
    case Format::kCsv:
      bytes += "1,2\n";  // a row of 2 fields under 3 columns
      where = " line 4: ";
      break;
    case Format::kTfRecord:
      bytes[20] ^= 0x40;  // in the first record's data
      where = " at byte 0: ";
      break;
  }
  ASSERT_OK(WriteFileAtomically(path, bytes));
  const Outcome o = Load(GetParam(), dir);
  EXPECT_EQ(o.status.code(), absl::StatusCode::kDataLoss) << o.status;
  EXPECT_THAT(std::string(o.status.message()), StartsWith(path + where));
  EXPECT_EQ(o.task_exit, 1);
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, InputErrorTest,
                         ::testing::Values(Format::kIdx, Format::kCsv, Format::kTfRecord),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return Name(info.param);
                         });

}  // namespace
}  // namespace pstrain::data
