// An encoded image (PNG or JPEG, as TensorFlow Datasets stores images) to
// 8-bit pixels with the channels a model wants, as tf.io.decode_image(x,
// channels=N) does: the codec told apart by the first bytes, or named.
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_IMAGE_DECODE_H_
#define PSTRAIN_DATA_IMAGE_DECODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/image_resize.h"

namespace pstrain::data {

enum class ImageCodec { kPng, kJpeg, kEither };

// Decodes `bytes` into `pixels` (height x width x channels, channels
// together). `channels` 0 keeps the image's own; 1 or 3 converts: gray is
// repeated into RGB and an alpha channel dropped (decode_png's
// `channels`), a JPEG converted by libjpeg (decode_jpeg's). Errors: the
// codec's (data/png_image.h, data/jpeg_image.h), "neither a PNG nor a
// JPEG image" for kEither, and InvalidArgument for an RGB PNG asked for
// one channel (not converted: say channels 3).
absl::StatusOr<ImageSize> DecodeImagePixels(absl::string_view bytes, ImageCodec codec, int channels,
                                            int64_t max_values, std::vector<uint8_t>* pixels);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_IMAGE_DECODE_H_
