#include "pstrain/job_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace pstrain {

const std::vector<std::string>& JobFlagNames() {
  static const auto* names = new std::vector<std::string>{
      "data_dir", "batch_size", "epochs",  "max_steps", "learning_rate",
      "optimizer", "seed",      "hidden", "output_dir"};
  return *names;
}

const char* JobFlagsUsage() {
  return "job flags: --data_dir=DIR --batch_size=N --epochs=N --max_steps=N "
         "--learning_rate=X --optimizer=sgd --seed=N --hidden=W1,W2,... "
         "--output_dir=DIR";
}

absl::StatusOr<model::JobSpec> JobSpecFromFlags(CliArgs& args) {
  model::JobSpec job;
  PSTRAIN_ASSIGN_OR_RETURN(job.data_dir, args.GetString("data_dir", job.data_dir));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t batch, args.GetInt("batch_size", job.batch_size));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t epochs, args.GetInt("epochs", job.epochs));
  PSTRAIN_ASSIGN_OR_RETURN(job.max_steps, args.GetInt("max_steps", job.max_steps));
  PSTRAIN_ASSIGN_OR_RETURN(double lr, args.GetDouble("learning_rate", job.learning_rate));
  PSTRAIN_ASSIGN_OR_RETURN(job.optimizer, args.GetString("optimizer", job.optimizer));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", job.seed));
  std::string default_hidden;
  for (size_t i = 0; i < job.model.hidden.size(); ++i) {
    absl::StrAppend(&default_hidden, i ? "," : "", job.model.hidden[i]);
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::string hidden, args.GetString("hidden", default_hidden));
  if (batch < 1 || batch > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch_size=", batch, ": must be in 1..65536"));
  }
  if (epochs < 1 || epochs > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--epochs=", epochs, ": must be in 1..100000"));
  }
  if (job.max_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_steps=", job.max_steps, ": must be 0 (use epochs) or more"));
  }
  if (!(lr > 0) || lr > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate=", lr, ": must be in (0, 100]"));
  }
  if (seed < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--seed=", seed, ": must be >= 0"));
  }
  job.batch_size = static_cast<int>(batch);
  job.epochs = static_cast<int>(epochs);
  job.learning_rate = static_cast<float>(lr);
  job.seed = static_cast<uint64_t>(seed);
  job.model.hidden.clear();
  for (absl::string_view part : absl::StrSplit(hidden, ',', absl::SkipEmpty())) {
    int width = 0;
    if (!absl::SimpleAtoi(part, &width) || width < 1 || width > 65536) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--hidden=", hidden, ": \"", part, "\" is not a layer width in 1..65536"));
    }
    job.model.hidden.push_back(width);
  }
  return job;
}

absl::StatusOr<std::string> OutputDirFromFlags(CliArgs& args,
                                               const std::string& environment) {
  PSTRAIN_ASSIGN_OR_RETURN(
      std::string dir,
      args.GetString("output_dir", environment == "cloud" ? "/data/output" : "./output"));
  if (dir.empty()) return absl::InvalidArgumentError("--output_dir is empty");
  return dir;
}

}  // namespace pstrain
