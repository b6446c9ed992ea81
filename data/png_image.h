// PNG images as TensorFlow stores and decodes them: tf.io.decode_png(x)
// with its defaults (channels as stored, 8-bit samples), the layout of the
// images in TensorFlow Datasets' TFRecord files. Through Debian's libpng.
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_PNG_IMAGE_H_
#define PSTRAIN_DATA_PNG_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::data {

struct PngShape {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;  // 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA
  int64_t values() const { return height * width * channels; }
};

// Whether `bytes` begin with PNG's 8-byte signature.
bool LooksLikePng(absl::string_view bytes);

// Decodes the PNG image `png` into `pixels` (resized to its values():
// rows top to bottom, each pixel's channels together). Channels are as
// stored: a palette is expanded to RGB (RGBA where it has transparency),
// gray of 1, 2 or 4 bits widened to 8, 16-bit samples scaled to 8 bits;
// no gamma is applied. InvalidArgument "not a PNG image" for bytes without
// the signature, "PNG image: MESSAGE" for libpng's errors (a bad chunk,
// data cut short, a CRC), and naming the size for an image of more than
// `max_values` values (nothing allocated for it).
absl::StatusOr<PngShape> DecodePng(absl::string_view png, int64_t max_values,
                                   std::vector<uint8_t>* pixels);

// Encodes `height` x `width` pixels of `channels` (1..4) 8-bit samples
// each, row-major, as a PNG image (no interlacing, default compression).
// InvalidArgument for a size or channel count out of range.
absl::StatusOr<std::string> EncodePng(const uint8_t* pixels, int64_t height, int64_t width,
                                      int channels);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_PNG_IMAGE_H_
