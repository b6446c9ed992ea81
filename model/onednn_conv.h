// A convolution over channels-last batches computed by oneDNN (Debian's
// libdnnl, the 2.x dnnl.hpp API): the forward pass, the gradient at the
// input and the kernel's gradient, for the shapes of Keras's Conv1D and
// Conv2D (groups 1) and DepthwiseConv2D (groups = input channels).
//
// Layouts are the project's own, so nothing around the convolution
// changes: activations [batch, h, w, c] row-major (oneDNN's nhwc), the
// kernel in Keras's order, [kh, kw, c, filters] for groups 1 (hwio) and
// [kh, kw, c, depth_multiplier] for depthwise (hwigo; output channel
// c * multiplier + j). oneDNN picks the kernel layout its fastest
// implementation wants; the kernel is reordered into it once per call
// (the parameters change every step) and the kernel gradient back out.
// Primitives are built once per batch size and kept.
//
// Thread-compatible: one per layer, one layer per thread.
#ifndef PSTRAIN_MODEL_ONEDNN_CONV_H_
#define PSTRAIN_MODEL_ONEDNN_CONV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/cuda_layer_math.h"

namespace pstrain::model {

struct OneDnnConvSpec {
  PstrainWindow window;  // input extents, output positions, kernel, stride, padding before
  int64_t out_channels = 0;
  // 1: every output channel reads every input channel. window.c: depthwise
  // (out_channels a multiple of window.c).
  int64_t groups = 1;
  bool bias = false;  // Forward adds one ([out_channels])
  bool relu = false;  // Forward ends with a ReLU
};

class OneDnnConv {
 public:
  // InvalidArgument for a spec oneDNN cannot compute (naming why), or
  // Unavailable when oneDNN has no CPU engine. `max_batch` >= 1 is checked
  // by building the primitives for it.
  static absl::StatusOr<std::unique_ptr<OneDnnConv>> Create(const OneDnnConvSpec& spec,
                                                            int max_batch);
  ~OneDnnConv();

  // dst [batch, oh, ow, out] = conv(src [batch, h, w, c], kernel) (+ bias,
  // then ReLU, as the spec says). REQUIRES: 1 <= batch <= max_batch.
  void Forward(const float* src, const float* kernel, const float* bias, int batch, float* dst);
  // d_src = the gradient at the input from d_dst (the gradient at the
  // output, before the spec's ReLU has been taken back: the caller masks).
  void BackwardData(const float* d_dst, const float* kernel, int batch, float* d_src);
  // d_kernel (Keras's layout) and, with a bias, d_bias (overwritten) from
  // src and d_dst.
  void BackwardWeights(const float* src, const float* d_dst, int batch, float* d_kernel,
                       float* d_bias);

  // The implementations oneDNN chose, forward / data / weights (e.g.
  // "brgconv:avx512_core / ... "), for benchmarks to print.
  std::string Implementations(int batch);

 private:
  struct Primitives;
  explicit OneDnnConv(const OneDnnConvSpec& spec);
  absl::StatusOr<Primitives*> For(int batch);

  const OneDnnConvSpec spec_;
  struct Engine;
  std::unique_ptr<Engine> engine_;
  std::map<int, std::unique_ptr<Primitives>> by_batch_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ONEDNN_CONV_H_
