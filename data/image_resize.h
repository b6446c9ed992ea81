// Resizing an image as tf.image.resize does with antialias off (its
// default): every method samples the source on half-pixel centres
// (TensorFlow 2's `half_pixel_centers=True`, `align_corners=False`), with
// the scale in_size / out_size in single precision as TensorFlow's kernels
// compute it, and returns floats (bilinear and area interpolate; nearest
// copies a source value):
//   bilinear  source position (o + 0.5) * scale - 0.5, its two neighbours
//             (clamped to the image) weighted by the fraction, rows of the
//             two blended first and then the columns
//   nearest   source index floor((o + 0.5) * scale), clamped to the image
//   area      the mean of the source cells under [o * scale, (o + 1) *
//             scale), each weighted by how much of it lies inside
// Images are height x width x channels, channels together (channels
// last). Stateless; thread-safe.
#ifndef PSTRAIN_DATA_IMAGE_RESIZE_H_
#define PSTRAIN_DATA_IMAGE_RESIZE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::data {

enum class ResizeMethod { kBilinear, kNearest, kArea };

// "bilinear" (and "" for it, the default), "nearest", "area";
// InvalidArgument naming anything else.
absl::StatusOr<ResizeMethod> ParseResizeMethod(absl::string_view name);
const char* ResizeMethodName(ResizeMethod method);

struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
};

// Resizes `in` (in_size, 8-bit samples) into `out` (out_h x out_w x
// in_size.channels floats). REQUIRES: every size >= 1; `out` does not
// overlap `in`.
void ResizeImage(const uint8_t* in, const ImageSize& in_size, int64_t out_h, int64_t out_w,
                 ResizeMethod method, float* out);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_IMAGE_RESIZE_H_
