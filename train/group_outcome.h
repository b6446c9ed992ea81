// The steps a replica group (train/local_trainer.h's ReplicaGroup: the
// replicas of a job without PS) takes together before its first training
// step, each replica's outcome shared with all: its data read, its
// checkpoint restored, the output directory taken. Without it a replica
// that fails for good (a truncated data file, a run on disk of another
// model) would exit alone, and the others would see only a lost
// neighbour: a retryable end, which an orchestrator restarts for ever.
// With it, every replica learns the failure in the same exchange and the
// whole job ends with its code.
// Stateless; what it calls must be the replicas' one collective thread.
#ifndef PSTRAIN_TRAIN_GROUP_OUTCOME_H_
#define PSTRAIN_TRAIN_GROUP_OUTCOME_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/exit_codes.h"

namespace pstrain::train {

// Every replica's `mine`, by replica (ReplicaGroup::all_gather).
using GatherFn =
    std::function<absl::StatusOr<std::vector<std::string>>(const std::string& mine)>;

// All-gathers this replica's outcome of one step: its value, or the
// failure that ended it there, with the exit code that failure gives
// (RoleExitCode with `unmarked`, the kind of the phase the step is in).
// Every replica of `names` must call it in the same step. Returns every
// replica's value when all succeeded. Otherwise: a replica that failed
// returns its own failure, marked with its kind; the others return the
// first failure by replica, of its status code, "<name> failed: <its
// message>", marked with the kind its exit code stands for
// (FailureKindOfExitCode), so that each ends with that replica's code. An error of the gather itself (a neighbour
// lost) is returned as it is.
absl::StatusOr<std::vector<std::string>> GatherOutcomes(const GatherFn& gather,
                                                        const std::vector<std::string>& names,
                                                        const absl::StatusOr<std::string>& mine,
                                                        FailureKind unmarked);

// A failure as GatherOutcomes sends it: its exit code (RoleExitCode with
// `unmarked`), status code and message, for a replica to tell the others
// outside an exchange (a failure for good during training, announced
// around the ring: transport/ring.h's Announce).
std::string EncodeFailure(const absl::Status& failure, FailureKind unmarked);

// What replica `name` told with EncodeFailure: "<name> failed: <its
// message>" of its status code, marked with the kind its exit code stands
// for, so that the replica told ends with that code. InternalError naming
// `name` and the text when it does not parse.
absl::Status DecodeFailure(const std::string& name, absl::string_view text);

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_GROUP_OUTCOME_H_
