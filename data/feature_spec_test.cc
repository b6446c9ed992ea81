#include "data/feature_spec.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/jpeg_image.h"
#include "data/png_image.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

FeatureDef Def(const std::string& name, FeatureType type, int64_t length, int64_t max_len = 0) {
  FeatureDef f;
  f.name = name;
  f.type = type;
  f.length = length;
  f.max_len = max_len;
  return f;
}

v1::Feature& Add(v1::Example* e, const std::string& name) {
  return (*e->mutable_features()->mutable_feature())[name];
}

struct Decoded {
  std::vector<float> dense;
  std::vector<int64_t> ids;
  int32_t label = -1;
};

absl::StatusOr<Decoded> DecodeWith(const ExampleDecoder& d, const v1::Example& e,
                                   int64_t num_classes = 10) {
  Decoded out;
  out.dense.assign(d.dense_width(), -7.0f);
  out.ids.assign(d.ids_width(), -7);
  ParsedExample parsed;
  const std::string bytes = e.SerializeAsString();
  absl::Status s =
      d.Decode(bytes, &parsed, out.dense.data(), out.ids.data(), &out.label, num_classes);
  if (!s.ok()) return s;
  return out;
}

TEST(FeatureSpecTest, LaysOutDenseFloatsIdsAndTheLabel) {
  const std::string vocab = testing::TempDir() + "/vocab.txt";
  ASSERT_OK(WriteFileAtomically(vocab, "the\nfox\r\njumps\n"));
  FeatureSpec spec;
  spec.features.push_back(Def("pixels", FeatureType::kFloat, 3));
  spec.features.push_back(Def("words", FeatureType::kString, 1, 4));
  spec.features.back().vocabulary_file = vocab;
  spec.features.push_back(Def("scores", FeatureType::kFloat, 1, 2));
  spec.features.push_back(Def("user", FeatureType::kInt64, 1));
  spec.features.back().vocabulary = 100;
  spec.features.push_back(Def("city", FeatureType::kString, 2));
  spec.features.back().hash_buckets = 1000;
  spec.label = "y";
  ASSERT_OK_AND_ASSIGN(auto d, ExampleDecoder::Create(spec));
  EXPECT_EQ(d->dense_width(), 3 + 2);
  EXPECT_EQ(d->ids_width(), 4 + 1 + 2);
  EXPECT_EQ(d->OffsetOf(2), 3);  // scores after pixels
  EXPECT_EQ(d->OffsetOf(3), 4);  // user after words
  EXPECT_EQ(d->IdRange(1), 3 + 2);
  EXPECT_EQ(d->IdRange(3), 100);
  EXPECT_EQ(d->IdRange(4), 1001);

  v1::Example e;
  for (float v : {0.25f, 0.5f, 1.0f}) Add(&e, "pixels").mutable_float_list()->add_value(v);
  for (const char* w : {"fox", "the", "cat"}) Add(&e, "words").mutable_bytes_list()->add_value(w);
  for (float v : {1, 2, 3}) Add(&e, "scores").mutable_float_list()->add_value(v);  // cut to 2
  Add(&e, "user").mutable_int64_list()->add_value(42);
  Add(&e, "city").mutable_bytes_list()->add_value("Paris");
  Add(&e, "city").mutable_bytes_list()->add_value("Lyon");
  Add(&e, "unused").mutable_float_list()->add_value(5);
  Add(&e, "y").mutable_int64_list()->add_value(3);
  ASSERT_OK_AND_ASSIGN(Decoded got, DecodeWith(*d, e));
  EXPECT_EQ(got.dense, (std::vector<float>{0.25f, 0.5f, 1.0f, 1, 2}));
  const int64_t paris = 1 + StableHash("Paris") % 1000, lyon = 1 + StableHash("Lyon") % 1000;
  // fox = line 2 -> id 3, the -> 2, cat unknown -> 1, then padding 0.
  EXPECT_EQ(got.ids, (std::vector<int64_t>{3, 2, 1, 0, 42, paris, lyon}));
  EXPECT_EQ(got.label, 3);
}

TEST(FeatureSpecTest, HashesAreStableAndIntegersHashAsTheirText) {
  // FNV-1a 64 of "" and "a": the algorithm's published values.
  EXPECT_EQ(StableHash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cull);
  FeatureSpec spec;
  spec.features.push_back(Def("n", FeatureType::kInt64, 1));
  spec.features.back().hash_buckets = 50;
  spec.features.push_back(Def("s", FeatureType::kString, 1));
  spec.features.back().hash_buckets = 50;
  ASSERT_OK_AND_ASSIGN(auto d, ExampleDecoder::Create(spec));
  v1::Example e;
  Add(&e, "n").mutable_int64_list()->add_value(-12);
  Add(&e, "s").mutable_bytes_list()->add_value("-12");
  Add(&e, "label").mutable_int64_list()->add_value(0);
  ASSERT_OK_AND_ASSIGN(Decoded got, DecodeWith(*d, e));
  EXPECT_EQ(got.ids[0], got.ids[1]);
  EXPECT_EQ(got.ids[0], static_cast<int64_t>(1 + StableHash("-12") % 50));
}

TEST(FeatureSpecTest, DefaultsPaddingAndIntegersAsFloats) {
  FeatureSpec spec;
  spec.features.push_back(Def("age", FeatureType::kFloat, 1));
  spec.features.back().has_default = true;
  spec.features.back().default_value = 30;
  spec.features.push_back(Def("counts", FeatureType::kFloat, 2));
  spec.features.push_back(Def("tags", FeatureType::kInt64, 1, 3));
  ASSERT_OK_AND_ASSIGN(auto d, ExampleDecoder::Create(spec));
  v1::Example e;
  Add(&e, "counts").mutable_int64_list()->add_value(4);
  Add(&e, "counts").mutable_int64_list()->add_value(-5);
  Add(&e, "label").mutable_float_list()->add_value(2.0f);  // an integral float label
  ASSERT_OK_AND_ASSIGN(Decoded got, DecodeWith(*d, e));
  EXPECT_EQ(got.dense, (std::vector<float>{30, 4, -5}));
  EXPECT_EQ(got.ids, (std::vector<int64_t>{0, 0, 0}));  // tags missing: all padding
  EXPECT_EQ(got.label, 2);
}

// Keras's pad_sequences: padding and truncating "post" (pstrain's
// default) or "pre" (Keras's), for int64 and string sequences alike.
TEST(FeatureSpecTest, SequencesArePaddedAndCutAtTheEndOrTheFront) {
  const std::string vocab = testing::TempDir() + "/pad_vocab.txt";
  ASSERT_OK(WriteFileAtomically(vocab, "a\nb\nc\nd\ne\n"));  // ids 2..6
  v1::Example long_one, short_one;
  for (int64_t id : {1, 2, 3, 4, 5}) Add(&long_one, "ids").mutable_int64_list()->add_value(id);
  for (const char* w : {"a", "b", "c", "d", "e"}) {
    Add(&long_one, "words").mutable_bytes_list()->add_value(w);
  }
  for (int64_t id : {7, 8}) Add(&short_one, "ids").mutable_int64_list()->add_value(id);
  for (const char* w : {"d", "e"}) Add(&short_one, "words").mutable_bytes_list()->add_value(w);
  for (v1::Example* e : {&long_one, &short_one}) {
    Add(e, "label").mutable_int64_list()->add_value(1);
  }
  struct Case {
    bool pad_front, truncate_front;
    std::vector<int64_t> long_ids, short_ids;
  };
  // Each case: ids [long 3 | words 3], short the same.
  for (const Case& c : {
           Case{false, false, {1, 2, 3, 2, 3, 4}, {7, 8, 0, 5, 6, 0}},
           Case{true, true, {3, 4, 5, 4, 5, 6}, {0, 7, 8, 0, 5, 6}},
           Case{true, false, {1, 2, 3, 2, 3, 4}, {0, 7, 8, 0, 5, 6}},
           Case{false, true, {3, 4, 5, 4, 5, 6}, {7, 8, 0, 5, 6, 0}},
       }) {
    FeatureSpec spec;
    spec.features.push_back(Def("ids", FeatureType::kInt64, 1, 3));
    spec.features.push_back(Def("words", FeatureType::kString, 1, 3));
    spec.features.back().vocabulary_file = vocab;
    for (FeatureDef& f : spec.features) {
      f.pad_front = c.pad_front;
      f.truncate_front = c.truncate_front;
    }
    ASSERT_OK_AND_ASSIGN(auto d, ExampleDecoder::Create(spec));
    ASSERT_OK_AND_ASSIGN(Decoded got, DecodeWith(*d, long_one));
    EXPECT_EQ(got.ids, c.long_ids) << c.pad_front << c.truncate_front;
    ASSERT_OK_AND_ASSIGN(got, DecodeWith(*d, short_one));
    EXPECT_EQ(got.ids, c.short_ids) << c.pad_front << c.truncate_front;
  }
  // Not for a fixed-length feature or floats.
  FeatureSpec fixed;
  fixed.features.push_back(Def("ids", FeatureType::kInt64, 3));
  fixed.features.back().pad_front = true;
  EXPECT_EQ(ExampleDecoder::Create(fixed).status().message(),
            "feature \"ids\": padding and truncating are for a sequence of ids (an int64 or "
            "string feature with max_len)");
}

TEST(FeatureSpecTest, NamesWhatIsWrongWithAnExample) {
  FeatureSpec spec;
  spec.features.push_back(Def("x", FeatureType::kFloat, 2));
  spec.features.push_back(Def("id", FeatureType::kInt64, 1));
  spec.features.back().vocabulary = 10;
  ASSERT_OK_AND_ASSIGN(auto d, ExampleDecoder::Create(spec));
  auto base = [] {
    v1::Example e;
    Add(&e, "x").mutable_float_list()->add_value(1);
    Add(&e, "x").mutable_float_list()->add_value(2);
    Add(&e, "id").mutable_int64_list()->add_value(3);
    Add(&e, "label").mutable_int64_list()->add_value(1);
    return e;
  };
  ASSERT_OK(DecodeWith(*d, base()).status());

  v1::Example e = base();
  e.mutable_features()->mutable_feature()->erase("x");
  EXPECT_EQ(DecodeWith(*d, e).status().message(), "feature \"x\": is missing");
  e = base();
  Add(&e, "x").mutable_float_list()->add_value(3);
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"x\": has 3 values; the spec says length 2 (give max_len for a variable "
            "length)");
  e = base();
  Add(&e, "x").mutable_bytes_list()->add_value("1");
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"x\": is a bytes_list; a float feature needs a float_list or an int64_list");
  e = base();
  Add(&e, "id").mutable_int64_list()->set_value(0, 10);
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"id\": id 10 is outside its vocabulary [0, 10)");
  e = base();
  Add(&e, "id").mutable_float_list()->add_value(3);
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"id\": is a float_list; an int64 feature needs an int64_list");
  e = base();
  e.mutable_features()->mutable_feature()->erase("label");
  EXPECT_EQ(DecodeWith(*d, e).status().message(), "label \"label\" is missing");
  e = base();
  Add(&e, "label").mutable_int64_list()->set_value(0, 10);
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "label \"label\" is 10, outside the classes [0, 10)");
  e = base();
  Add(&e, "label").mutable_int64_list()->add_value(2);
  EXPECT_EQ(DecodeWith(*d, e).status().message(), "label \"label\" has 2 values; it needs one");
  e = base();
  Add(&e, "label").mutable_float_list()->add_value(0.5f);
  EXPECT_EQ(DecodeWith(*d, e).status().message(), "label \"label\" is 0.5, not a class number");

  Decoded out;
  out.dense.resize(2);
  out.ids.resize(1);
  ParsedExample parsed;
  EXPECT_EQ(d->Decode(std::string("\x0a\x09", 2), &parsed, out.dense.data(), out.ids.data(),
                      &out.label, 10)
                .message(),
            "Example at byte 0: field 1 says 9 bytes but 0 remain");
}

// Images stored as one encoded bytes_list value, as TensorFlow's MNIST
// convert_to_records and TensorFlow Datasets write them.
TEST(FeatureSpecTest, DecodesRawAndPngBytesAsTensorFlowDoes) {
  FeatureSpec spec;
  spec.features.push_back(Def("image_raw", FeatureType::kFloat, 4));
  spec.features.back().decode = FeatureDecode::kRawUint8;
  spec.features.back().scale = 0.5f;
  spec.features.push_back(Def("embedding", FeatureType::kFloat, 2));
  spec.features.back().decode = FeatureDecode::kRawFloat32;
  spec.features.push_back(Def("image", FeatureType::kFloat, 6));
  spec.features.back().decode = FeatureDecode::kPng;
  spec.features.push_back(Def("thumb", FeatureType::kFloat, 1, 3));
  spec.features.back().decode = FeatureDecode::kRawUint8;
  ASSERT_OK_AND_ASSIGN(auto d, ExampleDecoder::Create(spec));
  EXPECT_EQ(d->dense_width(), 4 + 2 + 6 + 3);
  const uint8_t pixels[6] = {0, 1, 127, 128, 254, 255};
  ASSERT_OK_AND_ASSIGN(std::string png, EncodePng(pixels, 2, 3, 1));
  const float floats[2] = {-1.5f, 3.25e-3f};
  auto base = [&] {
    v1::Example e;
    Add(&e, "image_raw").mutable_bytes_list()->add_value(std::string("\x00\x01\xfe\xff", 4));
    Add(&e, "embedding")
        .mutable_bytes_list()
        ->add_value(std::string(reinterpret_cast<const char*>(floats), sizeof(floats)));
    Add(&e, "image").mutable_bytes_list()->add_value(png);
    Add(&e, "thumb").mutable_bytes_list()->add_value("\x09\x08");
    Add(&e, "label").mutable_int64_list()->add_value(2);
    return e;
  };
  ASSERT_OK_AND_ASSIGN(Decoded out, DecodeWith(*d, base()));
  EXPECT_EQ(out.dense, (std::vector<float>{0, 0.5f, 127, 127.5f, -1.5f, 3.25e-3f, 0, 1, 127, 128,
                                           254, 255, 9, 8, 0}));
  EXPECT_EQ(out.label, 2);

  v1::Example e = base();
  Add(&e, "image_raw").mutable_bytes_list()->set_value(0, "abc");
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"image_raw\": has 3 values; the spec says length 4 (give max_len for a "
            "variable length)");
  e = base();
  Add(&e, "image_raw").mutable_bytes_list()->add_value("abcd");
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"image_raw\": has 2 bytes_list values; decode raw_uint8 needs one (the "
            "encoded values)");
  e = base();
  Add(&e, "image_raw").clear_bytes_list();
  Add(&e, "image_raw").mutable_float_list()->add_value(1);
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"image_raw\": is a float_list; decode raw_uint8 needs a bytes_list of one "
            "value");
  e = base();
  Add(&e, "embedding").mutable_bytes_list()->set_value(0, "12345");
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"embedding\": has 5 bytes, not a whole number of raw_float32 values (4 "
            "bytes each)");
  e = base();
  // Any image of 6 values fits: 1 x 2 RGB, channels together.
  ASSERT_OK_AND_ASSIGN(std::string rgb, EncodePng(pixels, 1, 2, 3));
  Add(&e, "image").mutable_bytes_list()->set_value(0, rgb);
  ASSERT_OK_AND_ASSIGN(out, DecodeWith(*d, e));
  EXPECT_EQ(std::vector<float>(out.dense.begin() + 6, out.dense.begin() + 12),
            (std::vector<float>{0, 1, 127, 128, 254, 255}));
  e = base();
  Add(&e, "image").mutable_bytes_list()->set_value(0, "GIF89a");
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"image\": not a PNG image (6 bytes without PNG's signature)");
  e = base();
  ASSERT_OK_AND_ASSIGN(std::string wide, EncodePng(pixels, 1, 6, 1));
  ASSERT_OK_AND_ASSIGN(std::string square, EncodePng(pixels, 2, 2, 1));
  Add(&e, "image").mutable_bytes_list()->set_value(0, square);
  EXPECT_EQ(DecodeWith(*d, e).status().message(),
            "feature \"image\": is a 2x2x1 image, 4 values; the spec says length 6 (give "
            "image_shape to resize it)");
  Add(&e, "image").mutable_bytes_list()->set_value(0, wide);
  EXPECT_OK(DecodeWith(*d, e).status());

  // Decoding is for float features.
  spec.features.push_back(Def("tokens", FeatureType::kInt64, 1));
  spec.features.back().decode = FeatureDecode::kRawUint8;
  EXPECT_EQ(ExampleDecoder::Create(spec).status().message(),
            "feature \"tokens\": decode raw_uint8 gives floats: it is for a float feature");
  EXPECT_EQ(ParseFeatureDecode("gif").status().message(),
            "decode \"gif\" is not one of raw_uint8, raw_float32, png, jpeg, image");
  for (FeatureDecode decode : {FeatureDecode::kRawUint8, FeatureDecode::kRawFloat32,
                               FeatureDecode::kPng, FeatureDecode::kJpeg, FeatureDecode::kImage}) {
    ASSERT_OK_AND_ASSIGN(FeatureDecode back, ParseFeatureDecode(FeatureDecodeName(decode)));
    EXPECT_EQ(back, decode);
  }
}

// The seed's pipeline: images of any size decoded, widened to RGB, resized
// as tf.image.resize does, then scaled (here to [-1, 1], MobileNetV2's
// preprocess_input).
TEST(FeatureSpecTest, ImagesAreBroughtToTheirImageShapeThenScaled) {
  FeatureSpec spec;
  spec.features.push_back(Def("image", FeatureType::kFloat, 4 * 4 * 3));
  FeatureDef& image = spec.features.back();
  image.decode = FeatureDecode::kImage;
  image.image_shape = {4, 4, 3};
  image.scale = 1 / 127.5f;
  image.offset = -1;
  ASSERT_OK_AND_ASSIGN(auto d, ExampleDecoder::Create(spec));
  auto with = [](const std::string& bytes) {
    v1::Example e;
    Add(&e, "image").mutable_bytes_list()->add_value(bytes);
    Add(&e, "label").mutable_int64_list()->add_value(1);
    return e;
  };
  // A 2x2 gray PNG: tf.image.resize's 4x4 of [[0, 1], [2, 3]], each value
  // three times.
  const uint8_t gray[4] = {0, 1, 2, 3};
  ASSERT_OK_AND_ASSIGN(std::string png, EncodePng(gray, 2, 2, 1));
  ASSERT_OK_AND_ASSIGN(Decoded out, DecodeWith(*d, with(png)));
  const float resized[16] = {0,   0.25, 0.75, 1,   0.5, 0.75, 1.25, 1.5,
                             1.5, 1.75, 2.25, 2.5, 2,   2.25, 2.75, 3};
  ASSERT_EQ(out.dense.size(), 48u);
  for (int p = 0; p < 16; ++p) {
    for (int k = 0; k < 3; ++k) {
      EXPECT_FLOAT_EQ(out.dense[3 * p + k], resized[p] * (1 / 127.5f) - 1) << p;
    }
  }
  // A flat 8x8 JPEG, halved: 128 everywhere, 128 / 127.5 - 1.
  const std::vector<uint8_t> flat(8 * 8 * 3, 128);
  ASSERT_OK_AND_ASSIGN(std::string jpeg, EncodeJpeg(flat.data(), 8, 8, 3));
  ASSERT_OK_AND_ASSIGN(out, DecodeWith(*d, with(jpeg)));
  for (float v : out.dense) EXPECT_FLOAT_EQ(v, 128 / 127.5f - 1);
  // A truncated JPEG is a bad record naming the feature.
  EXPECT_TRUE(absl::StartsWith(DecodeWith(*d, with(jpeg.substr(0, jpeg.size() / 2))).status().message(),
                               "feature \"image\": JPEG image: "));

  // image_shape is checked against the feature.
  auto error = [](FeatureSpec s) {
    auto made = ExampleDecoder::Create(s);
    return made.ok() ? std::string("ok") : std::string(made.status().message());
  };
  FeatureSpec bad = spec;
  bad.features[0].length = 47;
  EXPECT_EQ(error(bad),
            "feature \"image\": image_shape [4, 4, 3] holds 48 values; the feature's length is 47");
  bad = spec;
  bad.features[0].image_shape = {4, 4, 2};
  bad.features[0].length = 32;
  EXPECT_EQ(error(bad),
            "feature \"image\": image_shape [4, 4, 2] is not [height, width, channels] with sides "
            "in 1..65500 and 1 or 3 channels");
  bad = spec;
  bad.features[0].decode = FeatureDecode::kRawUint8;
  EXPECT_EQ(error(bad),
            "feature \"image\": image_shape is for an image feature (decode png, jpeg or image)");
}

TEST(FeatureSpecTest, RefusesSpecsThatCannotWork) {
  auto error = [](const FeatureSpec& spec) {
    auto d = ExampleDecoder::Create(spec);
    return d.ok() ? std::string("ok") : std::string(d.status().message());
  };
  FeatureSpec spec;
  spec.features.push_back(Def("s", FeatureType::kString, 1));
  EXPECT_EQ(error(spec),
            "feature \"s\": a string feature needs one of vocabulary_file and hash_buckets to "
            "map its tokens to ids");
  spec.features[0].vocabulary_file = testing::TempDir() + "/no-such-vocab";
  EXPECT_EQ(error(spec).rfind("feature \"s\": vocabulary_file ", 0), 0u) << error(spec);
  const std::string dup = testing::TempDir() + "/dup.txt";
  ASSERT_OK(WriteFileAtomically(dup, "a\nb\na\n"));
  spec.features[0].vocabulary_file = dup;
  EXPECT_EQ(error(spec),
            "feature \"s\": vocabulary_file " + dup + " line 3: \"a\" is there already");
  spec.features[0] = Def("f", FeatureType::kFloat, 0);
  EXPECT_EQ(error(spec), "feature \"f\": length 0 is not in 1..16777216");
  spec.features[0] = Def("f", FeatureType::kFloat, 1);
  spec.features[0].hash_buckets = 5;
  EXPECT_EQ(error(spec),
            "feature \"f\": a float feature takes no vocabulary_file, hash_buckets or vocabulary "
            "(those map ids)");
  spec.features[0] = Def("label", FeatureType::kFloat, 1);
  EXPECT_EQ(error(spec), "feature \"label\": is the label too");
  spec.features[0] = Def("f", FeatureType::kFloat, 1);
  spec.features.push_back(Def("f", FeatureType::kFloat, 1));
  EXPECT_EQ(error(spec), "feature \"f\": is given twice");
}

}  // namespace
}  // namespace pstrain::data
