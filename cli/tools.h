// Operator commands of the pstrain entry point that inspect a job:
//   pstrain placement --ps N [--config FILE | job flags] [--min_slice_bytes B] [--json]
//   pstrain status [--ps HOST:PORT,...] [--json]
//   pstrain summary [--config FILE | job flags] [--ps N]
// Each returns the process exit code and prints its own errors.
#ifndef PSTRAIN_CLI_TOOLS_H_
#define PSTRAIN_CLI_TOOLS_H_

#include <string>

#include "absl/status/statusor.h"
#include "base/cli_args.h"
#include "cluster/placement.h"
#include "cluster/tf_config.h"
#include "model/model_graph.h"
#include "model/network.h"
#include "proto/ps_service.pb.h"

namespace pstrain {

// The plan as a table: one line per slice (variable, slice, rows, bytes, PS),
// then bytes per PS and the largest PS's excess over the ideal
// (total / num_ps), in percent.
std::string PlacementTable(const Placement& p);
std::string PlacementJson(const Placement& p);

// `pstrain placement`: the model comes from --config (a model config file,
// model/model_config.h) or else from the job flags (--hidden, ...).
int PlacementMain(CliArgs& args);

// Keras's model.summary() for a network: one row per layer (name and
// Keras type, output shape, parameter count), the totals, then where each
// variable lives on `placement`'s PS (its slices and their PS, or an
// embedding table's rows spread by id).
std::string SummaryTable(const std::string& title, const model::ModelGraph& net,
                         const Placement& placement);

// `pstrain summary`: the model of --config (or of the job flags), placed on
// --ps N parameter servers (default 1).
int SummaryMain(CliArgs& args);

// `pstrain status` output: per PS its global step and resident memory, then
// per variable (its slices on that PS summed): mode, bytes, pushes, pulls,
// step, dropped stale gradients and the staleness histogram.
std::string StatusTable(const std::vector<HostPort>& addresses,
                        const std::vector<v1::StatsResponse>& stats);
std::string StatusJson(const std::vector<HostPort>& addresses,
                       const std::vector<v1::StatsResponse>& stats);

// `pstrain status`: asks every PS for its Stats. The PS addresses come from
// --ps, else from $TF_CONFIG (read by the caller and passed as `tf_config`,
// empty when unset). A PS that does not answer is reported in its place
// ("ps:1 HOST:PORT  not answering: ...", or {"ps", "address", "error"} with
// --json) and the others still are; the exit code is then that error's
// (base/exit_codes.h: 138 for one unreachable).
int StatusMain(CliArgs& args, const std::string& tf_config);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_TOOLS_H_
