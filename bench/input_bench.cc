// Google Benchmark of the input side on one core: reading the 60,000
// Fashion-MNIST training examples (/usr/share/datasets/fashion-mnist, or
// $PSTRAIN_DATA_DIR) into memory and cutting one epoch of shuffled batches
// of 32 from them, from
//   Idx          the IDX files as Debian ships them (gzip)
//   TfRecordGzip TFRecord files of tf.train.Example, GZIP, as
//                `pstrain data to-tfrecord` writes them (its default)
//   TfRecord     the same, uncompressed
//   TfRecordRaw  uncompressed, each image one bytes value of its 784 bytes
//                (`--image_encoding=raw`, decode raw_uint8)
//   TfRecordPng  uncompressed, each image a PNG (`--image_encoding=png`,
//                configs/fashion_mnist_png.pbtxt: decode png)
//   Csv          CSV in Kaggle's Fashion-MNIST layout (label, pixel1..784
//                as integers), as `pstrain data to-csv` writes it, read
//                through configs/fashion_mnist_csv.pbtxt's spec
// and streamed from the same TFRecord files through a shuffle buffer of
// 10,000 examples instead of loaded (data/example_stream.h):
//   StreamGzip, Stream   opening the stream (its counting pass) and one epoch
//   StreamEpochGzip      each further epoch of an open stream
// and, apart, decoding Examples already in memory (Decode: parse and lay out,
// no file; DecodePng: the same with each image a PNG; DecodeJpegResized: an
// RGB JPEG photo decoded and resized to a model's input), and cutting one epoch
// of batches from the IDX training split already in memory, held as floats
// (EpochFloats, as LoadMnistFormat holds a split) or as its bytes
// (EpochBytes, as a trainer and evaluation hold it: data/dataset.h), with the
// memory each form takes. The TFRecord files are written to a temporary
// directory first, and removed at exit. Items are examples.
//   bazel build -c opt //bench:input_bench &&
//   bazel-bin/bench/input_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "data/convert.h"
#include "data/dataset.h"
#include "data/input.h"
#include "data/jpeg_image.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

constexpr int kBatch = 32;

std::string DataDir() {
  const char* dir = std::getenv("PSTRAIN_DATA_DIR");
  return dir != nullptr ? dir : "/usr/share/datasets/fashion-mnist";
}

void Die(const absl::Status& s) {
  std::fprintf(stderr, "input_bench: %s\n", std::string(s.message()).c_str());
  std::exit(1);
}

// The TFRecord copies, written once per run.
const std::string& Converted(Compression c) {
  static const std::string* base = [] {
    char tmpl[] = "/tmp/pstrain-input-bench.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) Die(absl::InternalError("cannot make a temporary directory"));
    static const std::string* made = new std::string(tmpl);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*made, ec);
    });
    const std::string& dir = *made;
    for (Compression each : {Compression::kNone, Compression::kGzip}) {
      const std::string out = dir + (each == Compression::kGzip ? "/gzip" : "/plain");
      auto written = WriteIdxAsTfRecord(DataDir(), out, 1, each);
      if (!written.ok()) Die(written.status());
    }
    for (ImageEncoding encoding : {ImageEncoding::kRaw, ImageEncoding::kPng}) {
      const std::string out = dir + (encoding == ImageEncoding::kPng ? "/png" : "/raw");
      auto written = WriteIdxAsTfRecord(DataDir(), out, 1, Compression::kNone, encoding);
      if (!written.ok()) Die(written.status());
    }
    auto csv = WriteIdxAsCsv(DataDir(), dir + "/csv");
    if (!csv.ok()) Die(csv.status());
    return new std::string(dir);
  }();
  static const std::string* plain = new std::string(*base + "/plain");
  static const std::string* gzip = new std::string(*base + "/gzip");
  return c == Compression::kGzip ? *gzip : *plain;
}

InputSpec TfRecordInput() {
  InputSpec in;
  in.format = InputFormat::kTfRecord;
  in.train_files = "train-*";
  in.test_files = "test-*";
  FeatureDef image;
  image.name = "image";
  image.length = 784;
  in.features.features = {image};
  return in;
}

// One epoch of batches from a source.
void Epoch(BatchSource* source, benchmark::State& state) {
  std::vector<float> x(static_cast<size_t>(kBatch) * source->example_dim());
  std::vector<int32_t> y(kBatch);
  for (int64_t b = 0; b < source->batches_per_epoch(); ++b) {
    auto epoch = source->Next(x.data(), y.data());
    if (!epoch.ok()) Die(epoch.status());
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.items_processed() + source->batches_per_epoch() * kBatch);
}

// One epoch of batches from a loaded split.
void Batch(const Dataset& ds, benchmark::State& state) {
  ShardIterator it(&ds, 0, 1, kBatch, 1);
  Epoch(&it, state);
}

void BM_Idx(benchmark::State& state) {
  for (auto _ : state) {
    auto ds = LoadMnistFormat(DataDir(), Split::kTrain);
    if (!ds.ok()) Die(ds.status());
    Batch(*ds, state);
  }
}

// One epoch of batches from the training split loaded once, as floats or
// as bytes; the counter is the split's features in memory, in MB.
void EpochFrom(bool as_bytes, benchmark::State& state) {
  static const ReplicaData* loaded[2] = {nullptr, nullptr};
  if (loaded[as_bytes] == nullptr) {
    auto data = LoadReplicaData(DataDir(), Split::kTrain, 0, 1, as_bytes);
    if (!data.ok()) Die(data.status());
    loaded[as_bytes] = new ReplicaData(*std::move(data));
  }
  const Dataset& ds = loaded[as_bytes]->dataset;
  ShardIterator it(&ds, 0, 1, kBatch, 1);
  for (auto _ : state) Epoch(&it, state);
  state.counters["held_MB"] = (ds.features.size() * sizeof(float) + ds.pixels.size()) / 1e6;
}
void BM_EpochFloats(benchmark::State& state) { EpochFrom(false, state); }
void BM_EpochBytes(benchmark::State& state) { EpochFrom(true, state); }

void TfRecord(benchmark::State& state, Compression c) {
  const std::string& dir = Converted(c);
  for (auto _ : state) {
    auto ds = LoadInputSplit(dir, TfRecordInput(), Split::kTrain, 10);
    if (!ds.ok()) Die(ds.status());
    Batch(*ds, state);
  }
}
void BM_TfRecordGzip(benchmark::State& state) { TfRecord(state, Compression::kGzip); }
void BM_TfRecord(benchmark::State& state) { TfRecord(state, Compression::kNone); }

// Images stored as bytes (plain files): raw (decode raw_uint8) and PNG.
void TfRecordImageBytes(benchmark::State& state, ImageEncoding encoding) {
  const bool png = encoding == ImageEncoding::kPng;
  const std::string dir =
      std::filesystem::path(Converted(Compression::kNone)).parent_path().string() +
      (png ? "/png" : "/raw");
  InputSpec in = TfRecordInput();
  FeatureDef& image = in.features.features[0];
  image.name = png ? "image" : "image_raw";
  image.decode = png ? FeatureDecode::kPng : FeatureDecode::kRawUint8;
  image.scale = 1.0f / 255.0f;
  for (auto _ : state) {
    auto ds = LoadInputSplit(dir, in, Split::kTrain, 10);
    if (!ds.ok()) Die(ds.status());
    Batch(*ds, state);
  }
}
void BM_TfRecordRaw(benchmark::State& state) { TfRecordImageBytes(state, ImageEncoding::kRaw); }
void BM_TfRecordPng(benchmark::State& state) { TfRecordImageBytes(state, ImageEncoding::kPng); }

void BM_Csv(benchmark::State& state) {
  Converted(Compression::kNone);
  const std::string dir =
      std::filesystem::path(Converted(Compression::kNone)).parent_path().string() + "/csv";
  InputSpec in;
  if (absl::Status s = SetInputFormat("csv", &in); !s.ok()) Die(s);
  in.train_files = "fashion-mnist_train.csv";
  FeatureDef image;
  image.name = "image";
  image.column = "pixel1";
  image.length = 784;
  image.scale = 1.0f / 255.0f;
  in.features.features = {image};
  for (auto _ : state) {
    auto ds = LoadInputSplit(dir, in, Split::kTrain, 10);
    if (!ds.ok()) Die(ds.status());
    Batch(*ds, state);
  }
}

std::unique_ptr<BatchSource> OpenStream(Compression c) {
  InputSpec in = TfRecordInput();
  in.shuffle_buffer = 10000;
  auto opened = OpenTrainingInput(Converted(c), in, 0, 1, kBatch, 1, 10);
  if (!opened.ok()) Die(opened.status());
  return std::move(opened->source);
}

void Stream(benchmark::State& state, Compression c) {
  Converted(c);  // written before the clock runs
  for (auto _ : state) {
    std::unique_ptr<BatchSource> source = OpenStream(c);
    Epoch(source.get(), state);
  }
}
void BM_StreamGzip(benchmark::State& state) { Stream(state, Compression::kGzip); }
void BM_Stream(benchmark::State& state) { Stream(state, Compression::kNone); }

void BM_StreamEpochGzip(benchmark::State& state) {
  std::unique_ptr<BatchSource> source = OpenStream(Compression::kGzip);
  for (auto _ : state) Epoch(source.get(), state);
}

// Decoding the Examples of one file already in memory, one per iteration.
void Decode(benchmark::State& state, const std::string& path, const InputSpec& input) {
  auto records = ReadAllRecords(path, Compression::kNone);
  if (!records.ok()) Die(records.status());
  auto decoder = ExampleDecoder::Create(input.features);
  if (!decoder.ok()) Die(decoder.status());
  std::vector<float> x(784);
  int32_t label;
  ParsedExample parsed;
  size_t i = 0;
  for (auto _ : state) {
    absl::Status s = (*decoder)->Decode((*records)[i], &parsed, x.data(), nullptr, &label, 10);
    if (!s.ok()) Die(s);
    benchmark::DoNotOptimize(x.data());
    if (++i == records->size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_Decode(benchmark::State& state) {
  Decode(state, Converted(Compression::kNone) + "/train-00000-of-00001.tfrecord", TfRecordInput());
}
void BM_DecodePng(benchmark::State& state) {
  InputSpec in = TfRecordInput();
  in.features.features[0].decode = FeatureDecode::kPng;
  in.features.features[0].scale = 1.0f / 255.0f;
  Decode(state,
         std::filesystem::path(Converted(Compression::kNone)).parent_path().string() +
             "/png/train-00000-of-00001.tfrecord",
         in);
}

// The seed's per-image work in the input pipeline: one Example holding an
// RGB JPEG photo (quality 90) decoded, resized to the model's input as
// tf.image.resize does (bilinear) and scaled by 1/255, one per iteration,
// over 64 different photos: args {photo height, width, model side}. The
// stand-in's photos (32 +- 8 a side, to 32x32) and cats_vs_dogs' typical
// 500x375 (to 224x224).
void BM_DecodeJpegResized(benchmark::State& state) {
  const int64_t h = state.range(0), w = state.range(1), side = state.range(2);
  std::vector<std::string> records;
  uint32_t seed = 17;
  for (int k = 0; k < 64; ++k) {
    // Smooth shapes with some grain, as photos have.
    std::vector<uint8_t> rgb(static_cast<size_t>(h * w * 3));
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        seed = seed * 1664525u + 1013904223u;
        for (int64_t c = 0; c < 3; ++c) {
          const double v = 128 + 60 * std::sin(0.05 * (x + 3 * k) * (c + 1)) +
                           50 * std::cos(0.07 * y * (3 - c)) + ((seed >> (8 * c)) & 15);
          rgb[(y * w + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
        }
      }
    }
    JpegOptions options;
    options.quality = 90;
    auto jpeg = EncodeJpeg(rgb.data(), h, w, 3, options);
    if (!jpeg.ok()) Die(jpeg.status());
    v1::Example e;
    auto& f = *e.mutable_features()->mutable_feature();
    f["image"].mutable_bytes_list()->add_value(*jpeg);
    f["label"].mutable_int64_list()->add_value(k % 10);
    records.push_back(e.SerializeAsString());
  }
  FeatureSpec spec;
  FeatureDef image;
  image.name = "image";
  image.decode = FeatureDecode::kJpeg;
  image.image_shape = {side, side, 3};
  image.length = side * side * 3;
  image.scale = 1.0f / 255.0f;
  spec.features.push_back(image);
  auto decoder = ExampleDecoder::Create(spec);
  if (!decoder.ok()) Die(decoder.status());
  std::vector<float> x(static_cast<size_t>(image.length));
  int32_t label;
  ParsedExample parsed;
  size_t i = 0;
  for (auto _ : state) {
    absl::Status s = (*decoder)->Decode(records[i], &parsed, x.data(), nullptr, &label, 10);
    if (!s.ok()) Die(s);
    benchmark::DoNotOptimize(x.data());
    if (++i == records.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["threads"] = 1;
}

BENCHMARK(BM_Idx)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_TfRecordGzip)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_TfRecord)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_TfRecordRaw)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_TfRecordPng)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_Csv)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_StreamGzip)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_Stream)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_StreamEpochGzip)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_Decode);
BENCHMARK(BM_DecodePng);
BENCHMARK(BM_DecodeJpegResized)
    ->Args({40, 28, 32})
    ->Args({375, 500, 224})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EpochFloats)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_EpochBytes)->Unit(benchmark::kMillisecond)->MinTime(2);

}  // namespace
}  // namespace pstrain::data
