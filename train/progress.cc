#include "train/progress.h"

#include "absl/strings/str_format.h"

namespace pstrain::train {

std::string ProgressLine(int64_t step, int64_t total, const model::BatchResult& window,
                         double examples_per_sec, double elapsed_seconds, double eta_seconds) {
  const std::string auc =
      window.has_auc() ? absl::StrFormat(" - auc %.4f", window.Auc()) : std::string();
  return absl::StrFormat(
      "step %d/%d - loss %.4f - accuracy %.4f%s - %.0f examples/s - %.0fs elapsed - ETA %.0fs",
      step, total, window.mean_loss(), window.accuracy(), auc, examples_per_sec, elapsed_seconds,
      eta_seconds);
}

Scalars ProgressScalars(const model::BatchResult& window, double examples_per_sec,
                        double steps_per_sec, int64_t global_step, double learning_rate) {
  Scalars scalars = {{"loss", window.mean_loss()},
                     {"accuracy", window.accuracy()},
                     {"examples_per_sec", examples_per_sec},
                     {"steps_per_sec", steps_per_sec},
                     {"global_step", static_cast<double>(global_step)},
                     {"learning_rate", learning_rate}};
  if (window.has_auc()) scalars.push_back({"auc", window.Auc()});
  return scalars;
}

}  // namespace pstrain::train
