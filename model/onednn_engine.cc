#include "model/onednn_engine.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace pstrain::model {

const dnnl::engine& OneDnnCpuEngine() {
  static const auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::memory::dims PaddingAfter(const PstrainWindow& g) {
  return {std::max<int64_t>(0, (g.oh - 1) * g.sh + g.kh - g.h - g.pad_top),
          std::max<int64_t>(0, (g.ow - 1) * g.sw + g.kw - g.w - g.pad_left)};
}

dnnl::primitive_attr UserScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void ScratchpadArena::Free::operator()(void* p) const { std::free(p); }

dnnl::memory ScratchpadArena::Place(const dnnl::memory::desc& desc) {
  const size_t need = desc.get_size();
  if (need > size_) {
    // Page-aligned, as oneDNN's own; a whole number of pages.
    constexpr size_t kPage = 4096;
    const size_t size = (need + kPage - 1) / kPage * kPage;
    void* p = std::aligned_alloc(kPage, size);
    if (p == nullptr) throw std::bad_alloc();
    buffer_.reset(p);
    size_ = size;
    for (dnnl::memory& m : placed_) m.set_data_handle(buffer_.get());
  }
  dnnl::memory m(desc, OneDnnCpuEngine(), buffer_.get());
  placed_.push_back(m);
  return m;
}

}  // namespace pstrain::model
