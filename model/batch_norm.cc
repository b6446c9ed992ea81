#include "model/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "model/onednn_batch_norm.h"

namespace pstrain::model {

BatchNormOffsets BatchNormVariableOffsets(const LayerSpec& spec, int64_t channels, int64_t at) {
  BatchNormOffsets o;
  if (spec.scale) {
    o.gamma = at;
    at += channels;
  }
  if (spec.center) {
    o.beta = at;
    at += channels;
  }
  o.moving_mean = at;
  o.moving_variance = at + channels;
  return o;
}

namespace {

class BatchNormLayer final : public Layer {
 public:
  BatchNormLayer(const LayerSpec& spec, const Shape& in, int max_batch, int64_t at)
      : Layer(spec, in, in),
        c_(in.back()),
        at_(BatchNormVariableOffsets(spec, c_, at)),
        fused_(in.size() == 3),
        mean_(c_),
        inv_std_(c_),
        variance_(c_),
        a_(c_),
        b_(c_),
        sum_dy_(c_),
        sum_dy_xhat_(c_),
        acc_(c_),
        acc_dy_(c_) {
    if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
      auto made = OneDnnBatchNorm::Create(c_, in_size_ / c_, spec.epsilon, spec.scale,
                                          spec.center, max_batch);
      if (made.ok()) onednn_ = *std::move(made);
    }
  }

  bool on_onednn() const override { return onednn_ != nullptr; }

  void Forward(const float* params, const float* in, int batch, bool training,
               float* out) override {
    const int64_t rows = batch * (in_size_ / c_);
    batch_stats_ = training && spec_.trainable;
    const float* gamma = at_.gamma >= 0 ? params + at_.gamma : nullptr;
    const float* beta = at_.beta >= 0 ? params + at_.beta : nullptr;
    if (onednn_ != nullptr) {
      if (batch_stats_) {
        rows_ = rows;
        onednn_->ForwardTraining(in, gamma, beta, batch, out, mean_.data(), variance_.data());
        return;
      }
      onednn_->ForwardInference(in, gamma, beta, params + at_.moving_mean,
                                params + at_.moving_variance, batch, out);
      // What a frozen layer's Backward scales by.
      for (int64_t ch = 0; ch < c_; ++ch) {
        const float inv_std = 1.0f / std::sqrt(params[at_.moving_variance + ch] + spec_.epsilon);
        a_[ch] = (gamma != nullptr ? gamma[ch] : 1.0f) * inv_std;
      }
      return;
    }
    if (batch_stats_) {
      rows_ = rows;
      // Two passes in double: the mean, then the mean squared deviation.
      std::fill(acc_.begin(), acc_.end(), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict x = in + r * c_;
        for (int64_t ch = 0; ch < c_; ++ch) acc_[ch] += x[ch];
      }
      for (int64_t ch = 0; ch < c_; ++ch) mean_[ch] = static_cast<float>(acc_[ch] / rows);
      std::fill(acc_.begin(), acc_.end(), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict x = in + r * c_;
        for (int64_t ch = 0; ch < c_; ++ch) {
          const double d = static_cast<double>(x[ch]) - mean_[ch];
          acc_[ch] += d * d;
        }
      }
      for (int64_t ch = 0; ch < c_; ++ch) {
        variance_[ch] = static_cast<float>(acc_[ch] / rows);
        inv_std_[ch] = 1.0f / std::sqrt(variance_[ch] + spec_.epsilon);
      }
    } else {
      const float* mm = params + at_.moving_mean;
      const float* mv = params + at_.moving_variance;
      for (int64_t ch = 0; ch < c_; ++ch) {
        mean_[ch] = mm[ch];
        inv_std_[ch] = 1.0f / std::sqrt(mv[ch] + spec_.epsilon);
      }
    }
    // y = x * a + b per channel.
    for (int64_t ch = 0; ch < c_; ++ch) {
      const float gamma = at_.gamma >= 0 ? params[at_.gamma + ch] : 1.0f;
      const float beta = at_.beta >= 0 ? params[at_.beta + ch] : 0.0f;
      a_[ch] = gamma * inv_std_[ch];
      b_[ch] = beta - mean_[ch] * a_[ch];
    }
    const float* __restrict a = a_.data();
    const float* __restrict b = b_.data();
    for (int64_t r = 0; r < rows; ++r) {
      const float* __restrict x = in + r * c_;
      float* __restrict y = out + r * c_;
      for (int64_t ch = 0; ch < c_; ++ch) y[ch] = x[ch] * a[ch] + b[ch];
    }
  }

  void Backward(const float* params, const float* in, const float*, float* d_out, int batch,
                float* grads, float* d_in) override {
    const int64_t rows = batch * (in_size_ / c_);
    if (!batch_stats_) {
      // Fixed statistics (a frozen layer): y is affine in x; nothing of the
      // layer's moves.
      ZeroVariables(grads);
      if (d_in == nullptr) return;
      for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict dy = d_out + r * c_;
        float* __restrict dx = d_in + r * c_;
        for (int64_t ch = 0; ch < c_; ++ch) dx[ch] = dy[ch] * a_[ch];
      }
      return;
    }
    if (onednn_ != nullptr) {
      BackwardOnOneDnn(params, in, d_out, batch, grads, d_in);
      return;
    }
    // xhat = (x - mean) * inv_std; dgamma = sum(dy * xhat), dbeta = sum(dy);
    // dx = gamma * inv_std / M * (M dy - sum(dy) - xhat sum(dy xhat)).
    std::fill(acc_.begin(), acc_.end(), 0.0);
    std::vector<double>& sum_dy = acc_dy_;
    std::fill(sum_dy.begin(), sum_dy.end(), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* __restrict x = in + r * c_;
      const float* __restrict dy = d_out + r * c_;
      for (int64_t ch = 0; ch < c_; ++ch) {
        sum_dy[ch] += dy[ch];
        acc_[ch] += static_cast<double>(dy[ch]) * ((x[ch] - mean_[ch]) * inv_std_[ch]);
      }
    }
    for (int64_t ch = 0; ch < c_; ++ch) {
      sum_dy_[ch] = static_cast<float>(sum_dy[ch]);
      sum_dy_xhat_[ch] = static_cast<float>(acc_[ch]);
    }
    if (at_.gamma >= 0) std::copy(sum_dy_xhat_.begin(), sum_dy_xhat_.end(), grads + at_.gamma);
    if (at_.beta >= 0) std::copy(sum_dy_.begin(), sum_dy_.end(), grads + at_.beta);
    MovingIncrements(params, grads);
    if (d_in == nullptr) return;
    const float inv_rows = 1.0f / static_cast<float>(rows);
    for (int64_t ch = 0; ch < c_; ++ch) {
      const float gamma = at_.gamma >= 0 ? params[at_.gamma + ch] : 1.0f;
      a_[ch] = gamma * inv_std_[ch];  // the scale of dx
      sum_dy_[ch] *= inv_rows;        // mean(dy)
      sum_dy_xhat_[ch] *= inv_rows;   // mean(dy xhat)
    }
    const float* __restrict scale = a_.data();
    const float* __restrict mean_dy = sum_dy_.data();
    const float* __restrict mean_dy_xhat = sum_dy_xhat_.data();
    const float* __restrict mu = mean_.data();
    const float* __restrict inv_std = inv_std_.data();
    for (int64_t r = 0; r < rows; ++r) {
      const float* __restrict x = in + r * c_;
      const float* __restrict dy = d_out + r * c_;
      float* __restrict dx = d_in + r * c_;
      for (int64_t ch = 0; ch < c_; ++ch) {
        const float xhat = (x[ch] - mu[ch]) * inv_std[ch];
        dx[ch] = scale[ch] * (dy[ch] - mean_dy[ch] - xhat * mean_dy_xhat[ch]);
      }
    }
  }

 private:
  // The moving statistics' increments (model/batch_norm.h), from the last
  // Forward's batch statistics.
  void MovingIncrements(const float* params, float* grads) const {
    const float keep = 1.0f - spec_.momentum;
    const float bessel =
        fused_ && rows_ > 1 ? static_cast<float>(static_cast<double>(rows_) / (rows_ - 1)) : 1.0f;
    for (int64_t ch = 0; ch < c_; ++ch) {
      grads[at_.moving_mean + ch] = keep * (mean_[ch] - params[at_.moving_mean + ch]);
      grads[at_.moving_variance + ch] =
          keep * (variance_[ch] * bessel - params[at_.moving_variance + ch]);
    }
  }

  // Backward with the batch's statistics on oneDNN.
  void BackwardOnOneDnn(const float* params, const float* in, const float* d_out, int batch,
                        float* grads, float* d_in) {
    if (d_in == nullptr) {  // the gradients of gamma and beta alone: dx into scratch
      scratch_.resize(static_cast<size_t>(batch) * in_size_);
      d_in = scratch_.data();
    }
    onednn_->Backward(in, d_out, at_.gamma >= 0 ? params + at_.gamma : nullptr,
                      at_.beta >= 0 ? params + at_.beta : nullptr, mean_.data(),
                      variance_.data(), batch, d_in, at_.gamma >= 0 ? grads + at_.gamma : nullptr,
                      at_.beta >= 0 ? grads + at_.beta : nullptr);
    MovingIncrements(params, grads);
  }

  void ZeroVariables(float* grads) const {
    for (int64_t at : {at_.gamma, at_.beta, at_.moving_mean, at_.moving_variance}) {
      if (at >= 0) std::fill(grads + at, grads + at + c_, 0.0f);
    }
  }

  const int64_t c_;
  const BatchNormOffsets at_;
  const bool fused_;  // [H, W, C]: Keras's fused kernel (unbiased moving variance)
  // The last Forward's: whether it used the batch's statistics, over how
  // many values per channel, and per channel its mean, 1 / std, biased
  // variance and y = x * a + b.
  bool batch_stats_ = false;
  int64_t rows_ = 0;
  std::vector<float> mean_, inv_std_, variance_, a_, b_;
  std::vector<float> sum_dy_, sum_dy_xhat_;
  std::vector<double> acc_, acc_dy_;
  std::unique_ptr<OneDnnBatchNorm> onednn_;  // null: the loops above
  std::vector<float> scratch_;
};

}  // namespace

std::unique_ptr<Layer> CreateBatchNormLayer(const LayerSpec& spec, const Shape& in, int max_batch,
                                            int64_t variables_at) {
  return std::make_unique<BatchNormLayer>(spec, in, max_batch, variables_at);
}

}  // namespace pstrain::model
