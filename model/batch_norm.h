// Keras's BatchNormalization on the CPU, over the last (channel) axis of
// any input ([N], [T, C], [H, W, C]): each channel c normalised by a mean
// and variance, then scaled by gamma[c] and shifted by beta[c]:
//   y = gamma * (x - mean) / sqrt(variance + epsilon) + beta
// In training the mean and (biased) variance are the batch's, over the
// examples and positions; in inference (evaluate, predict, the evaluator)
// they are the moving ones. A layer with `trainable: false` always runs
// in inference, as Keras's frozen BatchNormalization does.
//
// Variables, in this order from the layer's first offset, C floats each:
//   gamma            trainable (scale: true, Keras's default), "ones"
//   beta             trainable (center: true), "zeros"
//   moving_mean      non-trainable, "zeros"
//   moving_variance  non-trainable, "ones"
// Keras updates the moving statistics in training as
//   moving = moving * momentum + batch_statistic * (1 - momentum).
// Backward writes that change, (1 - momentum) * (batch_statistic - moving),
// where the moving statistics' gradients would be: they are pushed with
// the gradients and added where the variables live (cluster/placement.h's
// VariableUpdate::kIncrement), so a PS applies each replica's once and a
// sync round or an all-reduce applies the replicas' mean. The variance
// statistic is Keras's: for [H, W, C] inputs, the fused kernel's unbiased
// one (times M / (M - 1) over M values per channel); else the biased one.
#ifndef PSTRAIN_MODEL_BATCH_NORM_H_
#define PSTRAIN_MODEL_BATCH_NORM_H_

#include <cstdint>
#include <memory>

#include "model/layers.h"

namespace pstrain::model {

// Where a batch normalization's variables lie from its first, `at`: -1
// for gamma without scale, beta without center.
struct BatchNormOffsets {
  int64_t gamma = -1, beta = -1, moving_mean = 0, moving_variance = 0;
};
BatchNormOffsets BatchNormVariableOffsets(const LayerSpec& spec, int64_t channels, int64_t at);

// On oneDNN (model/onednn_batch_norm.h) unless CpuKernelsInUse() says the
// reference or oneDNN refuses the shape: then the direct loops, in double.
// REQUIRES: LayerOutputShape(spec, in) ok; spec.kind is kBatchNormalization;
// max_batch >= 1.
std::unique_ptr<Layer> CreateBatchNormLayer(const LayerSpec& spec, const Shape& in, int max_batch,
                                            int64_t variables_at);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_BATCH_NORM_H_
