// Using a trained model outside a job: what a checkpoint holds, and its
// score on a data set.
//   pstrain inspect DIR [--json]
//   pstrain evaluate --checkpoint DIR [job flags]
//   pstrain predict --checkpoint DIR --out FILE [--input GLOB] [job flags]
//   pstrain export --checkpoint DIR --out FILE.npz|FILE.onnx [job flags]
// DIR is a job's output directory (the checkpoint its index names, else
// the newest complete one) or one ckpt-<step> directory in it. The job
// flags default to those of the run that wrote it (job/run_settings.h:
// the run.json beside it, the config as the text recorded there); flags
// given override them, and stderr names what was taken and what differs.
#ifndef PSTRAIN_CLI_CHECKPOINT_TOOLS_H_
#define PSTRAIN_CLI_CHECKPOINT_TOOLS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "base/cli_args.h"

namespace pstrain {

struct CheckpointAt {
  std::string output_dir;  // where ckpt-<step>/ lies
  int64_t step = 0;
  int num_ps = 0;  // the PS that wrote it
};

// The complete checkpoint `path` names (see above). NotFound naming the
// path when it holds none; FailedPrecondition when the ckpt-<step> it
// names is not complete (saying why).
absl::StatusOr<CheckpointAt> ResolveCheckpoint(const std::string& path);

// `pstrain inspect`: the checkpoint's step, optimizer and slots, each
// shard (file, bytes, CRC-32C, every checksum verified as it is read) and
// each tensor in it (variable, rows, elements, updates; tables: rows held
// and their width), and the job flags of the run that wrote it. Returns
// the exit code.
int InspectMain(CliArgs& args);

// `pstrain evaluate`: the checkpoint's loss and accuracy (AUC with binary
// labels) on the job's test split, with the model of the run's settings
// and the job flags; a model that differs from the run.json beside the
// checkpoint is refused, each difference named. Returns the exit code.
int EvaluateMain(CliArgs& args);

// `pstrain predict --checkpoint DIR --out FILE [--input GLOB] [job flags]`:
// each example's prediction by the checkpoint's model, for the job's test
// split or the files --input names (a config's CSV or TFRecord input), as
// CSV (FILE ending in .csv: example,label,predicted,p0,p1,...) or JSON
// lines ({"example", "label", "predicted", "probabilities"}). The same
// model checks as evaluate. Returns the exit code.
int PredictMain(CliArgs& args);

// `pstrain export --checkpoint DIR --out FILE [--format=npz|onnx] [job
// flags]`: the checkpoint's model for other tools (the format from FILE's
// name unless given). NumPy's .npz: one float32 array per variable, named
// as the model names it (dense_0/kernel [784, 128], dense_0/bias [128],
// ...; an embedding table whole, [vocabulary, dim], rows never trained at
// their initial values). ONNX: exporter/onnx_writer.h.
// The same model checks as evaluate. Returns the exit code.
int ExportMain(CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_CHECKPOINT_TOOLS_H_
