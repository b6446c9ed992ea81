#include "data/jpeg_image.h"

#include <turbojpeg.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

// A smooth picture (JPEG keeps those close): each channel a different
// gradient.
std::vector<uint8_t> Gradient(int height, int width, int channels) {
  std::vector<uint8_t> v(static_cast<size_t>(height * width * channels));
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        v[(y * width + x) * channels + c] = static_cast<uint8_t>(30 + y * (c + 1) + x * (3 - c));
      }
    }
  }
  return v;
}

double MeanAbsDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int{a[i]} - int{b[i]});
  return sum / static_cast<double>(a.size());
}

TEST(JpegImageTest, GrayAndColourImagesDecodeToTheirOwnChannels) {
  for (int channels : {1, 3}) {
    const std::vector<uint8_t> pixels = Gradient(24, 40, channels);
    ASSERT_OK_AND_ASSIGN(std::string jpeg, EncodeJpeg(pixels.data(), 24, 40, channels));
    EXPECT_TRUE(LooksLikeJpeg(jpeg));
    std::vector<uint8_t> decoded;
    ASSERT_OK_AND_ASSIGN(JpegShape shape, DecodeJpeg(jpeg, 0, 1 << 20, &decoded));
    EXPECT_EQ(shape.height, 24);
    EXPECT_EQ(shape.width, 40);
    EXPECT_EQ(shape.channels, channels);
    ASSERT_EQ(decoded.size(), pixels.size());
    // Lossy, but close on a smooth picture at quality 95.
    EXPECT_LT(MeanAbsDifference(decoded, pixels), 3.0) << channels << " channels";
  }
}

TEST(JpegImageTest, AProgressiveImageDecodesToTheBaselineOnesPixels) {
  // Progressive scans carry the same quantized coefficients in another
  // order: the decoded pixels are the same bytes.
  const std::vector<uint8_t> pixels = Gradient(33, 47, 3);
  ASSERT_OK_AND_ASSIGN(std::string baseline, EncodeJpeg(pixels.data(), 33, 47, 3));
  JpegOptions progressive_options;
  progressive_options.progressive = true;
  ASSERT_OK_AND_ASSIGN(std::string progressive,
                       EncodeJpeg(pixels.data(), 33, 47, 3, progressive_options));
  EXPECT_NE(baseline, progressive);
  std::vector<uint8_t> a, b;
  ASSERT_OK(DecodeJpeg(baseline, 0, 1 << 20, &a).status());
  ASSERT_OK(DecodeJpeg(progressive, 0, 1 << 20, &b).status());
  EXPECT_EQ(a, b);
}

TEST(JpegImageTest, ChannelsAreConvertedAsDecodeJpegConvertsThem) {
  const std::vector<uint8_t> gray = Gradient(16, 16, 1);
  ASSERT_OK_AND_ASSIGN(std::string jpeg, EncodeJpeg(gray.data(), 16, 16, 1));
  std::vector<uint8_t> own, rgb;
  ASSERT_OK(DecodeJpeg(jpeg, 0, 1 << 20, &own).status());
  ASSERT_OK_AND_ASSIGN(JpegShape shape, DecodeJpeg(jpeg, 3, 1 << 20, &rgb));
  EXPECT_EQ(shape.channels, 3);
  ASSERT_EQ(rgb.size(), own.size() * 3);
  for (size_t p = 0; p < own.size(); ++p) {
    ASSERT_EQ(rgb[3 * p], own[p]);
    ASSERT_EQ(rgb[3 * p + 1], own[p]);
    ASSERT_EQ(rgb[3 * p + 2], own[p]);
  }
  // A colour image of equal channels to gray: its luminance, the gray.
  std::vector<uint8_t> back;
  JpegOptions best;
  best.quality = 100;
  ASSERT_OK_AND_ASSIGN(std::string colour, EncodeJpeg(rgb.data(), 16, 16, 3, best));
  ASSERT_OK_AND_ASSIGN(JpegShape one, DecodeJpeg(colour, 1, 1 << 20, &back));
  EXPECT_EQ(one.channels, 1);
  EXPECT_LT(MeanAbsDifference(back, own), 1.5);
}

TEST(JpegImageTest, ACmykImageIsRefusedByName) {
  std::vector<uint8_t> cmyk(8 * 8 * 4, 100);
  tjhandle handle = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int): the API's
  ASSERT_EQ(tjCompress2(handle, cmyk.data(), 8, 0, 8, TJPF_CMYK, &out, &size, TJSAMP_444, 90, 0), 0)
      << tjGetErrorStr2(handle);
  const std::string jpeg(reinterpret_cast<const char*>(out), size);
  tjFree(out);
  tjDestroy(handle);
  std::vector<uint8_t> pixels;
  absl::StatusOr<JpegShape> got = DecodeJpeg(jpeg, 0, 1 << 20, &pixels);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::StrContains(got.status().message(), "CMYK")) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "not supported")) << got.status();
}

TEST(JpegImageTest, BadAndTruncatedImagesAreErrorsThatSayWhy) {
  // Noise: most of the file is the scan's data, where a cut lands.
  std::vector<uint8_t> pixels(32 * 32 * 3);
  uint32_t seed = 9;
  for (auto& p : pixels) {
    seed = seed * 1664525u + 1013904223u;
    p = static_cast<uint8_t>(seed >> 24);
  }
  ASSERT_OK_AND_ASSIGN(std::string jpeg, EncodeJpeg(pixels.data(), 32, 32, 3));
  std::vector<uint8_t> out;
  absl::StatusOr<JpegShape> got = DecodeJpeg("GIF89a....", 0, 1 << 20, &out);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "not a JPEG image");

  got = DecodeJpeg(jpeg.substr(0, jpeg.size() / 2), 0, 1 << 20, &out);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::StrContains(got.status().message(), "JPEG image: truncated")) << got.status();

  // The markers, then garbage where the frame header should be.
  std::string broken = jpeg.substr(0, 4) + std::string(200, '\x17');
  got = DecodeJpeg(broken, 0, 1 << 20, &out);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::StartsWith(got.status().message(), "JPEG image: ")) << got.status();

  // After those errors the same thread decodes the next image whole.
  ASSERT_OK(DecodeJpeg(jpeg, 0, 1 << 20, &out).status());
  got = DecodeJpeg(jpeg, 0, 32 * 32 * 3 - 1, &out);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "JPEG image: 32x32x3 is more than 3071 values");
  got = DecodeJpeg(jpeg, 2, 1 << 20, &out);
  EXPECT_FALSE(got.ok());
}

TEST(JpegImageTest, EncodeRefusesWhatAJpegCannotHold) {
  const std::vector<uint8_t> pixels(64 * 4);
  EXPECT_FALSE(EncodeJpeg(pixels.data(), 8, 8, 4).ok());
  EXPECT_FALSE(EncodeJpeg(pixels.data(), 0, 8, 1).ok());
  JpegOptions none;
  none.quality = 0;
  EXPECT_FALSE(EncodeJpeg(pixels.data(), 8, 8, 1, none).ok());
}

}  // namespace
}  // namespace pstrain::data
