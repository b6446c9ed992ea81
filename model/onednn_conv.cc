#include "model/onednn_conv.h"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/onednn_engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::model {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dims = memory::dims;

}  // namespace

struct OneDnnConv::Engine {
  dnnl::stream stream{OneDnnCpuEngine()};
  // Kernel-shaped buffers by layout, shared by the primitives of every
  // batch size that wants the same one.
  std::vector<memory> kernels;
  ScratchpadArena scratchpad;
  memory Kernel(const memory::desc& desc) {
    for (const memory& m : kernels) {
      if (m.get_desc() == desc) return m;
    }
    kernels.emplace_back(desc, OneDnnCpuEngine());
    return kernels.back();
  }
};

struct OneDnnConv::Primitives {
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
  std::string names;
  // The caller's tensors, their handles set on each call.
  memory src, dst, d_src, d_dst, bias, d_bias, user_kernel, user_d_kernel;
  // The kernel in the layouts the primitives chose (user_kernel itself
  // when they chose Keras's), and the reorders into and out of them.
  memory forward_kernel, data_kernel, weights_d_kernel;
  bool reorder_forward = false, reorder_data = false, reorder_weights = false;
  dnnl::reorder to_forward, to_data, from_weights;
  memory forward_scratch, data_scratch, weights_scratch;
};

OneDnnConv::OneDnnConv(const OneDnnConvSpec& spec) : spec_(spec) {}
OneDnnConv::~OneDnnConv() = default;

absl::StatusOr<std::unique_ptr<OneDnnConv>> OneDnnConv::Create(const OneDnnConvSpec& spec,
                                                               int max_batch) {
  const PstrainWindow& g = spec.window;
  if (spec.groups < 1 || g.c % spec.groups != 0 || spec.out_channels % spec.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat("groups ", spec.groups, " do not divide ", g.c,
                                                   " input and ", spec.out_channels,
                                                   " output channels"));
  }
  if (max_batch < 1) return absl::InvalidArgumentError("max_batch below 1");
  std::unique_ptr<OneDnnConv> conv(new OneDnnConv(spec));
  try {
    conv->engine_ = std::make_unique<Engine>();
  } catch (const dnnl::error& e) {
    return absl::UnavailableError(absl::StrCat("oneDNN has no CPU engine: ", e.what()));
  }
  auto built = conv->For(max_batch);
  if (!built.ok()) return built.status();
  return conv;
}

absl::StatusOr<OneDnnConv::Primitives*> OneDnnConv::For(int batch) {
  if (auto it = by_batch_.find(batch); it != by_batch_.end()) return it->second.get();
  const PstrainWindow& g = spec_.window;
  const int64_t groups = spec_.groups;
  const Dims src_dims = {batch, g.c, g.h, g.w};
  const Dims dst_dims = {batch, spec_.out_channels, g.oh, g.ow};
  const Dims kernel_dims =
      groups == 1 ? Dims{spec_.out_channels, g.c, g.kh, g.kw}
                  : Dims{groups, spec_.out_channels / groups, g.c / groups, g.kh, g.kw};
  const Tag kernel_tag = groups == 1 ? Tag::hwio : Tag::hwigo;
  const Dims strides = {g.sh, g.sw};
  const Dims pad_l = {g.pad_top, g.pad_left};
  const Dims pad_r = PaddingAfter(g);
  const auto f32 = memory::data_type::f32;
  const memory::desc src_md(src_dims, f32, Tag::nhwc), dst_md(dst_dims, f32, Tag::nhwc);
  const memory::desc user_kernel_md(kernel_dims, f32, kernel_tag);
  const memory::desc any_kernel_md(kernel_dims, f32, Tag::any);
  const memory::desc bias_md({spec_.out_channels}, f32, Tag::x);
  const dnnl::engine& engine = OneDnnCpuEngine();
  auto p = std::make_unique<Primitives>();
  try {
    dnnl::primitive_attr attr = UserScratchpadAttr();
    const dnnl::primitive_attr plain = UserScratchpadAttr();
    if (spec_.relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    const auto forward_desc =
        spec_.bias ? dnnl::convolution_forward::desc(
                         dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                         src_md, any_kernel_md, bias_md, dst_md, strides, pad_l, pad_r)
                   : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                     dnnl::algorithm::convolution_direct, src_md,
                                                     any_kernel_md, dst_md, strides, pad_l, pad_r);
    const dnnl::convolution_forward::primitive_desc forward_pd(forward_desc, attr, engine);
    const dnnl::convolution_backward_data::primitive_desc data_pd(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src_md,
                                              any_kernel_md, dst_md, strides, pad_l, pad_r),
        plain, engine, forward_pd);
    const dnnl::convolution_backward_weights::primitive_desc weights_pd(
        spec_.bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                                              src_md, any_kernel_md, bias_md,
                                                              dst_md, strides, pad_l, pad_r)
                   : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                                              src_md, any_kernel_md, dst_md,
                                                              strides, pad_l, pad_r),
        plain, engine, forward_pd);
    p->forward = dnnl::convolution_forward(forward_pd);
    p->backward_data = dnnl::convolution_backward_data(data_pd);
    p->backward_weights = dnnl::convolution_backward_weights(weights_pd);
    p->names = absl::StrCat(forward_pd.impl_info_str(), " / ", data_pd.impl_info_str(), " / ",
                            weights_pd.impl_info_str());
    p->forward_scratch = engine_->scratchpad.Place(forward_pd.scratchpad_desc());
    p->data_scratch = engine_->scratchpad.Place(data_pd.scratchpad_desc());
    p->weights_scratch = engine_->scratchpad.Place(weights_pd.scratchpad_desc());
    p->src = memory(src_md, engine, nullptr);
    p->dst = memory(dst_md, engine, nullptr);
    p->d_src = memory(src_md, engine, nullptr);
    p->d_dst = memory(dst_md, engine, nullptr);
    p->bias = memory(bias_md, engine, nullptr);
    p->d_bias = memory(bias_md, engine, nullptr);
    p->user_kernel = memory(user_kernel_md, engine, nullptr);
    p->user_d_kernel = memory(user_kernel_md, engine, nullptr);
    p->reorder_forward = forward_pd.weights_desc() != user_kernel_md;
    p->reorder_data = data_pd.weights_desc() != user_kernel_md;
    p->reorder_weights = weights_pd.diff_weights_desc() != user_kernel_md;
    if (p->reorder_forward) {
      p->forward_kernel = engine_->Kernel(forward_pd.weights_desc());
      p->to_forward = dnnl::reorder(p->user_kernel, p->forward_kernel);
    }
    if (p->reorder_data) {
      p->data_kernel = engine_->Kernel(data_pd.weights_desc());
      p->to_data = dnnl::reorder(p->user_kernel, p->data_kernel);
    }
    if (p->reorder_weights) {
      p->weights_d_kernel = engine_->Kernel(weights_pd.diff_weights_desc());
      p->from_weights = dnnl::reorder(p->weights_d_kernel, p->user_d_kernel);
    }
  } catch (const dnnl::error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("oneDNN cannot compute this convolution: ", e.what()));
  }
  Primitives* raw = p.get();
  by_batch_[batch] = std::move(p);
  return raw;
}

void OneDnnConv::Forward(const float* src, const float* kernel, const float* bias, int batch,
                         float* dst) {
  Primitives* p = *For(batch);
  dnnl::stream& stream = engine_->stream;
  p->src.set_data_handle(const_cast<float*>(src));
  p->dst.set_data_handle(dst);
  p->user_kernel.set_data_handle(const_cast<float*>(kernel));
  if (p->reorder_forward) {
    p->to_forward.execute(stream, p->user_kernel, p->forward_kernel);
  }
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, p->src},
      {DNNL_ARG_WEIGHTS, p->reorder_forward ? p->forward_kernel : p->user_kernel},
      {DNNL_ARG_DST, p->dst},
      {DNNL_ARG_SCRATCHPAD, p->forward_scratch}};
  if (spec_.bias) {
    p->bias.set_data_handle(const_cast<float*>(bias));
    args[DNNL_ARG_BIAS] = p->bias;
  }
  p->forward.execute(stream, args);
  stream.wait();
}

void OneDnnConv::BackwardData(const float* d_dst, const float* kernel, int batch, float* d_src) {
  Primitives* p = *For(batch);
  dnnl::stream& stream = engine_->stream;
  p->d_dst.set_data_handle(const_cast<float*>(d_dst));
  p->d_src.set_data_handle(d_src);
  p->user_kernel.set_data_handle(const_cast<float*>(kernel));
  if (p->reorder_data) {
    p->to_data.execute(stream, p->user_kernel, p->data_kernel);
  }
  p->backward_data.execute(stream,
                           {{DNNL_ARG_DIFF_DST, p->d_dst},
                            {DNNL_ARG_WEIGHTS, p->reorder_data ? p->data_kernel : p->user_kernel},
                            {DNNL_ARG_DIFF_SRC, p->d_src},
                            {DNNL_ARG_SCRATCHPAD, p->data_scratch}});
  stream.wait();
}

void OneDnnConv::BackwardWeights(const float* src, const float* d_dst, int batch, float* d_kernel,
                                 float* d_bias) {
  Primitives* p = *For(batch);
  dnnl::stream& stream = engine_->stream;
  p->src.set_data_handle(const_cast<float*>(src));
  p->d_dst.set_data_handle(const_cast<float*>(d_dst));
  p->user_d_kernel.set_data_handle(d_kernel);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, p->src},
      {DNNL_ARG_DIFF_DST, p->d_dst},
      {DNNL_ARG_DIFF_WEIGHTS, p->reorder_weights ? p->weights_d_kernel : p->user_d_kernel},
      {DNNL_ARG_SCRATCHPAD, p->weights_scratch}};
  if (spec_.bias) {
    p->d_bias.set_data_handle(d_bias);
    args[DNNL_ARG_DIFF_BIAS] = p->d_bias;
  }
  p->backward_weights.execute(stream, args);
  if (p->reorder_weights) {
    p->from_weights.execute(stream, p->weights_d_kernel, p->user_d_kernel);
  }
  stream.wait();
}

std::string OneDnnConv::Implementations(int batch) {
  auto p = For(batch);
  return p.ok() ? (*p)->names : std::string(p.status().message());
}

}  // namespace pstrain::model
