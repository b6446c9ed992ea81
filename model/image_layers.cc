#include "model/image_layers.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "model/activations.h"
#include "model/onednn_eltwise.h"

namespace pstrain::model {
namespace {

// Calls f(offset of the cell's first channel in the example, the kernel
// tap i * kw + j) for each cell of output position (oy, ox)'s window that
// lies inside the input.
template <typename F>
void ForEachCell(const PstrainWindow& g, int64_t oy, int64_t ox, F f) {
  for (int i = 0; i < g.kh; ++i) {
    const int64_t y = oy * g.sh - g.pad_top + i;
    if (y < 0 || y >= g.h) continue;
    for (int j = 0; j < g.kw; ++j) {
      const int64_t x = ox * g.sw - g.pad_left + j;
      if (x < 0 || x >= g.w) continue;
      f((y * g.w + x) * g.c, static_cast<int64_t>(i) * g.kw + j);
    }
  }
}

class GlobalPool2DLayer final : public Layer {
 public:
  GlobalPool2DLayer(const LayerSpec& spec, const Shape& in, const Shape& out)
      : Layer(spec, in, out),
        positions_(in[0] * in[1]),
        max_(spec.kind == LayerKind::kGlobalMaxPool2D) {}

  void Forward(const float*, const float* in, int batch, bool training, float* out) override {
    const int64_t c = out_size_;
    if (max_ && training && argmax_.size() < static_cast<size_t>(batch * c)) {
      argmax_.resize(batch * c);
    }
    const float inv = 1.0f / static_cast<float>(positions_);
    for (int e = 0; e < batch; ++e) {
      const float* x = in + e * in_size_;
      float* o = out + e * c;
      std::copy(x, x + c, o);
      int32_t* arg = max_ && training ? argmax_.data() + e * c : nullptr;
      if (arg != nullptr) std::fill(arg, arg + c, 0);
      for (int64_t p = 1; p < positions_; ++p) {
        const float* v = x + p * c;
        if (!max_) {
          for (int64_t ch = 0; ch < c; ++ch) o[ch] += v[ch];
        } else if (arg != nullptr) {
          for (int64_t ch = 0; ch < c; ++ch) {
            if (v[ch] > o[ch]) {
              o[ch] = v[ch];
              arg[ch] = static_cast<int32_t>(p);
            }
          }
        } else {
          for (int64_t ch = 0; ch < c; ++ch) o[ch] = std::max(o[ch], v[ch]);
        }
      }
      if (!max_) {
        for (int64_t ch = 0; ch < c; ++ch) o[ch] *= inv;
      }
    }
  }

  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in == nullptr) return;
    const int64_t c = out_size_;
    const float inv = 1.0f / static_cast<float>(positions_);
    for (int e = 0; e < batch; ++e) {
      const float* d = d_out + e * c;
      float* di = d_in + e * in_size_;
      if (max_) {
        std::fill(di, di + in_size_, 0.0f);
        const int32_t* arg = argmax_.data() + e * c;
        for (int64_t ch = 0; ch < c; ++ch) di[arg[ch] * c + ch] = d[ch];
        continue;
      }
      for (int64_t p = 0; p < positions_; ++p) {
        for (int64_t ch = 0; ch < c; ++ch) di[p * c + ch] = d[ch] * inv;
      }
    }
  }

 private:
  const int64_t positions_;
  const bool max_;
  std::vector<int32_t> argmax_;  // per output value: the position it came from
};

class AveragePool2DLayer final : public Layer {
 public:
  AveragePool2DLayer(const LayerSpec& spec, const Shape& in, const Shape& out)
      : Layer(spec, in, out), g_(LayerWindow(spec, in)) {
    // Each output position's share: 1 / the cells of its window inside
    // the input.
    for (int64_t oy = 0; oy < g_.oh; ++oy) {
      for (int64_t ox = 0; ox < g_.ow; ++ox) {
        int64_t cells = 0;
        ForEachCell(g_, oy, ox, [&cells](int64_t, int64_t) { ++cells; });
        share_.push_back(1.0f / static_cast<float>(std::max<int64_t>(cells, 1)));
      }
    }
  }

  void Forward(const float*, const float* in, int batch, bool, float* out) override {
    const int64_t c = g_.c;
    for (int e = 0; e < batch; ++e) {
      const float* x = in + e * in_size_;
      for (int64_t oy = 0; oy < g_.oh; ++oy) {
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          float* o = out + e * out_size_ + (oy * g_.ow + ox) * c;
          std::fill(o, o + c, 0.0f);
          ForEachCell(g_, oy, ox, [&](int64_t at, int64_t) {
            for (int64_t ch = 0; ch < c; ++ch) o[ch] += x[at + ch];
          });
          const float s = share_[oy * g_.ow + ox];
          for (int64_t ch = 0; ch < c; ++ch) o[ch] *= s;
        }
      }
    }
  }

  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in == nullptr) return;
    const int64_t c = g_.c;
    std::fill(d_in, d_in + batch * in_size_, 0.0f);
    for (int e = 0; e < batch; ++e) {
      float* di = d_in + e * in_size_;
      for (int64_t oy = 0; oy < g_.oh; ++oy) {
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          const float* d = d_out + e * out_size_ + (oy * g_.ow + ox) * c;
          const float s = share_[oy * g_.ow + ox];
          ForEachCell(g_, oy, ox, [&](int64_t at, int64_t) {
            for (int64_t ch = 0; ch < c; ++ch) di[at + ch] += d[ch] * s;
          });
        }
      }
    }
  }

 private:
  const PstrainWindow g_;
  std::vector<float> share_;
};

class ZeroPadding2DLayer final : public Layer {
 public:
  ZeroPadding2DLayer(const LayerSpec& spec, const Shape& in, const Shape& out)
      : Layer(spec, in, out) {}

  void Forward(const float*, const float* in, int batch, bool, float* out) override {
    std::fill(out, out + batch * out_size_, 0.0f);
    const int64_t h = in_[0], w = in_[1], c = in_[2], ow = out_[1];
    const int top = spec_.padding[0], left = spec_.padding[2];
    for (int e = 0; e < batch; ++e) {
      for (int64_t y = 0; y < h; ++y) {
        std::memcpy(out + e * out_size_ + ((y + top) * ow + left) * c,
                    in + e * in_size_ + y * w * c, w * c * sizeof(float));
      }
    }
  }

  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in == nullptr) return;
    const int64_t h = in_[0], w = in_[1], c = in_[2], ow = out_[1];
    const int top = spec_.padding[0], left = spec_.padding[2];
    for (int e = 0; e < batch; ++e) {
      for (int64_t y = 0; y < h; ++y) {
        std::memcpy(d_in + e * in_size_ + y * w * c,
                    d_out + e * out_size_ + ((y + top) * ow + left) * c, w * c * sizeof(float));
      }
    }
  }
};

class DepthwiseConv2DLayer final : public Layer {
 public:
  DepthwiseConv2DLayer(const LayerSpec& spec, const Shape& in, const Shape& out,
                       int64_t kernel_at, int64_t bias_at)
      : Layer(spec, in, out),
        g_(LayerWindow(spec, in)),
        m_(spec.depth_multiplier),
        kernel_at_(kernel_at),
        bias_at_(bias_at),
        activation_(spec.relu ? Activation::kRelu : spec.activation) {}

  void Forward(const float* params, const float* in, int batch, bool, float* out) override {
    const int64_t c = g_.c, oc = c * m_;
    const float* w = params + kernel_at_;
    for (int e = 0; e < batch; ++e) {
      const float* x = in + e * in_size_;
      for (int64_t oy = 0; oy < g_.oh; ++oy) {
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          float* __restrict o = out + e * out_size_ + (oy * g_.ow + ox) * oc;
          if (bias_at_ >= 0) {
            std::copy(params + bias_at_, params + bias_at_ + oc, o);
          } else {
            std::fill(o, o + oc, 0.0f);
          }
          ForEachCell(g_, oy, ox, [&](int64_t at, int64_t tap) {
            const float* __restrict v = x + at;
            const float* __restrict k = w + tap * oc;
            if (m_ == 1) {
              for (int64_t ch = 0; ch < c; ++ch) o[ch] += v[ch] * k[ch];
              return;
            }
            for (int64_t ch = 0; ch < c; ++ch) {
              for (int j = 0; j < m_; ++j) o[ch * m_ + j] += v[ch] * k[ch * m_ + j];
            }
          });
        }
      }
    }
    activation_.Forward(batch * out_size_, out);
  }

  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    const int64_t c = g_.c, oc = c * m_;
    activation_.Backward(batch * out_size_, out, d_out);
    const float* w = params + kernel_at_;
    float* gw = grads + kernel_at_;
    std::fill(gw, gw + g_.kh * g_.kw * oc, 0.0f);
    float* gb = bias_at_ >= 0 ? grads + bias_at_ : nullptr;
    if (gb != nullptr) std::fill(gb, gb + oc, 0.0f);
    if (d_in != nullptr) std::fill(d_in, d_in + batch * in_size_, 0.0f);
    for (int e = 0; e < batch; ++e) {
      const float* x = in + e * in_size_;
      float* dx = d_in == nullptr ? nullptr : d_in + e * in_size_;
      for (int64_t oy = 0; oy < g_.oh; ++oy) {
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          const float* __restrict d = d_out + e * out_size_ + (oy * g_.ow + ox) * oc;
          if (gb != nullptr) {
            for (int64_t j = 0; j < oc; ++j) gb[j] += d[j];
          }
          ForEachCell(g_, oy, ox, [&](int64_t at, int64_t tap) {
            const float* __restrict v = x + at;
            const float* __restrict k = w + tap * oc;
            float* __restrict gk = gw + tap * oc;
            for (int64_t ch = 0; ch < c; ++ch) {
              float back = 0;
              for (int j = 0; j < m_; ++j) {
                gk[ch * m_ + j] += v[ch] * d[ch * m_ + j];
                back += k[ch * m_ + j] * d[ch * m_ + j];
              }
              if (dx != nullptr) dx[at + ch] += back;
            }
          });
        }
      }
    }
  }

 private:
  const PstrainWindow g_;
  const int m_;
  const int64_t kernel_at_, bias_at_;
  ActivationPass activation_;
};

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(const LayerSpec& spec, const Shape& in, const Shape& out)
      : Layer(spec, in, out), activation_(spec.activation) {
    if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
      auto made = OneDnnEltwise::Create(activation_);
      if (made.ok()) onednn_ = *std::move(made);
    }
  }

  bool on_onednn() const override { return onednn_ != nullptr; }

  void Forward(const float*, const float* in, int batch, bool, float* out) override {
    if (onednn_ != nullptr) {
      onednn_->Forward(in, out, batch * in_size_);
      return;
    }
    Activate(activation_, in, out, batch * in_size_);
  }

  void Backward(const float*, const float* in, const float* out, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in == nullptr) return;
    const int64_t n = batch * in_size_;
    if (onednn_ != nullptr) {
      onednn_->Backward(in, out, d_out, d_in, n);
      return;
    }
    ActivationBackward(activation_, in, out, d_out, n);
    std::memcpy(d_in, d_out, n * sizeof(float));
  }

 private:
  const Activation activation_;
  std::unique_ptr<OneDnnEltwise> onednn_;  // null: the reference loops
};

class RescalingLayer final : public Layer {
 public:
  RescalingLayer(const LayerSpec& spec, const Shape& in) : Layer(spec, in, in) {}

  void Forward(const float*, const float* in, int batch, bool, float* out) override {
    const float scale = spec_.rescale, offset = spec_.offset;
    const int64_t n = batch * in_size_;
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * scale + offset;
  }

  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in == nullptr) return;
    const float scale = spec_.rescale;
    const int64_t n = batch * in_size_;
    for (int64_t i = 0; i < n; ++i) d_in[i] = d_out[i] * scale;
  }
};

}  // namespace

std::unique_ptr<Layer> CreateRescalingLayer(const LayerSpec& spec, const Shape& in) {
  return std::make_unique<RescalingLayer>(spec, in);
}

std::unique_ptr<Layer> CreateGlobalPool2DLayer(const LayerSpec& spec, const Shape& in,
                                               const Shape& out) {
  return std::make_unique<GlobalPool2DLayer>(spec, in, out);
}

std::unique_ptr<Layer> CreateAveragePool2DLayer(const LayerSpec& spec, const Shape& in,
                                                const Shape& out) {
  return std::make_unique<AveragePool2DLayer>(spec, in, out);
}

std::unique_ptr<Layer> CreateZeroPadding2DLayer(const LayerSpec& spec, const Shape& in,
                                                const Shape& out) {
  return std::make_unique<ZeroPadding2DLayer>(spec, in, out);
}

std::unique_ptr<Layer> CreateDepthwiseConv2DLayer(const LayerSpec& spec, const Shape& in,
                                                  const Shape& out, int64_t kernel_at,
                                                  int64_t bias_at) {
  return std::make_unique<DepthwiseConv2DLayer>(spec, in, out, kernel_at, bias_at);
}

std::unique_ptr<Layer> CreateActivationLayer(const LayerSpec& spec, const Shape& in,
                                             const Shape& out) {
  return std::make_unique<ActivationLayer>(spec, in, out);
}

}  // namespace pstrain::model
