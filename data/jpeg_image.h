// JPEG images as TensorFlow decodes them: tf.io.decode_jpeg(x, channels=N)
// with its defaults (the accurate integer DCT, fancy upsampling, no
// recovery of a truncated image), through Debian's libjpeg-turbo (the
// TurboJPEG API of libturbojpeg0-dev), the library TensorFlow's own decoder
// is built on. Baseline and progressive, grayscale and colour; CMYK is
// refused. The images of TensorFlow Datasets' photo sets (cats_vs_dogs,
// imagenet2012, tf_flowers) are stored this way.
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_JPEG_IMAGE_H_
#define PSTRAIN_DATA_JPEG_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::data {

struct JpegShape {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;  // 1 gray, 3 RGB
  int64_t values() const { return height * width * channels; }
};

// Whether `bytes` begin as a JPEG file does (the SOI marker and the next
// marker's 0xFF), as tf.io.decode_image tells formats apart.
bool LooksLikeJpeg(absl::string_view bytes);

// Decodes `jpeg` into `pixels` (resized to its values(): rows top to
// bottom, each pixel's channels together). `channels` 0 keeps the image's
// own (1 for a grayscale image, 3 for colour); 1 or 3 converts as
// tf.io.decode_jpeg's `channels` does (libjpeg's colour conversion: gray
// repeated into RGB, RGB weighted into gray). InvalidArgument: "not a
// JPEG image" for bytes without the markers; "JPEG image: CMYK ... is not
// supported" for a CMYK or YCCK image; "JPEG image: truncated (...)" for
// data that ends before the image does; "JPEG image: MESSAGE" for
// libjpeg-turbo's other errors; naming the size for an image of more than
// `max_values` values (nothing allocated for it). A warning libjpeg-turbo
// decodes past (extraneous bytes before a marker, say) is not an error, as
// it is not for TensorFlow.
absl::StatusOr<JpegShape> DecodeJpeg(absl::string_view jpeg, int channels, int64_t max_values,
                                     std::vector<uint8_t>* pixels);

struct JpegOptions {
  int quality = 95;          // 1..100, libjpeg's scale (tf.io.encode_jpeg's default)
  bool progressive = false;  // a progressive image instead of a baseline one
};

// Encodes `height` x `width` pixels of `channels` (1 gray, 3 RGB) 8-bit
// samples each, row-major, as a JPEG image: gray as a grayscale JPEG, RGB
// with 4:2:0 chroma subsampling (tf.io.encode_jpeg's default).
// InvalidArgument for a size, channel count or quality out of range.
absl::StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int64_t height, int64_t width,
                                       int channels, const JpegOptions& options = {});

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_JPEG_IMAGE_H_
