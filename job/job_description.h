// A job as data, for the records a run leaves (run.json, final_metrics.json)
// and for tasks to compare their settings with the chief's: a task started
// with other job flags than the chief (a worker given --hidden=64, or
// --batch_size=128) is refused at once, every difference named, rather
// than failing later on a size mismatch or training silently with the
// chief's settings.
#ifndef PSTRAIN_JOB_JOB_DESCRIPTION_H_
#define PSTRAIN_JOB_JOB_DESCRIPTION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/json.h"
#include "cluster/placement.h"
#include "model/job_spec.h"
#include "model/network.h"

namespace pstrain {

// The part of a job a checkpoint depends on: the optimizer (its slots are
// stored beside each value) and each variable's name, shape and kind:
// {"optimizer": "adam", "variables": [{"name": "dense_0/kernel", "shape":
// [784, 128]}, {"name": "ids", "shape": [1000, 8], "table": true}]}.
Json DescribeModel(const std::vector<VariableDef>& variables, const std::string& optimizer);

// The job's settings as resolved (flags, config file and defaults
// together), each under the name of the flag that sets it: "batch_size",
// "learning_rate", "optimizer" and the hyper-parameters it uses, "seed",
// "consistency", "checkpoint_secs", "data_dir", ...
Json DescribeJob(const model::JobSpec& job);

// A test-set score as final_metrics.json opens: {"test_accuracy",
// "test_loss", "test_auc" (binary labels only), "test_examples",
// "global_step": the step of the values scored}.
Json DescribeScore(const model::BatchResult& score, int64_t global_step);

// The model <dir>/run.json records (its "model": DescribeModel's form;
// job/run_record.h writes the file). NotFound when there is no
// run.json, or one that records a launch that failed before it began (an
// "outcome" and no "model"); DataLoss naming the file when it does not
// parse or has no "model"; ReadFile's other errors.
absl::StatusOr<Json> ReadRunModel(const std::string& dir);

// {"job": DescribeJob(job), "model": DescribeModel of job's network}: what
// a task sends the chief to compare (coordinator/coordinator.h). Errors of
// building the network from job.model.
absl::StatusOr<Json> DescribeJobAndModel(const model::JobSpec& job);

// Each way in which the model `b` (DescribeModel) differs from `a`, one
// phrase each, `a`'s variables first, with `a_is` and `b_is` saying where
// each is ("on disk", "in this job"): "optimizer: adam on disk, sgd in
// this job", "dense_0/kernel: shape [784, 128] on disk, shape [784, 64] in
// this job", "dense_2/bias: shape [10] on disk, not in this job",
// "emb: not on disk, table [1000, 8] in this job". Empty when they match.
std::vector<std::string> ModelDifferences(const Json& a, const Json& b, absl::string_view a_is,
                                          absl::string_view b_is);

// `differences` joined with "; " for a message, the first kMostDifferences
// of them and then "and N more" (two models of hundreds of variables
// differ in all of them: ResNet-50 against an MLP).
inline constexpr int kMostDifferences = 8;
std::string JoinDifferences(const std::vector<std::string>& differences);

// Each setting (DescribeJob) on which `mine` differs from `chief`'s, as
// "--batch_size=128 here, 32 on the chief". Settings that are each task's
// own (--device, --num_gpus, transport and checkpoint flags, which only
// the chief reads) are not compared.
std::vector<std::string> JobDifferences(const Json& chief, const Json& mine);

}  // namespace pstrain

#endif  // PSTRAIN_JOB_JOB_DESCRIPTION_H_
