#include "data/png_image.h"

#include <png.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain::data {
namespace {

constexpr int kSignatureBytes = 8;
constexpr png_uint_32 kMaxSide = 1 << 16;

// libpng reports an error by calling this, which must not return: it keeps
// the message and jumps back to the setjmp of the call in progress.
struct ErrorState {
  char message[256] = "";
};

void OnError(png_structp png, png_const_charp message) {
  auto* state = static_cast<ErrorState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}

struct MemoryReader {
  const unsigned char* data;
  size_t size;
  size_t at;
};

void ReadFromMemory(png_structp png, png_bytep out, size_t n) {
  auto* reader = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (n > reader->size - reader->at) png_error(png, "the image data ends early");
  std::memcpy(out, reader->data + reader->at, n);
  reader->at += n;
}

// What the decode found, filled in by DecodeWithLibpng.
struct DecodeResult {
  PngShape shape;
  bool too_large = false;
};

// The libpng calls, in a function whose own locals are all trivial: a
// longjmp back to its setjmp skips no destructor. `pixels` and `rows` live
// in the caller. Returns false with the message in `error`.
bool DecodeWithLibpng(MemoryReader* reader, int64_t max_values, ErrorState* error,
                      DecodeResult* result, std::vector<uint8_t>* pixels,
                      std::vector<png_bytep>* rows) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, error, OnError, OnWarning);
  if (png == nullptr) {
    std::snprintf(error->message, sizeof(error->message), "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(error->message, sizeof(error->message), "libpng could not start");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, reader, ReadFromMemory);
  png_set_user_limits(png, kMaxSide, kMaxSide);
  png_read_info(png, info);
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, nullptr, nullptr, nullptr);
  // tf.io.decode_png with channels 0: a palette becomes RGB, or RGBA where
  // it has transparency; gray and RGB keep their channels (a tRNS chunk of
  // theirs is not turned into alpha).
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS) != 0) png_set_tRNS_to_alpha(png);
  }
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16) png_set_scale_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  result->shape.height = height;
  result->shape.width = width;
  result->shape.channels = png_get_channels(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  if (result->shape.values() > max_values ||
      row_bytes != static_cast<size_t>(width) * result->shape.channels) {
    result->too_large = result->shape.values() > max_values;
    if (!result->too_large) std::snprintf(error->message, sizeof(error->message), "bad row size");
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  pixels->resize(static_cast<size_t>(result->shape.values()));
  rows->resize(height);
  for (png_uint_32 y = 0; y < height; ++y) (*rows)[y] = pixels->data() + y * row_bytes;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

struct StringWriter {
  std::string* out;
};

void WriteToString(png_structp png, png_bytep data, size_t n) {
  auto* writer = static_cast<StringWriter*>(png_get_io_ptr(png));
  writer->out->append(reinterpret_cast<const char*>(data), n);
}

void FlushNothing(png_structp) {}

bool EncodeWithLibpng(const std::vector<png_bytep>& rows, png_uint_32 width, png_uint_32 height,
                      int color_type, ErrorState* error, StringWriter* writer) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, error, OnError, OnWarning);
  if (png == nullptr) {
    std::snprintf(error->message, sizeof(error->message), "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    std::snprintf(error->message, sizeof(error->message), "libpng could not start");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, writer, WriteToString, FlushNothing);
  png_set_IHDR(png, info, width, height, 8, color_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, const_cast<png_bytepp>(rows.data()));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

bool LooksLikePng(absl::string_view bytes) {
  return bytes.size() >= kSignatureBytes &&
         png_sig_cmp(reinterpret_cast<const unsigned char*>(bytes.data()), 0, kSignatureBytes) == 0;
}

absl::StatusOr<PngShape> DecodePng(absl::string_view png, int64_t max_values,
                                   std::vector<uint8_t>* pixels) {
  const auto* data = reinterpret_cast<const unsigned char*>(png.data());
  if (!LooksLikePng(png)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PNG image (", png.size(), " bytes without PNG's signature)"));
  }
  MemoryReader reader{data, png.size(), 0};
  ErrorState error;
  DecodeResult result;
  std::vector<png_bytep> rows;
  if (!DecodeWithLibpng(&reader, max_values, &error, &result, pixels, &rows)) {
    if (result.too_large) {
      return absl::InvalidArgumentError(
          absl::StrCat("a PNG image of ", result.shape.height, "x", result.shape.width, "x",
                       result.shape.channels, " has ", result.shape.values(),
                       " values, more than the ", max_values, " it may have"));
    }
    return absl::InvalidArgumentError(absl::StrCat("PNG image: ", error.message));
  }
  return result.shape;
}

absl::StatusOr<std::string> EncodePng(const uint8_t* pixels, int64_t height, int64_t width,
                                      int channels) {
  if (height < 1 || width < 1 || height > kMaxSide || width > kMaxSide || channels < 1 ||
      channels > 4) {
    return absl::InvalidArgumentError(absl::StrCat("a PNG image of ", height, "x", width, "x",
                                                   channels,
                                                   ": sides must be in 1..65536, channels 1..4"));
  }
  static constexpr int kColorTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                        PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) {
    rows[y] = const_cast<png_bytep>(pixels + y * width * channels);
  }
  std::string out;
  StringWriter writer{&out};
  ErrorState error;
  if (!EncodeWithLibpng(rows, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height),
                        kColorTypes[channels - 1], &error, &writer)) {
    return absl::InternalError(absl::StrCat("PNG encoding: ", error.message));
  }
  return out;
}

}  // namespace pstrain::data
