// What a run's record (<output_dir>/run.json, job/run_record.h) says
// about the task that launched it: the binary's version and commit, the
// flags as given, the cluster, and the model config file's text. Main-layer
// code only.
#ifndef PSTRAIN_JOB_RUN_INFO_H_
#define PSTRAIN_JOB_RUN_INFO_H_

#include <string>

#include "base/cli_args.h"
#include "base/json.h"
#include "cluster/tf_config.h"

namespace pstrain {

// The program's main says what the binary is, once, before any task runs
// ("0.1.0", a commit); RunInfo records it. Unset: "unknown".
void SetBinaryVersion(const std::string& version, const std::string& commit);

// {"version", "commit", "flags": ["--epochs=2", ...], "cluster": TF_CONFIG's
// cluster, "model_config": the text of the file --model_config (or
// --config) names, when it can be read}.
Json RunInfo(const CliArgs& args, const TfConfig& cfg);

// TF_CONFIG's "cluster" as RunInfo records it ({} when it does not parse).
Json ClusterOf(const TfConfig& cfg);

}  // namespace pstrain

#endif  // PSTRAIN_JOB_RUN_INFO_H_
