// What a training loop reports every few steps, as Keras's fit() prints it,
// and the same figures for the summaries: one place for `train --local` and
// the cluster's replicas.
#ifndef PSTRAIN_TRAIN_PROGRESS_H_
#define PSTRAIN_TRAIN_PROGRESS_H_

#include <cstdint>
#include <string>

#include "base/event_file.h"
#include "model/network.h"

namespace pstrain::train {

// "step S/T - loss L - accuracy A[ - auc U] - R examples/s - Es elapsed -
// ETA Ds" for the steps in `window` (REQUIRES: window.count > 0).
std::string ProgressLine(int64_t step, int64_t total, const model::BatchResult& window,
                         double examples_per_sec, double elapsed_seconds, double eta_seconds);

// loss, accuracy, examples_per_sec, steps_per_sec, global_step,
// learning_rate and, with binary labels, auc, in that order.
Scalars ProgressScalars(const model::BatchResult& window, double examples_per_sec,
                        double steps_per_sec, int64_t global_step, double learning_rate);

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_PROGRESS_H_
