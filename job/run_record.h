// <output_dir>/run.json: what a run of a job is, so that the directory
// describes itself and a relaunch into it can be checked. The chief writes it
// when it starts (before it touches a checkpoint) and adds its end:
//   {"started": "2026-11-27T01:02:03Z", "ended": "...", "outcome": "ok",
//    "launches": 2,                      // starts of a chief in this dir
//    "first_started": "...",             // the first of them
//    "version": "0.1.0", "commit": "...",  // as the binary says
//    "flags": ["--epochs=2", ...],       // as given to this launch
//    "cluster": {"chief": [...], "ps": [...], ...},
//    "job": {"batch_size": 32, "learning_rate": 0.05, ...},
//    "model": {"optimizer": "adam",
//              "variables": [{"name": "dense_0/kernel", "shape": [784, 128]},
//                            {"name": "ids", "shape": [1000, 8], "table": true}]},
//    "model_config": "<the config file's text>"}
// A relaunch whose "model" differs from the one on disk (other variables,
// shapes or optimizer) is refused before anything in the directory changes:
// its checkpoints belong to the other model, are not damaged, and stay.
//
// The run's record for TensorBoard too: each start and end adds an event file
// at the top of <output_dir> with the hparams plugin's session start info
// (every setting of "job" that is a number, string or bool, and "ps",
// "replicas" and "parameters") or end info (success or failure), so that
// `tensorboard --logdir` over several runs' directories lists them in its
// HParams tab beside their train/ and eval/ scalars.
// Stateless; thread-compatible.
#ifndef PSTRAIN_JOB_RUN_RECORD_H_
#define PSTRAIN_JOB_RUN_RECORD_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/dir_lock.h"
#include "base/json.h"
#include "job/job_description.h"
#include "proto/event.pb.h"

namespace pstrain {

// "run.json" under `dir`.
std::string RunRecordPath(const std::string& dir);

// One job per output directory: creates `dir` when missing and locks it
// (base/dir_lock.h) for the caller's life; AcceptRelaunch then names this
// process and `task` in the lock file, which is untouched until then. A
// directory held by another process is waited for `wait` (a predecessor
// still exiting: a relaunch after a crash takes the lock over), then
// refused, marked as the configuration's failure (exit 2): AlreadyExists
// naming the directory and the holder. Errors of the file system (a
// read-only directory) are refused alike, as FailedPrecondition.
absl::StatusOr<std::unique_ptr<DirLock>> LockOutputDir(const std::string& dir,
                                                       absl::string_view task,
                                                       absl::Duration wait = absl::Seconds(10));

// OK when `dir` holds no run.json (a new directory, or one written before
// run.json existed) or one whose "model" matches `model` (DescribeModel). Else
// FailedPrecondition naming the directory, every difference
// (ModelDifferences, job/job_description.h) and how to
// start afresh; nothing is changed. A run.json that does not parse is
// DataLoss naming the file.
absl::Status CheckRelaunch(const std::string& dir, const Json& model);

// For the holder of `dir`'s lock (LockOutputDir): CheckRelaunch, then, only
// when the launch is accepted, the lock's Claim (its holder line), so that
// a refused relaunch changes no file. CheckRelaunch's errors, or the file
// system's marked as the configuration's failure (exit 2).
absl::Status AcceptRelaunch(DirLock& lock, const std::string& dir, const Json& model);

// Writes run.json for a launch starting at `started`: `run` (flags,
// version, cluster, job, model, ...) with "started", "launches" (one more
// than the run.json it replaces) and "first_started" kept from it.
// Written atomically (a crash leaves the old or the new one). Then the
// hparams session start (HparamsOfRun).
absl::Status WriteRunStart(const std::string& dir, Json run, absl::Time started);

// Adds "ended", "outcome" ("ok", or the error) and "exit_code" (what the
// chief exits with: RoleExitCode, permanent unless the status says
// otherwise) to run.json, then the hparams session end.
absl::Status WriteRunEnd(const std::string& dir, const absl::Status& outcome, absl::Time ended);

// Records a launch that failed before it began (its data unreadable, a
// take-over refused): "ended", "outcome" and "exit_code" as WriteRunEnd
// adds them, on run.json when it is this job's (the job flags and cluster
// of `run`, RunInfo's form), else, when there is none, on a new one made of
// `run`. A run.json of another job is left as it is. The caller holds the
// directory (LockOutputDir): the record is its own launch's. Returns
// whether it recorded the failure (false: another job's run.json, which
// this job's tasks do not read as theirs).
absl::StatusOr<bool> RecordFailedLaunch(const std::string& dir, const Json& run,
                                const absl::Status& outcome, absl::Time ended);

// The job flags among `flags` (as given: "--name=value", "--name",
// "--noname"; FlagGroup::kJob in job/flag_table.h), in order.
std::vector<std::string> JobFlagsOf(const std::vector<std::string>& flags);

// A record's "flags" (RunInfo's form: every flag of the launch), as given;
// none when it has no such array.
std::vector<std::string> FlagsOf(const Json& run);

// When `dir`'s run.json records a run that ended well ("outcome": "ok") of
// this job, that is with the job flags of `flags` (JobFlagsOf, compared as
// given) on `cluster` (TF_CONFIG's "cluster"): when it ended (its
// "ended"). None otherwise: no run.json, another job's (a relaunch with
// other settings), a run under way or one that failed. What a task started
// after its job finished (a PS restarted by its orchestrator once the chief
// had stopped it, a late worker) asks before waiting for a chief that has
// gone.
std::optional<std::string> EndedWell(const std::string& dir,
                                     const std::vector<std::string>& flags, const Json& cluster);

// When `dir`'s run.json records that this job (as EndedWell tells it)
// failed for good at or after `since` (a task's own start, less a second:
// a failure recorded before it started belongs to an earlier launch, which
// a relaunch is not bound by): that failure, marked with the kind its
// recorded exit code says, "the job failed at 2026-11-28T10:02:03Z (exit
// 2): <the chief's reason>". None otherwise. What a task waiting for the
// chief or its PS asks, so that a failure reaches it within its next look.
std::optional<absl::Status> EndedBadly(const std::string& dir,
                                       const std::vector<std::string>& flags, const Json& cluster,
                                       absl::Time since);

// The hparams plugin's session start info of `run` (run.json's form).
events::HParamsPluginData HparamsOfRun(const Json& run, absl::Time started);

// RFC 3339 in UTC, to the second: "2026-11-27T01:02:03Z".
std::string Rfc3339(absl::Time t);

}  // namespace pstrain

#endif  // PSTRAIN_JOB_RUN_RECORD_H_
