#include "model/onednn_eltwise.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/onednn_engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::model {

namespace {

using dnnl::algorithm;
using dnnl::memory;

// oneDNN's form of each activation: the algorithm, its alpha and beta, and
// whether its derivative reads the output (else the input).
struct Form {
  algorithm alg;
  float alpha = 0, beta = 0;
  bool from_output = true;
};

bool FormOf(Activation a, Form* form) {
  switch (a) {
    case Activation::kRelu:
      *form = {algorithm::eltwise_relu_use_dst_for_bwd};
      return true;
    case Activation::kRelu6:
      *form = {algorithm::eltwise_clip_v2_use_dst_for_bwd, 0.0f, 6.0f};
      return true;
    case Activation::kSigmoid:
      *form = {algorithm::eltwise_logistic_use_dst_for_bwd};
      return true;
    case Activation::kTanh:
      *form = {algorithm::eltwise_tanh_use_dst_for_bwd};
      return true;
    case Activation::kElu:
      *form = {algorithm::eltwise_elu_use_dst_for_bwd, 1.0f};
      return true;
    case Activation::kGelu:
      *form = {algorithm::eltwise_gelu_erf, 0.0f, 0.0f, false};
      return true;
    case Activation::kSwish:
      *form = {algorithm::eltwise_swish, 1.0f, 0.0f, false};
      return true;
    case Activation::kLinear:
    case Activation::kSelu:  // oneDNN's selu has no form from the output; the reference serves
    case Activation::kSoftmax:
      return false;
  }
  return false;
}

}  // namespace

struct OneDnnEltwise::Stream {
  dnnl::stream stream{OneDnnCpuEngine()};
  ScratchpadArena scratchpad;
};

struct OneDnnEltwise::Primitives {
  dnnl::eltwise_forward forward;
  dnnl::eltwise_backward backward;
  std::string names;
  memory z, out, d_out, d_z, forward_scratch, backward_scratch;
};

OneDnnEltwise::OneDnnEltwise(Activation a) : a_(a) {}
OneDnnEltwise::~OneDnnEltwise() = default;

absl::StatusOr<std::unique_ptr<OneDnnEltwise>> OneDnnEltwise::Create(Activation a) {
  Form form;
  if (!FormOf(a, &form)) {
    return absl::InvalidArgumentError(
        absl::StrCat("oneDNN computes no ", ActivationName(a), " here"));
  }
  std::unique_ptr<OneDnnEltwise> e(new OneDnnEltwise(a));
  try {
    e->stream_ = std::make_unique<Stream>();
    e->For(1);  // builds, or throws
  } catch (const dnnl::error& err) {
    return absl::InvalidArgumentError(
        absl::StrCat("oneDNN cannot compute ", ActivationName(a), ": ", err.what()));
  }
  return e;
}

OneDnnEltwise::Primitives* OneDnnEltwise::For(int64_t n) {
  if (auto it = by_count_.find(n); it != by_count_.end()) return it->second.get();
  Form form;
  FormOf(a_, &form);
  const dnnl::engine& engine = OneDnnCpuEngine();
  const memory::desc md({n}, memory::data_type::f32, memory::format_tag::x);
  const dnnl::primitive_attr attr = UserScratchpadAttr();
  const dnnl::eltwise_forward::primitive_desc forward_pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, form.alg, md, form.alpha,
                                  form.beta),
      attr, engine);
  const dnnl::eltwise_backward::primitive_desc backward_pd(
      dnnl::eltwise_backward::desc(form.alg, md, md, form.alpha, form.beta), attr, engine,
      forward_pd);
  auto p = std::make_unique<Primitives>();
  p->forward = dnnl::eltwise_forward(forward_pd);
  p->backward = dnnl::eltwise_backward(backward_pd);
  p->names = absl::StrCat(forward_pd.impl_info_str(), " / ", backward_pd.impl_info_str());
  for (memory* m : {&p->z, &p->out, &p->d_out, &p->d_z}) *m = memory(md, engine, nullptr);
  p->forward_scratch = stream_->scratchpad.Place(forward_pd.scratchpad_desc());
  p->backward_scratch = stream_->scratchpad.Place(backward_pd.scratchpad_desc());
  Primitives* raw = p.get();
  by_count_[n] = std::move(p);
  return raw;
}

void OneDnnEltwise::Forward(const float* z, float* out, int64_t n) {
  Primitives* p = For(n);
  p->z.set_data_handle(const_cast<float*>(z));
  p->out.set_data_handle(out);
  p->forward.execute(
      stream_->stream,
      {{DNNL_ARG_SRC, p->z}, {DNNL_ARG_DST, p->out}, {DNNL_ARG_SCRATCHPAD, p->forward_scratch}});
  stream_->stream.wait();
}

void OneDnnEltwise::Backward(const float* z, const float* out, const float* d_out, float* d_z,
                             int64_t n) {
  Form form;
  FormOf(a_, &form);
  Primitives* p = For(n);
  p->z.set_data_handle(const_cast<float*>(z));
  p->out.set_data_handle(const_cast<float*>(out));
  p->d_out.set_data_handle(const_cast<float*>(d_out));
  p->d_z.set_data_handle(d_z);
  p->backward.execute(stream_->stream, {{form.from_output ? DNNL_ARG_DST : DNNL_ARG_SRC,
                                         form.from_output ? p->out : p->z},
                                        {DNNL_ARG_DIFF_DST, p->d_out},
                                        {DNNL_ARG_DIFF_SRC, p->d_z},
                                        {DNNL_ARG_SCRATCHPAD, p->backward_scratch}});
  stream_->stream.wait();
}

std::string OneDnnEltwise::Implementation(int64_t n) { return For(n)->names; }

}  // namespace pstrain::model
