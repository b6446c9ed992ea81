#include "data/input.h"

#include <glob.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "data/example_stream.h"
#include "data/input_error.h"
#include "data/tfds.h"

namespace pstrain::data {
namespace {

// The uncompressed bytes of a file: its size, or for GZIP the size its
// trailer states (modulo 2^32, which is only an estimate's concern); 0 when
// unknown.
int64_t UncompressedBytes(const std::string& path, Compression compression) {
  FILE* f = std::fopen(path.c_str(), "rbe");
  if (f == nullptr) return 0;
  int64_t size = 0;
  if (std::fseek(f, 0, SEEK_END) == 0) size = std::ftell(f);
  if (compression == Compression::kGzip) {
    unsigned char tail[4];
    size = size >= 18 && std::fseek(f, -4, SEEK_END) == 0 && std::fread(tail, 1, 4, f) == 4
               ? static_cast<int64_t>(tail[0] | tail[1] << 8 | tail[2] << 16 |
                                      static_cast<uint32_t>(tail[3]) << 24)
               : 0;
  }
  std::fclose(f);
  return std::max<int64_t>(size, 0);
}

// `path` as the job names it: a relative one is under `data_dir`.
std::string UnderDataDir(const std::string& path, const std::string& data_dir) {
  return !path.empty() && path[0] != '/' && !data_dir.empty() ? data_dir + "/" + path : path;
}

// The records a file frames (AppendRecordFile's `framed`), reading no more
// than it must.
absl::StatusOr<int64_t> CountFramed(const RecordRange& file, Compression compression,
                                    const RecordFormat& format, bool skip_bad) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RecordReader> reader,
                           format.OpenFile(file.path, compression));
  reader = LimitToRange(std::move(reader), file);
  int64_t n = 0;
  while (true) {
    absl::StatusOr<bool> more = reader->Skip();
    if (!more.ok() && skip_bad) return n;  // Skip's errors end the framing
    if (!more.ok()) return more.status();
    if (!*more) return n;
    ++n;
  }
}

std::vector<std::string> PathsOf(const std::vector<RecordRange>& files) {
  std::vector<std::string> paths;
  for (const RecordRange& f : files) paths.push_back(f.path);
  return paths;
}

absl::StatusOr<ReplicaData> LoadRecordInput(const std::string& data_dir, const InputSpec& input,
                                            Split split, int replica, int num_replicas,
                                            int64_t num_classes, bool pixels_as_bytes) {
  const float byte_scale = pixels_as_bytes ? ByteImageScale(input) : 0;
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<RecordRange> files, FilesOfSplit(data_dir, input, split));
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const RecordFormat> format,
                           OpenFormat(data_dir, input, PathsOf(files)));
  std::unique_ptr<RecordDecoder> decoder = format->NewDecoder(num_classes);
  ReplicaData out;
  out.files_total = static_cast<int>(files.size());
  out.by_file = ShardsByFile(out.files_total, num_replicas);
  ReadCounts counts;
  for (int i = 0; i < out.files_total; ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(Compression compression, CompressionOf(input, files[i].path));
    int64_t framed = 0;
    if (!out.by_file || i % num_replicas == replica) {
      PSTRAIN_RETURN_IF_ERROR(AppendRecordFile(files[i], compression, *format, decoder.get(),
                                               input.skip_bad_records, &out.dataset, &counts,
                                               &framed, byte_scale));
      ++out.files_read;
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(framed,
                               CountFramed(files[i], compression, *format, input.skip_bad_records));
    }
    out.split_examples += framed;
  }
  out.skipped_records = counts.skipped;
  // By record, every replica reads every file: the split is what decoded.
  if (!out.by_file) out.split_examples = out.dataset.num_examples;
  return out;
}

// Appends `row` to `pixels` as bytes when each value is float(b) * scale
// for a byte b (as the decoder computes it); false, `pixels` as it was,
// otherwise.
bool AppendAsBytes(const std::vector<float>& row, float scale, std::vector<uint8_t>* pixels) {
  const size_t at = pixels->size();
  pixels->resize(at + row.size());
  const double inverse = 1.0 / static_cast<double>(scale);
  for (size_t k = 0; k < row.size(); ++k) {
    const double b = std::nearbyint(static_cast<double>(row[k]) * inverse);
    if (!(b >= 0 && b <= 255) || static_cast<float>(b) * scale != row[k]) {
      pixels->resize(at);
      return false;
    }
    (*pixels)[at + k] = static_cast<uint8_t>(b);
  }
  return true;
}

}  // namespace

float ByteImageScale(const InputSpec& input) {
  if (input.format != InputFormat::kTfRecord && input.format != InputFormat::kTfds) return 0;
  const FeatureDef* dense = nullptr;
  for (const FeatureDef& f : input.features.features) {
    if (!f.is_dense()) continue;
    if (dense != nullptr) return 0;
    dense = &f;
  }
  // Images resized or offset are floats (kept so after their first).
  if (dense == nullptr || (dense->decode != FeatureDecode::kRawUint8 && !dense->is_image()) ||
      dense->offset != 0) {
    return 0;
  }
  return dense->scale;
}

absl::StatusOr<Compression> CompressionOf(const InputSpec& input, const std::string& path) {
  return input.compression.value_or(CompressionForPath(path));
}

absl::StatusOr<std::vector<RecordRange>> FilesOfSplit(const std::string& data_dir,
                                                      const InputSpec& input, Split split) {
  std::vector<RecordRange> out;
  if (input.format == InputFormat::kTfds) {
    const std::string& spec = split == Split::kTrain ? input.train_split : input.test_split;
    PSTRAIN_ASSIGN_OR_RETURN(TfdsDataset dataset, ReadTfdsDirectory(data_dir));
    std::vector<std::string> wanted;
    for (const FeatureDef& f : input.features.features) wanted.push_back(f.name);
    wanted.push_back(input.features.label);
    for (const std::string& name : wanted) {
      if (dataset.FindFeature(name) != nullptr) continue;
      std::vector<std::string> names;
      for (const TfdsFeature& f : dataset.features) names.push_back(f.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "the input reads feature \"", name, "\", which ", dataset.name,
          " does not have (its features: ", absl::StrJoin(names, ", "), ")"));
    }
    return ResolveSplit(dataset, spec);
  }
  const std::string& pattern = split == Split::kTrain ? input.train_files : input.test_files;
  if (pattern.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input is ", InputFormatName(input), " but names no ",
                     split == Split::kTrain ? "train" : "test", "_files"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(pattern, data_dir));
  for (std::string& f : files) out.push_back(RecordRange{std::move(f)});
  return out;
}

absl::Status SetInputFormat(absl::string_view name, InputSpec* input) {
  if (name.empty() || name == "idx") {
    input->format = InputFormat::kIdx;
  } else if (name == "tfrecord") {
    input->format = InputFormat::kTfRecord;
  } else if (name == "tfds") {
    input->format = InputFormat::kTfds;
  } else if (name == "csv" || name == "tsv") {
    input->format = InputFormat::kCsv;
    input->csv.dialect.delimiter = name == "csv" ? ',' : '\t';
    input->csv.dialect.quoting = name == "csv";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("format \"", name, "\" is not one of idx, tfrecord, csv, tsv, tfds"));
  }
  return absl::OkStatus();
}

const char* InputFormatName(const InputSpec& input) {
  switch (input.format) {
    case InputFormat::kIdx:
      return "IDX";
    case InputFormat::kTfRecord:
      return "TFRecord";
    case InputFormat::kCsv:
      return input.csv.dialect.quoting ? "CSV" : "TSV";
    case InputFormat::kTfds:
      return "TFDS";
  }
  return "?";
}

absl::StatusOr<std::shared_ptr<const RecordFormat>> OpenFormat(
    const std::string& data_dir, const InputSpec& input, const std::vector<std::string>& files) {
  // Vocabulary files named relative to the data directory, as the files.
  FeatureSpec spec = input.features;
  for (FeatureDef& f : spec.features) f.vocabulary_file = UnderDataDir(f.vocabulary_file, data_dir);
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ExampleDecoder> decoder,
                           ExampleDecoder::Create(spec));
  if (input.format != InputFormat::kCsv) return TfRecordExamples(std::move(decoder));
  PSTRAIN_ASSIGN_OR_RETURN(Compression compression, CompressionOf(input, files.front()));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::shared_ptr<const CsvFormat> csv,
      CsvFormat::Create(input.csv, std::move(decoder), files.front(), compression));
  return std::shared_ptr<const RecordFormat>(std::move(csv));
}

absl::StatusOr<std::vector<std::string>> ExpandFiles(const std::string& pattern,
                                                     const std::string& data_dir) {
  const std::string full = UnderDataDir(pattern, data_dir);
  glob_t g{};
  const int rc = glob(full.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && files.empty())) return NoFileMatches(full);
  if (rc != 0) {
    // Most often the directory is not there (a --data_dir mistyped, a
    // volume not mounted): said as such, NotFound as for a missing IDX
    // file (exit 2 for a task), not as an error of the file system.
    const std::string parent = std::filesystem::path(full).parent_path().string();
    std::error_code ec;
    const bool plain = !parent.empty() && parent.find_first_of("*?[") == std::string::npos;
    if (plain && !std::filesystem::is_directory(parent, ec)) {
      return NoSuchDataDirectory(parent, full);
    }
    return CannotReadInput(plain ? parent : full, EACCES);
  }
  // glob sorts by the locale's collation; sort bytewise so every task
  // agrees whatever its locale.
  std::sort(files.begin(), files.end());
  return files;
}

absl::Status AppendRecordFile(const RecordRange& file, Compression compression,
                              const RecordFormat& format, RecordDecoder* decoder, bool skip_bad,
                              Dataset* ds, ReadCounts* counts, int64_t* framed, float byte_scale) {
  const std::string& path = file.path;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RecordReader> reader,
                           format.OpenFile(path, compression));
  reader = LimitToRange(std::move(reader), file);
  const int64_t dense = format.dense_width(), ids = format.ids_width();
  ds->example_dim = dense;
  ds->ids_dim = ids;
  // Bytes until a value is not one (a file before this one may have ended
  // that); each record decodes into `row` first.
  bool as_bytes = byte_scale != 0 && dense > 0 && ds->features.empty();
  if (as_bytes) ds->pixel_scale = byte_scale;
  std::vector<float> row(as_bytes ? dense : 0);
  std::string record;
  int64_t framed_here = 0;
  while (true) {
    const int64_t at = reader->offset();
    absl::StatusOr<bool> more = reader->Next(&record);
    if (!more.ok()) {
      if (!skip_bad) return more.status();
      // A bad data checksum leaves the record framed: counted, as
      // CountFramed (which does not read data) counts it.
      if (reader->can_continue()) ++framed_here;
      ++counts->skipped;
      LogSkippedRecord(more.status().message());
      if (!reader->can_continue()) {
        LogSkippedRecord(absl::StrCat("the rest of ", path, " cannot be framed; skipping it"));
        break;
      }
      continue;
    }
    if (!*more) break;
    ++framed_here;
    if (framed_here == 1) {
      // Room for the file's examples at once, estimated from its size and
      // the first record's: growing by doubling would copy the set. Half
      // as much again, as records vary (a CSV row's length follows its
      // digits): reserved pages that are never written take no memory.
      const int64_t estimate =
          UncompressedBytes(path, compression) / static_cast<int64_t>(record.size() + 16) * 3 / 2 +
          1;
      if (as_bytes) {
        ds->pixels.reserve(ds->pixels.size() + estimate * dense);
      } else {
        ds->features.reserve(ds->features.size() + estimate * dense);
      }
      ds->ids.reserve(ds->ids.size() + estimate * ids);
      ds->labels.reserve(ds->labels.size() + estimate);
    }
    const size_t f = ds->features.size(), d = ds->ids.size();
    if (!as_bytes) ds->features.resize(f + dense);
    ds->ids.resize(d + ids);
    int32_t label = 0;
    absl::Status s = decoder->Decode(record, as_bytes ? row.data() : ds->features.data() + f,
                                     ds->ids.data() + d, &label);
    if (s.ok() && as_bytes && !AppendAsBytes(row, byte_scale, &ds->pixels)) {
      HoldAsFloats(ds);
      ds->features.insert(ds->features.end(), row.begin(), row.end());
      as_bytes = false;
    }
    if (!s.ok()) {
      ds->features.resize(f);
      ds->ids.resize(d);
      absl::Status bad = absl::DataLossError(absl::StrCat(reader->Where(at), ": ", s.message()));
      if (!skip_bad) return bad;
      ++counts->skipped;
      LogSkippedRecord(bad.message());
      continue;
    }
    ds->labels.push_back(label);
    ++ds->num_examples;
    ++counts->records;
  }
  if (framed != nullptr) *framed = framed_here;
  return absl::OkStatus();
}

absl::StatusOr<ReplicaData> LoadInput(const std::string& data_dir, const InputSpec& input,
                                      Split split, int replica, int num_replicas,
                                      int64_t num_classes, bool pixels_as_bytes) {
  switch (input.format) {
    case InputFormat::kIdx:
      return LoadReplicaData(data_dir, split, replica, num_replicas, pixels_as_bytes);
    case InputFormat::kTfRecord:
    case InputFormat::kCsv:
    case InputFormat::kTfds:
      return LoadRecordInput(data_dir, input, split, replica, num_replicas, num_classes,
                             pixels_as_bytes);
  }
  return absl::InternalError("unknown input format");
}

namespace {

// A replica's share held in memory, with the iterator over it.
class InMemoryShard : public BatchSource {
 public:
  InMemoryShard(Dataset data, bool by_file, int replica, int num_replicas, int batch_size,
                uint64_t seed)
      : data_(std::move(data)),
        it_(&data_, by_file ? 0 : replica, by_file ? 1 : num_replicas, batch_size, seed) {}
  int64_t example_dim() const override { return it_.example_dim(); }
  int64_t ids_dim() const override { return it_.ids_dim(); }
  int batch_size() const override { return it_.batch_size(); }
  int64_t shard_size() const override { return it_.shard_size(); }
  absl::StatusOr<int64_t> Next(float* features, int32_t* labels, int64_t* ids) override {
    return it_.Next(features, labels, ids);
  }
  absl::Status Seek(int64_t batch) override { return it_.Seek(batch); }

 private:
  const Dataset data_;
  ShardIterator it_;
};

}  // namespace

absl::StatusOr<TrainingInput> OpenTrainingInput(const std::string& data_dir, const InputSpec& input,
                                                int replica, int num_replicas, int batch_size,
                                                uint64_t seed, int64_t num_classes) {
  TrainingInput out;
  if (input.format == InputFormat::kIdx || input.shuffle_buffer <= 0) {
    // Only cut into batches: images stay bytes (a quarter of the floats).
    PSTRAIN_ASSIGN_OR_RETURN(ReplicaData data, LoadInput(data_dir, input, Split::kTrain, replica,
                                                         num_replicas, num_classes,
                                                         /*pixels_as_bytes=*/true));
    out.by_file = data.by_file;
    out.files_read = data.files_read;
    out.files_total = data.files_total;
    out.split_examples = data.split_examples;
    out.skipped_records = data.skipped_records;
    out.source = std::make_unique<InMemoryShard>(std::move(data.dataset), data.by_file, replica,
                                                 num_replicas, batch_size, seed);
    return out;
  }
  StreamSpec spec;
  PSTRAIN_ASSIGN_OR_RETURN(spec.files, FilesOfSplit(data_dir, input, Split::kTrain));
  for (const RecordRange& f : spec.files) {
    PSTRAIN_ASSIGN_OR_RETURN(Compression c, CompressionOf(input, f.path));
    spec.compressions.push_back(c);
  }
  spec.replica = replica;
  spec.num_replicas = num_replicas;
  out.files_total = static_cast<int>(spec.files.size());
  spec.by_file = ShardsByFile(out.files_total, num_replicas);
  spec.batch_size = batch_size;
  spec.seed = seed;
  spec.shuffle_buffer = input.shuffle_buffer;
  spec.skip_bad = input.skip_bad_records;
  spec.num_classes = num_classes;
  // Images wait in the buffer encoded and are decoded as they leave it.
  for (const FeatureDef& f : input.features.features) spec.hold_encoded |= f.is_image();
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const RecordFormat> format,
                           OpenFormat(data_dir, input, PathsOf(spec.files)));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ExampleStream> stream,
                           ExampleStream::Open(spec, std::move(format)));
  out.streamed = true;
  out.by_file = spec.by_file;
  out.files_read = stream->files_read();
  out.split_examples = stream->split_examples();
  out.skipped_records = stream->skipped_records();
  out.source = std::move(stream);
  return out;
}

absl::StatusOr<Dataset> LoadInputSplit(const std::string& data_dir, const InputSpec& input,
                                       Split split, int64_t num_classes, bool pixels_as_bytes) {
  PSTRAIN_ASSIGN_OR_RETURN(ReplicaData data,
                           LoadInput(data_dir, input, split, 0, 1, num_classes, pixels_as_bytes));
  return std::move(data.dataset);
}

}  // namespace pstrain::data
