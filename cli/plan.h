// `pstrain plan`: how many PS to run, from the cost model of
// experiment/cost_model.h, and (--measure) that model against this
// machine (experiment/step_measure.h).
#ifndef PSTRAIN_CLI_PLAN_H_
#define PSTRAIN_CLI_PLAN_H_

#include <string>

#include "base/cli_args.h"

namespace pstrain {

// `pstrain plan --model-bytes B --workers N --bandwidth GBPS [--step-ms T]
// [--max-ps K] [--measure]`. Returns the exit code: 2 for bad flags.
int PlanMain(const std::string& self_path, CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_PLAN_H_
