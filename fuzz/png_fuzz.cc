// PNG images (data/png_image.h) on arbitrary bytes: a decode either fails
// with an error or gives exactly height x width x channels values within
// the bound it was given; what it gives encodes and decodes back to the
// same values.
#include <cstdint>
#include <string>
#include <vector>

#include "data/png_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kMaxValues = 1 << 20;
  std::vector<uint8_t> pixels;
  auto shape = pstrain::data::DecodePng(
      absl::string_view(reinterpret_cast<const char*>(data), size), kMaxValues, &pixels);
  if (!shape.ok()) return 0;
  if (shape->values() > kMaxValues || static_cast<int64_t>(pixels.size()) != shape->values() ||
      shape->channels < 1 || shape->channels > 4) {
    __builtin_trap();
  }
  auto again = pstrain::data::EncodePng(pixels.data(), shape->height, shape->width,
                                        static_cast<int>(shape->channels));
  if (!again.ok()) __builtin_trap();
  std::vector<uint8_t> back;
  auto back_shape = pstrain::data::DecodePng(*again, kMaxValues, &back);
  if (!back_shape.ok() || back != pixels || back_shape->channels != shape->channels) {
    __builtin_trap();
  }
  return 0;
}
