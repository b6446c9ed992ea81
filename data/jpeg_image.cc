#include "data/jpeg_image.h"

#include <turbojpeg.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pstrain::data {
namespace {

struct HandleCloser {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using Handle = std::unique_ptr<void, HandleCloser>;

// One decompressor per thread: a handle holds libjpeg's state between
// calls, so it is never shared, and making one per image costs more than
// decoding a small one. After an error it is made anew: libjpeg's state
// after a failed decode is not one to start the next image from.
Handle& ThreadDecompressor() {
  thread_local Handle handle(tjInitDecompress());
  return handle;
}

absl::Status JpegError(tjhandle handle) {
  return absl::InvalidArgumentError(absl::StrCat("JPEG image: ", tjGetErrorStr2(handle)));
}

// The error of the thread's decompressor, which is then replaced.
absl::Status DecompressError() {
  Handle& handle = ThreadDecompressor();
  absl::Status error = JpegError(handle.get());
  handle.reset(tjInitDecompress());
  return error;
}

}  // namespace

bool LooksLikeJpeg(absl::string_view bytes) {
  return bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == 0xFF &&
         static_cast<uint8_t>(bytes[1]) == 0xD8 && static_cast<uint8_t>(bytes[2]) == 0xFF;
}

absl::StatusOr<JpegShape> DecodeJpeg(absl::string_view jpeg, int channels, int64_t max_values,
                                     std::vector<uint8_t>* pixels) {
  if (channels != 0 && channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG image: channels ", channels, " is not one of 0, 1, 3"));
  }
  if (!LooksLikeJpeg(jpeg)) return absl::InvalidArgumentError("not a JPEG image");
  tjhandle handle = ThreadDecompressor().get();
  if (handle == nullptr) return absl::InternalError("JPEG image: libjpeg-turbo could not start");
  const auto* data = reinterpret_cast<const unsigned char*>(jpeg.data());
  const auto size = static_cast<unsigned long>(jpeg.size());  // NOLINT(runtime/int): the API's
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, data, size, &width, &height, &subsampling, &colorspace) != 0) {
    return DecompressError();
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG image: CMYK (", colorspace == TJCS_CMYK ? "CMYK" : "YCCK",
                     " colour space) is not supported; convert it to RGB"));
  }
  JpegShape shape;
  shape.height = height;
  shape.width = width;
  shape.channels = channels != 0 ? channels : (colorspace == TJCS_GRAY ? 1 : 3);
  if (width <= 0 || height <= 0 || shape.values() > max_values) {
    return absl::InvalidArgumentError(absl::StrCat("JPEG image: ", height, "x", width, "x",
                                                   shape.channels, " is more than ", max_values,
                                                   " values"));
  }
  pixels->resize(static_cast<size_t>(shape.values()));
  const int format = shape.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  // TJFLAG_ACCURATEDCT is libjpeg's JDCT_ISLOW, TensorFlow's default;
  // TJFLAG_LIMITSCANS refuses a progressive image of more than 500 scans
  // (one crafted to take minutes).
  if (tjDecompress2(handle, data, size, pixels->data(), width, 0, height, format,
                    TJFLAG_ACCURATEDCT | TJFLAG_LIMITSCANS) != 0) {
    if (tjGetErrorCode(handle) == TJERR_FATAL) return DecompressError();
    // A warning: the image decoded. Data that ends before the image does
    // is the one TensorFlow refuses (libjpeg filled the rest with grey).
    const std::string message = tjGetErrorStr2(handle);
    if (absl::StrContains(message, "Premature end")) {
      ThreadDecompressor().reset(tjInitDecompress());
      return absl::InvalidArgumentError(absl::StrCat("JPEG image: truncated (", message, ")"));
    }
  }
  return shape;
}

absl::StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int64_t height, int64_t width,
                                       int channels, const JpegOptions& options) {
  if (channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("a JPEG image has 1 or 3 channels, not ", channels));
  }
  if (height < 1 || width < 1 || height > 65500 || width > 65500) {
    return absl::InvalidArgumentError(
        absl::StrCat("a JPEG image of ", height, "x", width, " is out of range (1..65500 a side)"));
  }
  if (options.quality < 1 || options.quality > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG quality ", options.quality, " is not in 1..100"));
  }
  Handle handle(tjInitCompress());
  if (handle == nullptr) return absl::InternalError("JPEG image: libjpeg-turbo could not start");
  unsigned char* out = nullptr;
  unsigned long out_size = 0;  // NOLINT(runtime/int): the API's
  const int rc = tjCompress2(handle.get(), pixels, static_cast<int>(width), 0,
                             static_cast<int>(height), channels == 1 ? TJPF_GRAY : TJPF_RGB, &out,
                             &out_size, channels == 1 ? TJSAMP_GRAY : TJSAMP_420, options.quality,
                             TJFLAG_ACCURATEDCT | (options.progressive ? TJFLAG_PROGRESSIVE : 0));
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(out, tjFree);
  if (rc != 0) return JpegError(handle.get());
  return std::string(reinterpret_cast<const char*>(out), out_size);
}

}  // namespace pstrain::data
