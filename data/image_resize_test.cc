#include "data/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

// The references below are written from tf.image.resize's documented
// sampling in double precision, another way than the code under test:
// bilinear clamps the source position (not the neighbours' indices) and
// weights four corners; area integrates the source as a step function.

std::vector<uint8_t> Noise(int64_t n, uint32_t seed) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) {
    seed = seed * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

double At(const std::vector<uint8_t>& img, const ImageSize& s, int64_t y, int64_t x, int64_t c) {
  return img[static_cast<size_t>((y * s.width + x) * s.channels + c)];
}

std::vector<double> BilinearReference(const std::vector<uint8_t>& img, const ImageSize& s,
                                      int64_t oh, int64_t ow) {
  std::vector<double> out;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const double sy = std::clamp((oy + 0.5) * s.height / oh - 0.5, 0.0, s.height - 1.0);
    const auto y0 = static_cast<int64_t>(std::floor(sy));
    const int64_t y1 = std::min(y0 + 1, s.height - 1);
    const double fy = sy - y0;
    for (int64_t ox = 0; ox < ow; ++ox) {
      const double sx = std::clamp((ox + 0.5) * s.width / ow - 0.5, 0.0, s.width - 1.0);
      const auto x0 = static_cast<int64_t>(std::floor(sx));
      const int64_t x1 = std::min(x0 + 1, s.width - 1);
      const double fx = sx - x0;
      for (int64_t c = 0; c < s.channels; ++c) {
        out.push_back((1 - fy) * (1 - fx) * At(img, s, y0, x0, c) +
                      (1 - fy) * fx * At(img, s, y0, x1, c) +
                      fy * (1 - fx) * At(img, s, y1, x0, c) + fy * fx * At(img, s, y1, x1, c));
      }
    }
  }
  return out;
}

// The length of [a, b) inside source cell i.
double Inside(int64_t i, double a, double b) {
  return std::max(0.0, std::min<double>(i + 1, b) - std::max<double>(i, a));
}

std::vector<double> AreaReference(const std::vector<uint8_t>& img, const ImageSize& s, int64_t oh,
                                  int64_t ow) {
  const double ry = static_cast<double>(s.height) / oh, rx = static_cast<double>(s.width) / ow;
  std::vector<double> out;
  for (int64_t oy = 0; oy < oh; ++oy) {
    for (int64_t ox = 0; ox < ow; ++ox) {
      for (int64_t c = 0; c < s.channels; ++c) {
        double integral = 0;
        for (int64_t y = 0; y < s.height; ++y) {
          const double wy = Inside(y, oy * ry, (oy + 1) * ry);
          if (wy == 0) continue;
          for (int64_t x = 0; x < s.width; ++x) {
            integral += wy * Inside(x, ox * rx, (ox + 1) * rx) * At(img, s, y, x, c);
          }
        }
        out.push_back(integral / (ry * rx));
      }
    }
  }
  return out;
}

std::vector<double> NearestReference(const std::vector<uint8_t>& img, const ImageSize& s,
                                     int64_t oh, int64_t ow) {
  std::vector<double> out;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const int64_t y =
        std::min<int64_t>(static_cast<int64_t>((oy + 0.5) * s.height / oh), s.height - 1);
    for (int64_t ox = 0; ox < ow; ++ox) {
      const int64_t x =
          std::min<int64_t>(static_cast<int64_t>((ox + 0.5) * s.width / ow), s.width - 1);
      for (int64_t c = 0; c < s.channels; ++c) out.push_back(At(img, s, y, x, c));
    }
  }
  return out;
}

std::vector<float> Resize(const std::vector<uint8_t>& img, const ImageSize& s, int64_t oh,
                          int64_t ow, ResizeMethod method) {
  std::vector<float> out(static_cast<size_t>(oh * ow * s.channels));
  ResizeImage(img.data(), s, oh, ow, method, out.data());
  return out;
}

TEST(ImageResizeTest, BilinearUpscalesAsTensorFlowDoes) {
  // tf.image.resize([[0, 1], [2, 3]] as a 2x2x1 image, [4, 4]).
  const std::vector<uint8_t> img = {0, 1, 2, 3};
  const std::vector<float> want = {0,   0.25, 0.75, 1,   0.5, 0.75, 1.25, 1.5,
                                   1.5, 1.75, 2.25, 2.5, 2,   2.25, 2.75, 3};
  EXPECT_EQ(Resize(img, {2, 2, 1}, 4, 4, ResizeMethod::kBilinear), want);
}

TEST(ImageResizeTest, EveryMethodMatchesItsReferenceUpAndDown) {
  struct Case {
    ImageSize in;
    int64_t oh, ow;
  };
  const std::vector<Case> cases = {
      {{28, 28, 1}, 32, 32},   {{37, 23, 3}, 32, 32}, {{5, 9, 3}, 13, 4},
      {{224, 160, 3}, 96, 96}, {{3, 3, 1}, 7, 2},     {{40, 31, 3}, 40, 31},
  };
  uint32_t seed = 7;
  for (const Case& t : cases) {
    const std::vector<uint8_t> img = Noise(t.in.height * t.in.width * t.in.channels, seed++);
    const std::vector<float> bilinear = Resize(img, t.in, t.oh, t.ow, ResizeMethod::kBilinear);
    const std::vector<float> area = Resize(img, t.in, t.oh, t.ow, ResizeMethod::kArea);
    const std::vector<float> nearest = Resize(img, t.in, t.oh, t.ow, ResizeMethod::kNearest);
    const std::vector<double> want_bilinear = BilinearReference(img, t.in, t.oh, t.ow);
    const std::vector<double> want_area = AreaReference(img, t.in, t.oh, t.ow);
    const std::vector<double> want_nearest = NearestReference(img, t.in, t.oh, t.ow);
    ASSERT_EQ(bilinear.size(), want_bilinear.size());
    for (size_t i = 0; i < bilinear.size(); ++i) {
      // The scale in single precision, as TensorFlow's: a position off by
      // ~1e-6 of the image, a value by up to ~0.01 of 255 where it is steep.
      ASSERT_NEAR(bilinear[i], want_bilinear[i], 1e-2)
          << t.in.height << "x" << t.in.width << " to " << t.oh << "x" << t.ow << " at " << i;
      ASSERT_NEAR(area[i], want_area[i], 1e-2)
          << t.in.height << "x" << t.in.width << " to " << t.oh << "x" << t.ow << " at " << i;
      ASSERT_EQ(nearest[i], want_nearest[i])
          << t.in.height << "x" << t.in.width << " to " << t.oh << "x" << t.ow << " at " << i;
    }
  }
}

TEST(ImageResizeTest, HalvingAveragesEachTwoByTwoBlock) {
  // Half-pixel centres put each output's sample between its block's four
  // pixels: bilinear and area agree on the block's mean.
  const ImageSize s{6, 8, 3};
  const std::vector<uint8_t> img = Noise(6 * 8 * 3, 99);
  const std::vector<float> bilinear = Resize(img, s, 3, 4, ResizeMethod::kBilinear);
  const std::vector<float> area = Resize(img, s, 3, 4, ResizeMethod::kArea);
  for (int64_t y = 0; y < 3; ++y) {
    for (int64_t x = 0; x < 4; ++x) {
      for (int64_t c = 0; c < 3; ++c) {
        const double mean =
            (At(img, s, 2 * y, 2 * x, c) + At(img, s, 2 * y, 2 * x + 1, c) +
             At(img, s, 2 * y + 1, 2 * x, c) + At(img, s, 2 * y + 1, 2 * x + 1, c)) /
            4;
        const size_t i = static_cast<size_t>((y * 4 + x) * 3 + c);
        EXPECT_NEAR(bilinear[i], mean, 1e-4);
        EXPECT_NEAR(area[i], mean, 1e-4);
      }
    }
  }
}

TEST(ImageResizeTest, TheSameSizeIsACopy) {
  const ImageSize s{9, 7, 3};
  const std::vector<uint8_t> img = Noise(9 * 7 * 3, 5);
  const std::vector<float> want(img.begin(), img.end());
  for (ResizeMethod m : {ResizeMethod::kBilinear, ResizeMethod::kNearest, ResizeMethod::kArea}) {
    EXPECT_EQ(Resize(img, s, 9, 7, m), want) << ResizeMethodName(m);
  }
}

TEST(ImageResizeTest, MethodsByName) {
  EXPECT_EQ(*ParseResizeMethod(""), ResizeMethod::kBilinear);
  for (ResizeMethod m : {ResizeMethod::kBilinear, ResizeMethod::kNearest, ResizeMethod::kArea}) {
    ASSERT_OK_AND_ASSIGN(ResizeMethod back, ParseResizeMethod(ResizeMethodName(m)));
    EXPECT_EQ(back, m);
  }
  absl::StatusOr<ResizeMethod> bad = ParseResizeMethod("bicubic");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "resize \"bicubic\" is not one of bilinear, nearest, area");
}

}  // namespace
}  // namespace pstrain::data
