// A Keras activation (model/activations.h) over whole batches, computed by
// oneDNN's eltwise primitives (Debian's libdnnl, the 2.x dnnl.hpp API),
// forward and backward, out of place. Primitives are built once per count
// of floats and kept. Thread-compatible.
#ifndef PSTRAIN_MODEL_ONEDNN_ELTWISE_H_
#define PSTRAIN_MODEL_ONEDNN_ELTWISE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/activations.h"

namespace pstrain::model {

class OneDnnEltwise {
 public:
  // InvalidArgument for an activation oneDNN has no primitive for (linear,
  // selu, softmax), naming it.
  static absl::StatusOr<std::unique_ptr<OneDnnEltwise>> Create(Activation a);
  ~OneDnnEltwise();

  // out[i] = f(z[i]) for i < n.
  void Forward(const float* z, float* out, int64_t n);
  // d_z[i] = d_out[i] * f'(z[i]) for i < n, after Forward wrote `out` from
  // `z` (the derivative reads whichever of the two oneDNN's form needs).
  void Backward(const float* z, const float* out, const float* d_out, float* d_z, int64_t n);

  std::string Implementation(int64_t n);

 private:
  struct Primitives;
  explicit OneDnnEltwise(Activation a);
  Primitives* For(int64_t n);

  const Activation a_;
  struct Stream;
  std::unique_ptr<Stream> stream_;
  std::map<int64_t, std::unique_ptr<Primitives>> by_count_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ONEDNN_ELTWISE_H_
