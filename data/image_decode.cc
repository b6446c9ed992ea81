#include "data/image_decode.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/jpeg_image.h"
#include "data/png_image.h"

namespace pstrain::data {
namespace {

// A PNG's stored channels (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA) to
// `want` (1 or 3), in place: alpha dropped, gray repeated.
absl::Status ConvertPngChannels(const PngShape& shape, int want, std::vector<uint8_t>* pixels) {
  const int64_t have = shape.channels;
  const bool gray = have <= 2;
  if (!gray && want == 1) {
    return absl::InvalidArgumentError(absl::StrCat("an RGB", have == 4 ? "A" : "",
                                                   " PNG image is not converted to 1 channel; "
                                                   "give the image 3 channels"));
  }
  if (have == want) return absl::OkStatus();
  const int64_t n = shape.height * shape.width;
  std::vector<uint8_t> out(static_cast<size_t>(n * want));
  const uint8_t* in = pixels->data();
  for (int64_t p = 0; p < n; ++p) {
    for (int k = 0; k < want; ++k) out[p * want + k] = in[p * have + (gray ? 0 : k)];
  }
  *pixels = std::move(out);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ImageSize> DecodeImagePixels(absl::string_view bytes, ImageCodec codec, int channels,
                                            int64_t max_values, std::vector<uint8_t>* pixels) {
  if (codec == ImageCodec::kEither) {
    if (LooksLikeJpeg(bytes)) {
      codec = ImageCodec::kJpeg;
    } else if (LooksLikePng(bytes)) {
      codec = ImageCodec::kPng;
    } else {
      return absl::InvalidArgumentError("neither a PNG nor a JPEG image");
    }
  }
  if (codec == ImageCodec::kJpeg) {
    absl::StatusOr<JpegShape> shape = DecodeJpeg(bytes, channels, max_values, pixels);
    if (!shape.ok()) return shape.status();
    return ImageSize{shape->height, shape->width, shape->channels};
  }
  absl::StatusOr<PngShape> shape = DecodePng(bytes, max_values, pixels);
  if (!shape.ok()) return shape.status();
  if (channels != 0) {
    if (absl::Status s = ConvertPngChannels(*shape, channels, pixels); !s.ok()) return s;
    shape->channels = channels;
  }
  return ImageSize{shape->height, shape->width, shape->channels};
}

}  // namespace pstrain::data
