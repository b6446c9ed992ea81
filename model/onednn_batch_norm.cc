#include "model/onednn_batch_norm.h"

#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/onednn_engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::model {

using dnnl::memory;
using Flags = dnnl::normalization_flags;

struct OneDnnBatchNorm::Stream {
  dnnl::stream stream{OneDnnCpuEngine()};
  ScratchpadArena scratchpad;
};

struct OneDnnBatchNorm::Primitives {
  dnnl::batch_normalization_forward training, inference;
  dnnl::batch_normalization_backward backward;
  std::string names;
  memory x, y, dx, dy, mean, variance, gamma, beta, d_gamma, d_beta;
  memory training_scratch, inference_scratch, backward_scratch;
};

OneDnnBatchNorm::OneDnnBatchNorm(int64_t channels, int64_t positions, float epsilon, bool scale,
                                 bool shift)
    : channels_(channels), positions_(positions), epsilon_(epsilon), scale_(scale), shift_(shift) {}
OneDnnBatchNorm::~OneDnnBatchNorm() = default;

absl::StatusOr<std::unique_ptr<OneDnnBatchNorm>> OneDnnBatchNorm::Create(
    int64_t channels, int64_t positions, float epsilon, bool scale, bool shift, int max_batch) {
  if (channels < 1 || positions < 1 || max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a batch normalization of ", channels,
                                                   " channels, ", positions, " positions and ",
                                                   max_batch, " examples"));
  }
  std::unique_ptr<OneDnnBatchNorm> bn(
      new OneDnnBatchNorm(channels, positions, epsilon, scale, shift));
  try {
    bn->stream_ = std::make_unique<Stream>();
  } catch (const dnnl::error& e) {
    return absl::UnavailableError(absl::StrCat("oneDNN has no CPU engine: ", e.what()));
  }
  auto built = bn->For(max_batch);
  if (!built.ok()) return built.status();
  return bn;
}

absl::StatusOr<OneDnnBatchNorm::Primitives*> OneDnnBatchNorm::For(int batch) {
  if (auto it = by_batch_.find(batch); it != by_batch_.end()) return it->second.get();
  const auto f32 = memory::data_type::f32;
  // [batch, positions, channels] row-major, seen as nhwc with w = 1.
  const memory::desc data_md({batch, channels_, positions_, 1}, f32, memory::format_tag::nhwc);
  const memory::desc stat_md({channels_}, f32, memory::format_tag::x);
  Flags affine = static_cast<Flags>(0);
  if (scale_) affine = affine | Flags::use_scale;
  if (shift_) affine = affine | Flags::use_shift;
  const dnnl::engine& engine = OneDnnCpuEngine();
  auto p = std::make_unique<Primitives>();
  try {
    const dnnl::primitive_attr attr = UserScratchpadAttr();
    const dnnl::batch_normalization_forward::primitive_desc training_pd(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, data_md,
                                                epsilon_, affine),
        attr, engine);
    const dnnl::batch_normalization_forward::primitive_desc inference_pd(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, data_md,
                                                epsilon_, affine | Flags::use_global_stats),
        attr, engine);
    const dnnl::batch_normalization_backward::primitive_desc backward_pd(
        dnnl::batch_normalization_backward::desc(
            scale_ || shift_ ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data, data_md,
            data_md, epsilon_, affine),
        engine, training_pd);
    p->training = dnnl::batch_normalization_forward(training_pd);
    p->inference = dnnl::batch_normalization_forward(inference_pd);
    p->backward = dnnl::batch_normalization_backward(backward_pd);
    p->names = absl::StrCat(training_pd.impl_info_str(), " / ", backward_pd.impl_info_str());
    p->training_scratch = stream_->scratchpad.Place(training_pd.scratchpad_desc());
    p->inference_scratch = stream_->scratchpad.Place(inference_pd.scratchpad_desc());
    p->backward_scratch = stream_->scratchpad.Place(backward_pd.scratchpad_desc());
    for (memory* m : {&p->x, &p->y, &p->dx, &p->dy}) *m = memory(data_md, engine, nullptr);
    for (memory* m : {&p->mean, &p->variance, &p->gamma, &p->beta, &p->d_gamma, &p->d_beta}) {
      *m = memory(stat_md, engine, nullptr);
    }
  } catch (const dnnl::error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("oneDNN cannot compute this batch normalization: ", e.what()));
  }
  Primitives* raw = p.get();
  by_batch_[batch] = std::move(p);
  return raw;
}

namespace {

void* Handle(const float* p) { return const_cast<float*>(p); }

}  // namespace

void OneDnnBatchNorm::ForwardTraining(const float* x, const float* gamma, const float* beta,
                                      int batch, float* y, float* mean, float* variance) {
  Forward(true, x, gamma, beta, mean, variance, batch, y);
}

void OneDnnBatchNorm::ForwardInference(const float* x, const float* gamma, const float* beta,
                                       const float* mean, const float* variance, int batch,
                                       float* y) {
  Forward(false, x, gamma, beta, const_cast<float*>(mean), const_cast<float*>(variance), batch, y);
}

void OneDnnBatchNorm::Forward(bool training, const float* x, const float* gamma, const float* beta,
                              float* mean, float* variance, int batch, float* y) {
  Primitives* p = *For(batch);
  p->x.set_data_handle(Handle(x));
  p->y.set_data_handle(y);
  p->mean.set_data_handle(mean);
  p->variance.set_data_handle(variance);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, p->x},
      {DNNL_ARG_DST, p->y},
      {DNNL_ARG_MEAN, p->mean},
      {DNNL_ARG_VARIANCE, p->variance},
      {DNNL_ARG_SCRATCHPAD, training ? p->training_scratch : p->inference_scratch}};
  if (scale_) {
    p->gamma.set_data_handle(Handle(gamma));
    args[DNNL_ARG_SCALE] = p->gamma;
  }
  if (shift_) {
    p->beta.set_data_handle(Handle(beta));
    args[DNNL_ARG_SHIFT] = p->beta;
  }
  (training ? p->training : p->inference).execute(stream_->stream, args);
  stream_->stream.wait();
}

void OneDnnBatchNorm::Backward(const float* x, const float* dy, const float* gamma,
                               const float* beta, const float* mean, const float* variance,
                               int batch, float* dx, float* d_gamma, float* d_beta) {
  Primitives* p = *For(batch);
  p->x.set_data_handle(Handle(x));
  p->dy.set_data_handle(Handle(dy));
  p->dx.set_data_handle(dx);
  p->mean.set_data_handle(Handle(mean));
  p->variance.set_data_handle(Handle(variance));
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, p->x},
                                          {DNNL_ARG_DIFF_DST, p->dy},
                                          {DNNL_ARG_DIFF_SRC, p->dx},
                                          {DNNL_ARG_MEAN, p->mean},
                                          {DNNL_ARG_VARIANCE, p->variance}};
  if (scale_) {
    p->gamma.set_data_handle(Handle(gamma));
    p->d_gamma.set_data_handle(d_gamma);
    args[DNNL_ARG_SCALE] = p->gamma;
    args[DNNL_ARG_DIFF_SCALE] = p->d_gamma;
  }
  if (shift_) {  // read or not, oneDNN wants beta
    p->beta.set_data_handle(Handle(beta));
    p->d_beta.set_data_handle(d_beta);
    args[DNNL_ARG_SHIFT] = p->beta;
    args[DNNL_ARG_DIFF_SHIFT] = p->d_beta;
  }
  args[DNNL_ARG_SCRATCHPAD] = p->backward_scratch;
  p->backward.execute(stream_->stream, args);
  stream_->stream.wait();
}

std::string OneDnnBatchNorm::Implementations(int batch) {
  auto p = For(batch);
  return p.ok() ? (*p)->names : std::string(p.status().message());
}

}  // namespace pstrain::model
