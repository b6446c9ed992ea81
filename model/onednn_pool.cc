#include "model/onednn_pool.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/onednn_engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::model {

using dnnl::memory;

struct OneDnnPool::Stream {
  dnnl::stream stream{OneDnnCpuEngine()};
  ScratchpadArena scratchpad;
};

struct OneDnnPool::Primitives {
  dnnl::pooling_forward forward;
  dnnl::pooling_backward backward;
  std::string names;
  memory src, dst, d_src, d_dst, workspace, forward_scratch, backward_scratch;
};

OneDnnPool::OneDnnPool(const PstrainWindow& window, bool max) : window_(window), max_(max) {}
OneDnnPool::~OneDnnPool() = default;

absl::StatusOr<std::unique_ptr<OneDnnPool>> OneDnnPool::Create(const PstrainWindow& window,
                                                               bool max, int max_batch) {
  if (max_batch < 1) return absl::InvalidArgumentError("max_batch below 1");
  std::unique_ptr<OneDnnPool> pool(new OneDnnPool(window, max));
  try {
    pool->stream_ = std::make_unique<Stream>();
  } catch (const dnnl::error& e) {
    return absl::UnavailableError(absl::StrCat("oneDNN has no CPU engine: ", e.what()));
  }
  auto built = pool->For(max_batch);
  if (!built.ok()) return built.status();
  return pool;
}

absl::StatusOr<OneDnnPool::Primitives*> OneDnnPool::For(int batch) {
  if (auto it = by_batch_.find(batch); it != by_batch_.end()) return it->second.get();
  const PstrainWindow& g = window_;
  const auto f32 = memory::data_type::f32;
  const memory::desc src_md({batch, g.c, g.h, g.w}, f32, memory::format_tag::nhwc);
  const memory::desc dst_md({batch, g.c, g.oh, g.ow}, f32, memory::format_tag::nhwc);
  const memory::dims strides = {g.sh, g.sw}, kernel = {g.kh, g.kw};
  const memory::dims pad_l = {g.pad_top, g.pad_left};
  const memory::dims pad_r = PaddingAfter(g);
  // Keras's: a max over the cells inside the input; a mean of them alone.
  const dnnl::algorithm alg =
      max_ ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  const dnnl::engine& engine = OneDnnCpuEngine();
  auto p = std::make_unique<Primitives>();
  try {
    const dnnl::primitive_attr attr = UserScratchpadAttr();
    const dnnl::pooling_forward::primitive_desc forward_pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, alg, src_md, dst_md, strides,
                                    kernel, pad_l, pad_r),
        attr, engine);
    const dnnl::pooling_backward::primitive_desc backward_pd(
        dnnl::pooling_backward::desc(alg, src_md, dst_md, strides, kernel, pad_l, pad_r), attr,
        engine, forward_pd);
    p->forward = dnnl::pooling_forward(forward_pd);
    p->backward = dnnl::pooling_backward(backward_pd);
    p->names = absl::StrCat(forward_pd.impl_info_str(), " / ", backward_pd.impl_info_str());
    for (memory* m : {&p->src, &p->d_src}) *m = memory(src_md, engine, nullptr);
    for (memory* m : {&p->dst, &p->d_dst}) *m = memory(dst_md, engine, nullptr);
    if (max_) p->workspace = memory(forward_pd.workspace_desc(), engine);
    p->forward_scratch = stream_->scratchpad.Place(forward_pd.scratchpad_desc());
    p->backward_scratch = stream_->scratchpad.Place(backward_pd.scratchpad_desc());
  } catch (const dnnl::error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("oneDNN cannot compute this pooling: ", e.what()));
  }
  Primitives* raw = p.get();
  by_batch_[batch] = std::move(p);
  return raw;
}

void OneDnnPool::Forward(const float* src, int batch, float* dst) {
  Primitives* p = *For(batch);
  p->src.set_data_handle(const_cast<float*>(src));
  p->dst.set_data_handle(dst);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, p->src}, {DNNL_ARG_DST, p->dst}, {DNNL_ARG_SCRATCHPAD, p->forward_scratch}};
  if (max_) args[DNNL_ARG_WORKSPACE] = p->workspace;
  p->forward.execute(stream_->stream, args);
  stream_->stream.wait();
}

void OneDnnPool::Backward(const float* d_dst, int batch, float* d_src) {
  Primitives* p = *For(batch);
  p->d_dst.set_data_handle(const_cast<float*>(d_dst));
  p->d_src.set_data_handle(d_src);
  std::unordered_map<int, memory> args = {{DNNL_ARG_DIFF_DST, p->d_dst},
                                          {DNNL_ARG_DIFF_SRC, p->d_src},
                                          {DNNL_ARG_SCRATCHPAD, p->backward_scratch}};
  if (max_) args[DNNL_ARG_WORKSPACE] = p->workspace;
  p->backward.execute(stream_->stream, args);
  stream_->stream.wait();
}

std::string OneDnnPool::Implementations(int batch) {
  auto p = For(batch);
  return p.ok() ? (*p)->names : std::string(p.status().message());
}

}  // namespace pstrain::model
