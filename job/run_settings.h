// What a later command on a run's output directory takes from the run.
// `pstrain evaluate`, `predict`, `export` and `inspect` on a checkpoint,
// and `pstrain launch` relaunching into a directory, use the job settings
// <dir>/run.json records (job/run_record.h) unless their own flags say
// otherwise, so that a run trained with its own --model_config is scored,
// exported or resumed without its flags being given again.
// Stateless; thread-compatible.
#ifndef PSTRAIN_JOB_RUN_SETTINGS_H_
#define PSTRAIN_JOB_RUN_SETTINGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cli_args.h"

namespace pstrain {

// The job settings of one run, as its run.json records them.
struct RunSettings {
  std::string path;                // the run.json read
  std::vector<std::string> flags;  // the run's job flags, "--name=value", in order
  std::string model_config;        // the text of the config it trained with, "" when none
  std::string model_config_file;   // where that text was read from, as given
};

// <dir>/run.json's settings. None when the directory has no run.json (one
// written before run.json existed) or records no flags (a launch that
// failed before it began). DataLoss naming the file when it does not parse.
absl::StatusOr<std::optional<RunSettings>> ReadRunSettings(const std::string& dir);

// What TakeRunSettings did.
struct TakenSettings {
  // The run's flags added to the command's, "--name=value".
  std::vector<std::string> taken;
  // The recorded config text, to be read in place of a file
  // (JobSpecFromFlags' ConfigText), when `config_as_text` asked for it and
  // the command gives no layers of its own; "" otherwise.
  std::string config_text;
  // Each setting the command gives that differs from the run's:
  // "--epochs=3 (the run had --epochs=2)".
  std::vector<std::string> differ;
};

// Adds to `args` each of `run`'s flags whose name `args` does not give,
// except those named in `skip` (settings of the place a command runs, such
// as --device or --output_dir). The model's layers are one setting: when
// `args` gives --model_config, --config or --hidden, none of the run's
// three is taken, and a config whose text is not the run's is named as a
// difference. With `config_as_text`, the run's config is taken as the text
// it recorded (the file may have changed or gone since) rather than its
// path.
TakenSettings TakeRunSettings(const RunSettings& run, const std::vector<std::string>& skip,
                              bool config_as_text, CliArgs& args);

// One line for a command's log: where the settings came from and which
// were taken or overridden ("" when nothing was taken or differs), e.g.
// "the run's settings (out/run.json): --model_config=cnn.pbtxt (its text
// as recorded), --epochs=2; flags that differ from the run's:
// --batch_size=64 (the run had --batch_size=32)". With nothing taken, the
// differences name the file: "flags that differ from the run's
// (out/run.json): --hidden=64 (the run had --hidden=32)".
std::string DescribeTaken(const RunSettings& run, const TakenSettings& taken);

// For a relaunch into `dir` (`pstrain launch`, `train --local`): takes the
// settings of the run there (TakeRunSettings: all but --output_dir, the
// config by its path, which the tasks read) and returns the line to log
// about them, "" when there is no run or nothing was taken or differs. A
// run.json that does not parse is left to the relaunch check, which names
// it.
std::string TakeRelaunchSettings(const std::string& dir, CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_JOB_RUN_SETTINGS_H_
