#include "data/png_image.h"

#include <png.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

std::vector<uint8_t> Ramp(size_t n, int step) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * step + 3);
  return v;
}

TEST(PngImageTest, EveryChannelCountRoundTripsBitForBit) {
  for (int channels = 1; channels <= 4; ++channels) {
    const std::vector<uint8_t> pixels = Ramp(5 * 7 * channels, 37);
    ASSERT_OK_AND_ASSIGN(std::string png, EncodePng(pixels.data(), 5, 7, channels));
    EXPECT_EQ(png.substr(1, 3), "PNG");
    std::vector<uint8_t> decoded;
    ASSERT_OK_AND_ASSIGN(PngShape shape, DecodePng(png, 1 << 20, &decoded));
    EXPECT_EQ(shape.height, 5);
    EXPECT_EQ(shape.width, 7);
    EXPECT_EQ(shape.channels, channels);
    EXPECT_EQ(shape.values(), 5 * 7 * channels);
    EXPECT_EQ(decoded, pixels) << channels << " channels";
  }
}

// Images libpng writes in forms EncodePng does not: a palette with and
// without transparency, 16-bit gray, 1-bit gray, interlaced RGB.
struct Written {
  std::string bytes;
};
void Append(png_structp png, png_bytep data, size_t n) {
  static_cast<Written*>(png_get_io_ptr(png))->bytes.append(reinterpret_cast<char*>(data), n);
}
void NoFlush(png_structp) {}

std::string WriteWithLibpng(int width, int height, int bit_depth, int color_type, int interlace,
                            const std::vector<std::vector<uint8_t>>& rows,
                            const std::vector<png_color>& palette = {},
                            const std::vector<uint8_t>& alphas = {}) {
  Written out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, Append, NoFlush);
  png_set_IHDR(png, info, width, height, bit_depth, color_type, interlace,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) {
    png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  }
  if (!alphas.empty()) {
    png_set_tRNS(png, info, alphas.data(), static_cast<int>(alphas.size()), nullptr);
  }
  png_write_info(png, info);
  std::vector<png_bytep> pointers;
  for (const auto& row : rows) pointers.push_back(const_cast<png_bytep>(row.data()));
  png_write_image(png, pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out.bytes;
}

TEST(PngImageTest, ExpandsPalettesLowBitGrayAndSixteenBitSamplesAsTensorFlowDoes) {
  std::vector<uint8_t> decoded;
  const std::vector<png_color> palette = {{10, 20, 30}, {200, 100, 50}};
  // 2 x 1, indices 1 and 0: RGB.
  const std::string plain =
      WriteWithLibpng(2, 1, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, {{1, 0}}, palette);
  ASSERT_OK_AND_ASSIGN(PngShape shape, DecodePng(plain, 100, &decoded));
  EXPECT_EQ(shape.channels, 3);
  EXPECT_EQ(decoded, (std::vector<uint8_t>{200, 100, 50, 10, 20, 30}));
  // With transparency: RGBA (an entry the tRNS chunk leaves out is opaque).
  const std::string clear =
      WriteWithLibpng(2, 1, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, {{1, 0}}, palette, {64});
  ASSERT_OK_AND_ASSIGN(shape, DecodePng(clear, 100, &decoded));
  EXPECT_EQ(shape.channels, 4);
  EXPECT_EQ(decoded, (std::vector<uint8_t>{200, 100, 50, 255, 10, 20, 30, 64}));
  // 1-bit gray, 3 pixels 1, 0, 1: 255, 0, 255.
  const std::string bits =
      WriteWithLibpng(3, 1, 1, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, {{0b10100000}});
  ASSERT_OK_AND_ASSIGN(shape, DecodePng(bits, 100, &decoded));
  EXPECT_EQ(shape.channels, 1);
  EXPECT_EQ(decoded, (std::vector<uint8_t>{255, 0, 255}));
  // 16-bit gray, big-endian samples 0xFFFF, 0x0000, 0x8080: to 8 bits.
  const std::string deep = WriteWithLibpng(3, 1, 16, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                                           {{0xFF, 0xFF, 0x00, 0x00, 0x80, 0x80}});
  ASSERT_OK_AND_ASSIGN(shape, DecodePng(deep, 100, &decoded));
  EXPECT_EQ(decoded, (std::vector<uint8_t>{255, 0, 128}));
  // Interlaced (Adam7) RGB, 9 x 9: the same pixels as written.
  std::vector<std::vector<uint8_t>> rows;
  std::vector<uint8_t> all;
  for (int y = 0; y < 9; ++y) {
    rows.push_back(Ramp(27, 11 + y));
    all.insert(all.end(), rows.back().begin(), rows.back().end());
  }
  const std::string adam7 = WriteWithLibpng(9, 9, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_ADAM7, rows);
  ASSERT_OK_AND_ASSIGN(shape, DecodePng(adam7, 1000, &decoded));
  EXPECT_EQ(shape.height, 9);
  EXPECT_EQ(decoded, all);
}

TEST(PngImageTest, RefusesWhatIsNotAWholePngNamingWhy) {
  std::vector<uint8_t> decoded;
  EXPECT_EQ(DecodePng("hello", 100, &decoded).status().message(),
            "not a PNG image (5 bytes without PNG's signature)");
  const std::vector<uint8_t> pixels = Ramp(28 * 28, 1);
  ASSERT_OK_AND_ASSIGN(std::string png, EncodePng(pixels.data(), 28, 28, 1));
  // Cut short: libpng's reader runs out.
  absl::Status cut = DecodePng(png.substr(0, png.size() / 2), 1000, &decoded).status();
  EXPECT_EQ(cut.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cut.message(), "PNG image: the image data ends early");
  // A byte of the header chunk changed: its CRC no longer matches.
  std::string changed = png;
  changed[20] ^= 1;
  absl::Status crc = DecodePng(changed, 1000, &decoded).status();
  EXPECT_EQ(crc.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(crc.message(), "PNG image: ")) << crc.message();
  // Larger than the caller allows: refused before its pixels are read.
  EXPECT_EQ(DecodePng(png, 700, &decoded).status().message(),
            "a PNG image of 28x28x1 has 784 values, more than the 700 it may have");
  EXPECT_EQ(EncodePng(pixels.data(), 28, 28, 5).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::data
