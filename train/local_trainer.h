// `pstrain train --local`: the job's model, data pipeline and optimizer in
// one process with no PS, the reference for a cluster's accuracy and speed.
// The same MLP, the same sharding code (one replica), the same optimizer
// formulas the PS applies (optim/optimizer.h).
#ifndef PSTRAIN_TRAIN_LOCAL_TRAINER_H_
#define PSTRAIN_TRAIN_LOCAL_TRAINER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/job_spec.h"
#include "train/local_table.h"

namespace pstrain::train {

struct LocalResult {
  int64_t steps = 0;
  double train_seconds = 0;
  double examples_per_sec = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  // Binary labels (sigmoid loss): the test split's ROC AUC.
  std::optional<double> test_auc;
  // Reading the training and test sets before the first step.
  double load_seconds = 0;
  // Of train_seconds, how long steps stood waiting for their batch.
  double input_wait_seconds = 0;
  // The test accuracy after each full epoch (as Keras's validation_data),
  // when the job runs by epochs; not counted in train_seconds.
  std::vector<double> epoch_test_accuracy;
  std::vector<float> params;  // the trained values, flat (model::Network's layout)
  LocalTables tables;         // the trained embedding tables
};

// Trains job.epochs (or job.max_steps) over the whole training set, then
// scores the test set (and after each epoch, logging "epoch E/N: test
// accuracy ..."). Logs Keras-like progress lines every `log_every_steps`. Errors for bad data, a
// bad model or optimizer. When `summary_dir` is not empty, the progress scalars go to TensorBoard
// event files and JSON lines in <summary_dir>/train, and the test loss and
// accuracy in <summary_dir>/eval (common/event_file.h).
absl::StatusOr<LocalResult> RunLocal(const model::JobSpec& job, int log_every_steps = 400,
                                     const std::string& summary_dir = "");

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_LOCAL_TRAINER_H_
