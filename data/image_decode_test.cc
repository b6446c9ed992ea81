#include "data/image_decode.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/testing/status_testing.h"
#include "data/jpeg_image.h"
#include "data/png_image.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

std::vector<uint8_t> Ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + 1);
  return v;
}

TEST(ImageDecodeTest, EitherCodecIsToldByItsFirstBytes) {
  const std::vector<uint8_t> gray(6 * 5, 128);
  ASSERT_OK_AND_ASSIGN(std::string png, EncodePng(gray.data(), 6, 5, 1));
  ASSERT_OK_AND_ASSIGN(std::string jpeg, EncodeJpeg(gray.data(), 6, 5, 1));
  std::vector<uint8_t> pixels;
  ASSERT_OK_AND_ASSIGN(ImageSize a, DecodeImagePixels(png, ImageCodec::kEither, 0, 1000, &pixels));
  EXPECT_EQ(pixels, gray);
  ASSERT_OK_AND_ASSIGN(ImageSize b, DecodeImagePixels(jpeg, ImageCodec::kEither, 0, 1000, &pixels));
  // A flat gray survives JPEG exactly.
  EXPECT_EQ(pixels, gray);
  for (const ImageSize& s : {a, b}) {
    EXPECT_EQ(s.height, 6);
    EXPECT_EQ(s.width, 5);
    EXPECT_EQ(s.channels, 1);
  }
  absl::StatusOr<ImageSize> neither =
      DecodeImagePixels("BM6\x01", ImageCodec::kEither, 0, 1000, &pixels);
  ASSERT_FALSE(neither.ok());
  EXPECT_EQ(neither.status().message(), "neither a PNG nor a JPEG image");
  // Named, the codec is not guessed.
  absl::StatusOr<ImageSize> named = DecodeImagePixels(jpeg, ImageCodec::kPng, 0, 1000, &pixels);
  ASSERT_FALSE(named.ok());
  EXPECT_TRUE(absl::StartsWith(named.status().message(), "not a PNG image")) << named.status();
}

TEST(ImageDecodeTest, PngChannelsAreWidenedOrLoseTheirAlpha) {
  // Gray + alpha: the gray, or the gray three times.
  const std::vector<uint8_t> ga = Ramp(2 * 3 * 2);
  ASSERT_OK_AND_ASSIGN(std::string png, EncodePng(ga.data(), 2, 3, 2));
  std::vector<uint8_t> pixels;
  ASSERT_OK_AND_ASSIGN(ImageSize one, DecodeImagePixels(png, ImageCodec::kPng, 1, 1000, &pixels));
  EXPECT_EQ(one.channels, 1);
  ASSERT_EQ(pixels.size(), 6u);
  for (size_t p = 0; p < 6; ++p) EXPECT_EQ(pixels[p], ga[2 * p]);
  ASSERT_OK_AND_ASSIGN(ImageSize three, DecodeImagePixels(png, ImageCodec::kPng, 3, 1000, &pixels));
  EXPECT_EQ(three.channels, 3);
  ASSERT_EQ(pixels.size(), 18u);
  for (size_t p = 0; p < 6; ++p) {
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(pixels[3 * p + k], ga[2 * p]);
  }
  // RGBA to RGB.
  const std::vector<uint8_t> rgba = Ramp(2 * 2 * 4);
  ASSERT_OK_AND_ASSIGN(png, EncodePng(rgba.data(), 2, 2, 4));
  ASSERT_OK(DecodeImagePixels(png, ImageCodec::kEither, 3, 1000, &pixels).status());
  ASSERT_EQ(pixels.size(), 12u);
  for (size_t p = 0; p < 4; ++p) {
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(pixels[3 * p + k], rgba[4 * p + k]);
  }
  // RGB to one channel is not guessed.
  absl::StatusOr<ImageSize> gray = DecodeImagePixels(png, ImageCodec::kPng, 1, 1000, &pixels);
  ASSERT_FALSE(gray.ok());
  EXPECT_TRUE(absl::StrContains(gray.status().message(), "not converted to 1 channel"));
}

}  // namespace
}  // namespace pstrain::data
