#include "model/batch_norm.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/onednn_batch_norm.h"

namespace pstrain::model {
namespace {

LayerSpec BatchNorm(bool center = true, bool scale = true) {
  LayerSpec s;
  s.kind = LayerKind::kBatchNormalization;
  s.name = "bn";
  s.center = center;
  s.scale = scale;
  return s;
}

// A layer over `batch` examples of `in`, its variables from offset 0 with
// random gamma and beta and moving statistics (variance above 0).
struct Fixture {
  Fixture(const LayerSpec& spec, const Shape& in, int batch) : spec(spec), in(in), batch(batch) {
    c = in.back();
    at = BatchNormVariableOffsets(spec, c, 0);
    params.resize(((spec.scale ? 1 : 0) + (spec.center ? 1 : 0) + 2) * c);
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& p : params) p = u(rng);
    for (int64_t ch = 0; ch < c; ++ch) params[at.moving_variance + ch] = 0.5f + 0.1f * ch;
    x.resize(batch * ShapeSize(in));
    // Channel ch's values around 2 ch with a spread of ch + 1: the
    // statistics differ per channel.
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t ch = static_cast<int64_t>(i) % c;
      x[i] = 2.0f * ch + (ch + 1) * u(rng);
    }
    w.resize(x.size());
    for (float& v : w) v = u(rng);
    layer = CreateBatchNormLayer(spec, in, batch, 0);
  }

  std::vector<float> Forward(bool training) {
    std::vector<float> out(x.size());
    layer->Forward(params.data(), x.data(), batch, training, out.data());
    return out;
  }
  double Loss() {
    const std::vector<float> out = Forward(true);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * w[i];
    return l;
  }
  // Backward after a training Forward, d_out = w.
  void Backward(std::vector<float>* grads, std::vector<float>* d_in) {
    const std::vector<float> out = Forward(true);
    std::vector<float> d_out = w;
    grads->assign(params.size(), -7.0f);  // every variable's entry is written
    d_in->assign(x.size(), 0.0f);
    layer->Backward(params.data(), x.data(), out.data(), d_out.data(), batch, grads->data(),
                    d_in->data());
  }
  float Gamma(int64_t ch) const { return at.gamma >= 0 ? params[at.gamma + ch] : 1.0f; }
  float Beta(int64_t ch) const { return at.beta >= 0 ? params[at.beta + ch] : 0.0f; }
  // Channel ch's batch mean and biased variance, in double.
  void Moments(int64_t ch, double* mean, double* var) const {
    double s = 0, ss = 0;
    int64_t m = 0;
    for (size_t i = ch; i < x.size(); i += c, ++m) s += x[i];
    *mean = s / m;
    for (size_t i = ch; i < x.size(); i += c) ss += (x[i] - *mean) * (x[i] - *mean);
    *var = ss / m;
  }
  int64_t ValuesPerChannel() const { return static_cast<int64_t>(x.size()) / c; }

  LayerSpec spec;
  Shape in;
  int batch;
  int64_t c = 0;
  BatchNormOffsets at;
  std::vector<float> params, x, w;
  std::unique_ptr<Layer> layer;
};

// Each test on oneDNN and on the reference loops.
class BatchNormTest : public ::testing::TestWithParam<CpuKernels> {
 protected:
  void SetUp() override { SetCpuKernels(GetParam()); }
  void TearDown() override { SetCpuKernels(CpuKernels::kOneDnn); }
};

TEST_P(BatchNormTest, TrainingNormalisesEachChannelWithTheBatchsStatistics) {
  for (const Shape& in : {Shape{3}, Shape{4, 3}, Shape{2, 3, 3}}) {
    SCOPED_TRACE(ShapeString(in));
    Fixture f(BatchNorm(), in, 5);
    const std::vector<float> out = f.Forward(true);
    for (int64_t ch = 0; ch < f.c; ++ch) {
      double mean = 0, var = 0;
      f.Moments(ch, &mean, &var);
      for (size_t i = ch; i < out.size(); i += f.c) {
        const double want =
            f.Gamma(ch) * (f.x[i] - mean) / std::sqrt(var + 1e-3) + f.Beta(ch);
        ASSERT_NEAR(out[i], want, 1e-5 * std::max(1.0, std::abs(want))) << "value " << i;
      }
    }
  }
}

TEST_P(BatchNormTest, InferenceUsesTheMovingStatistics) {
  Fixture f(BatchNorm(), {2, 2, 3}, 3);
  const std::vector<float> out = f.Forward(false);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t ch = static_cast<int64_t>(i) % f.c;
    const double want = f.Gamma(ch) * (f.x[i] - f.params[f.at.moving_mean + ch]) /
                            std::sqrt(f.params[f.at.moving_variance + ch] + 1e-3) +
                        f.Beta(ch);
    ASSERT_NEAR(out[i], want, 1e-5 * std::max(1.0, std::abs(want))) << "value " << i;
  }
}

TEST_P(BatchNormTest, GradientsMatchCentralDifferences) {
  struct Case {
    Shape in;
    bool center, scale;
  };
  for (const Case& k : {Case{{4}, true, true}, Case{{3, 2}, false, true},
                        Case{{3, 2, 2}, true, false}, Case{{2, 2, 3}, false, false}}) {
    SCOPED_TRACE(ShapeString(k.in) + (k.center ? " center" : "") + (k.scale ? " scale" : ""));
    Fixture f(BatchNorm(k.center, k.scale), k.in, 3);
    std::vector<float> grads, d_in;
    f.Backward(&grads, &d_in);
    constexpr float kEps = 1e-3f;
    auto numeric = [&](std::vector<float>* v, size_t i) {
      const float keep = (*v)[i];
      (*v)[i] = keep + kEps;
      const double up = f.Loss();
      (*v)[i] = keep - kEps;
      const double down = f.Loss();
      (*v)[i] = keep;
      return (up - down) / (2.0 * kEps);
    };
    // gamma and beta (the moving statistics' entries are increments,
    // checked below).
    for (int64_t i = 0; i < f.at.moving_mean; ++i) {
      const double n = numeric(&f.params, i);
      ASSERT_NEAR(grads[i], n, 2e-3 * std::max(1.0, std::abs(n))) << "variable " << i;
    }
    for (size_t i = 0; i < f.x.size(); ++i) {
      const double n = numeric(&f.x, i);
      ASSERT_NEAR(d_in[i], n, 2e-3 * std::max(1.0, std::abs(n))) << "input " << i;
    }
  }
}

// The moving statistics' entries hold what Keras's update adds: moving +
// increment = moving * momentum + batch_statistic * (1 - momentum), the
// variance unbiased for [H, W, C] inputs (Keras's fused kernel) and biased
// for the others.
TEST_P(BatchNormTest, BackwardWritesKerasMovingAverageUpdatesAsIncrements) {
  for (const Shape& in : {Shape{3}, Shape{2, 2, 3}}) {
    SCOPED_TRACE(ShapeString(in));
    LayerSpec spec = BatchNorm();
    spec.momentum = 0.9f;
    Fixture f(spec, in, 4);
    std::vector<float> grads, d_in;
    f.Backward(&grads, &d_in);
    const int64_t m = f.ValuesPerChannel();
    for (int64_t ch = 0; ch < f.c; ++ch) {
      double mean = 0, var = 0;
      f.Moments(ch, &mean, &var);
      if (in.size() == 3) var *= static_cast<double>(m) / (m - 1);
      const float mm = f.params[f.at.moving_mean + ch];
      const float mv = f.params[f.at.moving_variance + ch];
      EXPECT_NEAR(mm + grads[f.at.moving_mean + ch], 0.9 * mm + 0.1 * mean, 1e-5);
      EXPECT_NEAR(mv + grads[f.at.moving_variance + ch], 0.9 * mv + 0.1 * var, 1e-5);
    }
  }
}

// trainable: false, as Keras freezes a BatchNormalization: inference even
// in training, nothing of the layer moves, the input gradient through the
// moving statistics.
TEST_P(BatchNormTest, AFrozenLayerNormalisesWithTheMovingStatisticsAndMovesNothing) {
  LayerSpec spec = BatchNorm();
  spec.trainable = false;
  Fixture f(spec, {2, 3}, 3);
  const std::vector<float> in_training = f.Forward(true);
  EXPECT_EQ(in_training, f.Forward(false));
  std::vector<float> grads, d_in;
  f.Backward(&grads, &d_in);
  for (float g : grads) EXPECT_EQ(g, 0.0f);
  for (size_t i = 0; i < d_in.size(); ++i) {
    const int64_t ch = static_cast<int64_t>(i) % f.c;
    EXPECT_NEAR(d_in[i],
                f.w[i] * f.Gamma(ch) / std::sqrt(f.params[f.at.moving_variance + ch] + 1e-3),
                1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, BatchNormTest,
                         ::testing::Values(CpuKernels::kOneDnn, CpuKernels::kReference),
                         [](const ::testing::TestParamInfo<CpuKernels>& info) {
                           return std::string(CpuKernelsName(info.param));
                         });

TEST(OneDnnBatchNormTest, RunsOnAJitImplementation) {
  auto bn = OneDnnBatchNorm::Create(32, 36, 1e-3f, true, true, 8);
  ASSERT_TRUE(bn.ok()) << bn.status();
  // oneDNN's own loops are named "ref:..."; a jit one is what was built.
  EXPECT_EQ((*bn)->Implementations(8).find("ref"), std::string::npos)
      << (*bn)->Implementations(8);
  EXPECT_EQ(OneDnnBatchNorm::Create(0, 36, 1e-3f, true, true, 8).status().message(),
            "a batch normalization of 0 channels, 36 positions and 8 examples");
}

}  // namespace
}  // namespace pstrain::model
