// What every oneDNN primitive of the process shares: the CPU engine, made
// once (oneDNN's engines are safe to share between threads), and the
// scratchpads a layer's primitives work in.
#ifndef PSTRAIN_MODEL_ONEDNN_ENGINE_H_
#define PSTRAIN_MODEL_ONEDNN_ENGINE_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "model/cuda_layer_math.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::model {

// Throws dnnl::error where oneDNN has no CPU engine.
const dnnl::engine& OneDnnCpuEngine();

// The padding after a window's last position, rows then columns: what the
// output positions leave over (Keras's "same" puts the odd padding after;
// "valid" may leave input unread, which oneDNN takes as 0).
dnnl::memory::dims PaddingAfter(const PstrainWindow& g);

// Attributes with the scratchpad left to the caller (ScratchpadArena): a
// layer's primitives (forward, backward, each batch size) then share one
// buffer, allocated before the first step, where oneDNN would keep one per
// primitive.
dnnl::primitive_attr UserScratchpadAttr();

// One buffer for the scratchpads of primitives that never run at once
// (one layer's, on its thread), as large as the largest. Thread-compatible.
class ScratchpadArena {
 public:
  // A memory of `desc` (a primitive descriptor's scratchpad_desc()) over
  // the buffer, grown if it is too small; the memories placed before are
  // moved with it.
  dnnl::memory Place(const dnnl::memory::desc& desc);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> buffer_;
  size_t size_ = 0;
  std::vector<dnnl::memory> placed_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ONEDNN_ENGINE_H_
