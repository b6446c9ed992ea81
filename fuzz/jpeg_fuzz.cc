// JPEG images (data/jpeg_image.h) on arbitrary bytes, and the resize the
// input pipeline applies to them (data/image_resize.h): a decode either
// fails with an error or gives exactly height x width x channels values
// (1 or 3 channels) within the bound it was given; every resize method
// brings them to a small size with each value inside the image's range.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_resize.h"
#include "data/jpeg_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kMaxValues = 1 << 20;
  std::vector<uint8_t> pixels;
  const int channels =
      size > 0 ? (data[size - 1] % 3 == 0 ? 0 : (data[size - 1] % 3 == 1 ? 1 : 3)) : 0;
  auto shape = pstrain::data::DecodeJpeg(
      absl::string_view(reinterpret_cast<const char*>(data), size), channels, kMaxValues, &pixels);
  if (!shape.ok()) return 0;
  if (shape->values() > kMaxValues || static_cast<int64_t>(pixels.size()) != shape->values() ||
      (shape->channels != 1 && shape->channels != 3) ||
      (channels != 0 && shape->channels != channels)) {
    __builtin_trap();
  }
  const auto [lo, hi] = std::minmax_element(pixels.begin(), pixels.end());
  const pstrain::data::ImageSize in{shape->height, shape->width, shape->channels};
  std::vector<float> out(static_cast<size_t>(5 * 7 * shape->channels));
  for (auto method : {pstrain::data::ResizeMethod::kBilinear, pstrain::data::ResizeMethod::kNearest,
                      pstrain::data::ResizeMethod::kArea}) {
    pstrain::data::ResizeImage(pixels.data(), in, 5, 7, method, out.data());
    for (float v : out) {
      // Area's weights sum to one within rounding.
      if (!(v >= *lo - 0.01f && v <= *hi + 0.01f)) __builtin_trap();
    }
  }
  return 0;
}
