#include "data/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain::data {
namespace {

int64_t Clamp(int64_t i, int64_t size) { return std::min(size - 1, std::max<int64_t>(0, i)); }

// One output coordinate's two source neighbours and the weight of the
// second.
struct Lerp {
  int64_t lower = 0;
  int64_t upper = 0;
  float fraction = 0;
};

std::vector<Lerp> BilinearWeights(int64_t in, int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<Lerp> weights(out);
  for (int64_t o = 0; o < out; ++o) {
    const float at = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
    const float floor = std::floor(at);
    weights[o].lower = std::max<int64_t>(static_cast<int64_t>(floor), 0);
    weights[o].upper = std::min<int64_t>(static_cast<int64_t>(std::ceil(at)), in - 1);
    weights[o].fraction = at - floor;
  }
  return weights;
}

void Bilinear(const uint8_t* in, const ImageSize& size, int64_t out_h, int64_t out_w, float* out) {
  const int64_t c = size.channels;
  const std::vector<Lerp> ys = BilinearWeights(size.height, out_h);
  const std::vector<Lerp> xs = BilinearWeights(size.width, out_w);
  for (int64_t y = 0; y < out_h; ++y) {
    const uint8_t* top = in + ys[y].lower * size.width * c;
    const uint8_t* bottom = in + ys[y].upper * size.width * c;
    const float fy = ys[y].fraction;
    for (int64_t x = 0; x < out_w; ++x) {
      const int64_t left = xs[x].lower * c, right = xs[x].upper * c;
      const float fx = xs[x].fraction;
      for (int64_t k = 0; k < c; ++k) {
        const float tl = top[left + k], tr = top[right + k];
        const float bl = bottom[left + k], br = bottom[right + k];
        const float upper = tl + (tr - tl) * fx;
        const float lower = bl + (br - bl) * fx;
        *out++ = upper + (lower - upper) * fy;
      }
    }
  }
}

std::vector<int64_t> NearestIndices(int64_t in, int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<int64_t> at(out);
  for (int64_t o = 0; o < out; ++o) {
    at[o] = Clamp(static_cast<int64_t>(std::floor((static_cast<float>(o) + 0.5f) * scale)), in);
  }
  return at;
}

void Nearest(const uint8_t* in, const ImageSize& size, int64_t out_h, int64_t out_w, float* out) {
  const int64_t c = size.channels;
  const std::vector<int64_t> ys = NearestIndices(size.height, out_h);
  const std::vector<int64_t> xs = NearestIndices(size.width, out_w);
  for (int64_t y = 0; y < out_h; ++y) {
    const uint8_t* row = in + ys[y] * size.width * c;
    for (int64_t x = 0; x < out_w; ++x) {
      for (int64_t k = 0; k < c; ++k) *out++ = row[xs[x] * c + k];
    }
  }
}

// The source cells under output cell o and how much of each lies inside.
struct Span {
  std::vector<int64_t> cells;
  std::vector<float> weights;
};

std::vector<Span> AreaSpans(int64_t in, int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<Span> spans(out);
  for (int64_t o = 0; o < out; ++o) {
    const float begin = static_cast<float>(o) * scale;
    const float end = static_cast<float>(o + 1) * scale;
    const auto first = static_cast<int64_t>(std::floor(begin));
    const auto last = static_cast<int64_t>(std::ceil(end));
    for (int64_t i = first; i < last; ++i) {
      const float inside =
          std::min(static_cast<float>(i + 1), end) - std::max(static_cast<float>(i), begin);
      spans[o].cells.push_back(Clamp(i, in));
      spans[o].weights.push_back(inside);
    }
  }
  return spans;
}

void Area(const uint8_t* in, const ImageSize& size, int64_t out_h, int64_t out_w, float* out) {
  const int64_t c = size.channels;
  const std::vector<Span> ys = AreaSpans(size.height, out_h);
  const std::vector<Span> xs = AreaSpans(size.width, out_w);
  const float mean = 1.0f / ((static_cast<float>(size.height) / static_cast<float>(out_h)) *
                             (static_cast<float>(size.width) / static_cast<float>(out_w)));
  for (int64_t y = 0; y < out_h; ++y) {
    for (int64_t x = 0; x < out_w; ++x) {
      for (int64_t k = 0; k < c; ++k) {
        float sum = 0;
        for (size_t i = 0; i < ys[y].cells.size(); ++i) {
          const uint8_t* row = in + ys[y].cells[i] * size.width * c;
          float across = 0;
          for (size_t j = 0; j < xs[x].cells.size(); ++j) {
            across += static_cast<float>(row[xs[x].cells[j] * c + k]) * xs[x].weights[j];
          }
          sum += across * ys[y].weights[i];
        }
        *out++ = sum * mean;
      }
    }
  }
}

}  // namespace

absl::StatusOr<ResizeMethod> ParseResizeMethod(absl::string_view name) {
  if (name.empty() || name == "bilinear") return ResizeMethod::kBilinear;
  if (name == "nearest") return ResizeMethod::kNearest;
  if (name == "area") return ResizeMethod::kArea;
  return absl::InvalidArgumentError(
      absl::StrCat("resize \"", name, "\" is not one of bilinear, nearest, area"));
}

const char* ResizeMethodName(ResizeMethod method) {
  switch (method) {
    case ResizeMethod::kBilinear:
      return "bilinear";
    case ResizeMethod::kNearest:
      return "nearest";
    case ResizeMethod::kArea:
      return "area";
  }
  return "bilinear";
}

void ResizeImage(const uint8_t* in, const ImageSize& in_size, int64_t out_h, int64_t out_w,
                 ResizeMethod method, float* out) {
  switch (method) {
    case ResizeMethod::kBilinear:
      Bilinear(in, in_size, out_h, out_w, out);
      return;
    case ResizeMethod::kNearest:
      Nearest(in, in_size, out_h, out_w, out);
      return;
    case ResizeMethod::kArea:
      Area(in, in_size, out_h, out_w, out);
      return;
  }
}

}  // namespace pstrain::data
