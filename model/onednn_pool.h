// Max and average pooling over channels-last batches computed by oneDNN
// (Debian's libdnnl, the 2.x dnnl.hpp API), forward and backward: Keras's
// MaxPooling1D/2D, AveragePooling2D (with "same" padding, the mean of the
// cells inside the input) and the global pools (one window the size of
// the input). A max pool's forward pass keeps where each maximum came from
// (oneDNN's workspace) for the backward pass. Primitives are built once
// per batch size and kept. Thread-compatible.
#ifndef PSTRAIN_MODEL_ONEDNN_POOL_H_
#define PSTRAIN_MODEL_ONEDNN_POOL_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/cuda_layer_math.h"

namespace pstrain::model {

class OneDnnPool {
 public:
  // InvalidArgument naming what oneDNN refused.
  static absl::StatusOr<std::unique_ptr<OneDnnPool>> Create(const PstrainWindow& window, bool max,
                                                            int max_batch);
  ~OneDnnPool();

  // dst [batch, oh, ow, c] from src [batch, h, w, c].
  void Forward(const float* src, int batch, float* dst);
  // d_src (overwritten) from d_dst, after Forward over the same batch.
  void Backward(const float* d_dst, int batch, float* d_src);

  std::string Implementations(int batch);

 private:
  struct Primitives;
  OneDnnPool(const PstrainWindow& window, bool max);
  absl::StatusOr<Primitives*> For(int batch);

  const PstrainWindow window_;
  const bool max_;
  struct Stream;
  std::unique_ptr<Stream> stream_;
  std::map<int, std::unique_ptr<Primitives>> by_batch_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ONEDNN_POOL_H_
