// What a model is, as a model config (model/model_config.h) or a test
// writes it: its input, its layers (model/layers.h) in order, its loss and
// its embeddings. model/model_graph.h checks it and lays out its variables.
#ifndef PSTRAIN_MODEL_NETWORK_SPEC_H_
#define PSTRAIN_MODEL_NETWORK_SPEC_H_

#include <vector>

#include "model/embeddings.h"
#include "model/layers.h"

namespace pstrain::model {

// The loss over the last layer's outputs.
enum class Loss {
  kSoftmaxCrossEntropy,  // one logit per class
  kSigmoidCrossEntropy,  // one logit, labels 0 and 1 (a click)
};

// "softmax cross-entropy" or "sigmoid cross-entropy".
const char* LossName(Loss loss);

struct NetworkSpec {
  int input_dim = 784;  // Fashion-MNIST: 28 x 28 pixels
  // The shape of each example's input_dim floats as the first layer sees
  // them (e.g. [28, 28, 1] for conv2d); empty: flat, [input_dim].
  Shape input_shape;
  // Applied in order (model/layers.h), each to the layer before it or to
  // the earlier layers it names (LayerSpec::inputs); the last is a dense
  // layer whose outputs are the logits of the loss (so it has no ReLU): one
  // per class for softmax cross-entropy, one for sigmoid cross-entropy.
  std::vector<LayerSpec> layers;
  Loss loss = Loss::kSoftmaxCrossEntropy;
  // Optional: embeddings between the input and the first layer
  // (model/embeddings.h: several bags side by side, or one sequence),
  // which then reads their output.
  std::vector<EmbeddingBagSpec> embeddings;
  // The embedding tables' consistency on the PS: a sync job's rounds (each
  // replica's row gradients summed per step and applied once, as one
  // process with their batches together would), or async (whatever the
  // job's mode, as hybrid sparse models train them).
  bool sync_tables = false;

  // Dense layers "dense_0", "dense_1", ... with ReLU on the hidden ones.
  static NetworkSpec FromWidths(int input_dim, const std::vector<int>& hidden, int num_classes);
  // Labels lie in [0, num_classes): the softmax's units, or 2 for sigmoid.
  int num_classes() const {
    if (layers.empty()) return 0;
    return loss == Loss::kSigmoidCrossEntropy ? 2 : layers.back().units;
  }
  bool binary() const { return loss == Loss::kSigmoidCrossEntropy; }
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_NETWORK_SPEC_H_
