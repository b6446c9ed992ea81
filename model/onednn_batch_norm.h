// Batch normalization over the last (channel) axis of row-major batches,
// computed by oneDNN (Debian's libdnnl, the 2.x dnnl.hpp API): the forward
// pass with the batch's statistics (training) or given ones (inference),
// and the backward pass with the batch's. The statistics are oneDNN's: the
// mean and the biased variance over every value of a channel in the batch.
// Callers keep the moving statistics (model/batch_norm.h).
//
// A batch of `batch` examples, each `positions` rows of `channels` floats
// ([H, W, C]: positions H * W; [C]: 1). Primitives are built once per
// batch size and kept. Thread-compatible.
#ifndef PSTRAIN_MODEL_ONEDNN_BATCH_NORM_H_
#define PSTRAIN_MODEL_ONEDNN_BATCH_NORM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain::model {

class OneDnnBatchNorm {
 public:
  // `scale`: gamma multiplies (else 1); `shift`: beta is added (else 0).
  // InvalidArgument naming what oneDNN refused.
  static absl::StatusOr<std::unique_ptr<OneDnnBatchNorm>> Create(int64_t channels,
                                                                 int64_t positions, float epsilon,
                                                                 bool scale, bool shift,
                                                                 int max_batch);
  ~OneDnnBatchNorm();

  // y = gamma (x - mean) / sqrt(variance + epsilon) + beta with the batch's
  // mean and variance, written to `mean` and `variance` ([channels] each).
  // gamma and beta are read only where the spec has them (else may be null).
  void ForwardTraining(const float* x, const float* gamma, const float* beta, int batch, float* y,
                       float* mean, float* variance);
  // The same with the given statistics.
  void ForwardInference(const float* x, const float* gamma, const float* beta, const float* mean,
                        const float* variance, int batch, float* y);
  // After ForwardTraining over the same x, with its mean and variance: dx
  // from dy, and the gradients of gamma and beta (where the spec has them;
  // overwritten).
  void Backward(const float* x, const float* dy, const float* gamma, const float* beta,
                const float* mean, const float* variance, int batch, float* dx, float* d_gamma,
                float* d_beta);

  // oneDNN's implementations, forward training / backward.
  std::string Implementations(int batch);

 private:
  struct Primitives;
  OneDnnBatchNorm(int64_t channels, int64_t positions, float epsilon, bool scale, bool shift);
  absl::StatusOr<Primitives*> For(int batch);
  // Training: the batch's statistics written to mean and variance; else
  // read from them.
  void Forward(bool training, const float* x, const float* gamma, const float* beta, float* mean,
               float* variance, int batch, float* y);

  const int64_t channels_, positions_;
  const float epsilon_;
  const bool scale_, shift_;
  struct Stream;
  std::unique_ptr<Stream> stream_;
  std::map<int, std::unique_ptr<Primitives>> by_batch_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ONEDNN_BATCH_NORM_H_
