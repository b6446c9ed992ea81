#include "evaluator/evaluator.h"

#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/exit_codes.h"
#include "checkpoint/checkpoint_shard.h"
#include "cluster/checkpoint_layout.h"
#include "base/event_file.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "data/dataset.h"
#include "data/input.h"
#include "job/job_description.h"
#include "model/backend.h"

namespace pstrain::evaluator {
namespace {

// The complete checkpoints under `dir` with steps in (after, upto],
// ascending, less those in `unusable`. The steps in that range that are not
// complete go to `incomplete`, each logged once (`said`); they are looked
// at again next time (a chief that fell back to an older checkpoint may be
// writing one below the index's step).
std::vector<CompleteCheckpoint> ToScore(const std::string& dir, int64_t after, int64_t upto,
                                        const std::set<int64_t>& unusable, std::set<int64_t>* said,
                                        std::set<int64_t>* incomplete) {
  std::vector<IncompleteCheckpoint> skipped;
  std::vector<CompleteCheckpoint> all = CompleteCheckpoints(dir, &skipped);
  std::vector<CompleteCheckpoint> out;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->step > after && it->step <= upto && unusable.count(it->step) == 0) {
      out.push_back(*it);
    }
  }
  incomplete->clear();
  for (auto it = skipped.rbegin(); it != skipped.rend(); ++it) {
    if (it->step <= after || it->step > upto) continue;
    incomplete->insert(it->step);
    if (said->insert(it->step).second) {
      Log("evaluator: ", it->ToString(), "; not scoring it");
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<float>> LoadCheckpointParams(const std::string& dir, int64_t step,
                                                        const Placement& placement,
                                                        const std::vector<int64_t>& offsets,
                                                        int64_t num_parameters,
                                                        train::LocalTables* tables) {
  std::vector<float> params(num_parameters);
  std::map<std::string, int> variable_index;
  for (size_t v = 0; v < placement.variables.size(); ++v) {
    variable_index[placement.variables[v].name] = static_cast<int>(v);
  }
  for (int ps = 0; ps < placement.num_ps; ++ps) {
    const std::string path = ShardPath(dir, step, ps, placement.num_ps);
    PSTRAIN_ASSIGN_OR_RETURN(ckpt::ShardContents shard, ckpt::ReadShard(path));
    std::map<std::string, const v1::TensorCheckpoint*> by_key;
    for (const v1::TensorCheckpoint& t : shard.tensors) by_key[t.key()] = &t;
    for (int i = 0; tables != nullptr && i < tables->size(); ++i) {
      train::LocalTable* table = &(*tables)[i];
      auto it = by_key.find(table->name());
      if (it == by_key.end() || !it->second->embedding()) {
        return absl::DataLossError(
            absl::StrCat("checkpoint shard ", path, ": no table ", table->name()));
      }
      const v1::TensorCheckpoint& t = *it->second;
      if (absl::Status s = ckpt::CheckTableRecord(t, shard.header.num_slots(), table->dim());
          !s.ok()) {
        return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": ", s.message()));
      }
      const int64_t stride = t.dim() * (1 + shard.header.num_slots());
      std::vector<float> row(t.dim());
      for (int r = 0; r < t.row_ids_size(); ++r) {
        // Values first; the optimizer's slots follow.
        std::memcpy(row.data(), t.data().data() + r * stride * 4, t.dim() * 4);
        if (absl::Status s = table->Set(t.row_ids(r), row.data()); !s.ok()) {
          return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": ", s.message()));
        }
      }
    }
    for (const SliceDef& s : placement.SlicesOn(ps)) {
      auto it = by_key.find(s.key());
      if (it == by_key.end()) {
        return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": no ", s.key()));
      }
      const std::string& data = it->second->data();
      if (static_cast<int64_t>(data.size()) < s.bytes()) {
        return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": ", s.key(), " holds ",
                                                data.size(), " bytes, expected ", s.bytes(),
                                                " or more"));
      }
      // Values first; the optimizer's slots follow and are not needed here.
      std::memcpy(params.data() + offsets[variable_index.at(s.variable)] + s.element_offset(),
                  data.data(), s.bytes());
    }
  }
  return params;
}

absl::StatusOr<CheckpointValues> LoadCheckpointValues(const model::Network& net, uint64_t seed,
                                                      const std::string& dir, int64_t step,
                                                      int num_ps) {
  // Read as the PS that wrote it placed the variables (a job restored onto
  // another number of PS writes with the new count).
  PSTRAIN_ASSIGN_OR_RETURN(Placement placement, ComputePlacement(net.variables(), num_ps));
  // The embedding tables: every row the checkpoint holds, the initial
  // values for the rest.
  PSTRAIN_ASSIGN_OR_RETURN(train::LocalTables tables,
                           train::LocalTables::Create(net.variables(), seed, nullptr));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<float> params,
      LoadCheckpointParams(dir, step, placement, net.offsets(), net.num_parameters(), &tables));
  return CheckpointValues{std::move(tables), std::move(params)};
}

absl::StatusOr<model::BatchResult> ScoreCheckpoint(model::Backend& backend, uint64_t seed,
                                                   const std::string& dir, int64_t step, int num_ps,
                                                   const data::Dataset& test) {
  const model::Network& net = backend.network();
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointValues values,
                           LoadCheckpointValues(net, seed, dir, step, num_ps));
  const train::LocalTables& tables = values.tables;
  const std::vector<float>& params = values.params;
  return model::EvaluateExamples(
      net.embeddings(),
      [&tables](const std::string& table, absl::Span<const int64_t> ids, float* out) {
        return tables.Read(table, ids, out);
      },
      test, 1024,
      [&](const float* in, const int32_t* labels, int n) {
        return backend.Evaluate(params.data(), in, labels, n);
      });
}

absl::Status CheckRunModel(const std::string& dir, const model::Network& net,
                           const model::JobSpec& job) {
  absl::StatusOr<Json> model = ReadRunModel(dir);
  if (!model.ok()) return absl::OkStatus();  // a run from before run.json
  const std::vector<std::string> diff = ModelDifferences(
      *model, DescribeModel(net.variables(), job.optimizer.name), "in the run", "here");
  if (diff.empty()) return absl::OkStatus();
  return WithFailureKind(
      absl::FailedPreconditionError(absl::StrCat(
          "the evaluator was started with another model than the run it scores (", dir,
          "/run.json): ", JoinDifferences(diff),
          ". Give every task of the job the same job flags")),
      FailureKind::kBadConfig);
}

absl::StatusOr<std::vector<Score>> RunEvaluator(const EvaluatorOptions& options) {
  const model::JobSpec& job = options.job;
  // The model, the test split and the event file: setup, whose failures
  // are the configuration's (base/exit_codes.h).
  absl::StatusOr<std::unique_ptr<model::Backend>> made =
      model::CreateBackend(job.model, 1024, job.device);
  if (!made.ok()) return AsSetupFailure(made.status());
  std::unique_ptr<model::Backend> backend = *std::move(made);
  Log("evaluator: scoring on ", backend->Describe());
  absl::StatusOr<data::Dataset> loaded =
      data::LoadInputSplit(job.data_dir, job.input, data::Split::kTest, job.model.num_classes(),
                           /*pixels_as_bytes=*/true);
  if (!loaded.ok()) return AsSetupFailure(loaded.status());
  const data::Dataset test = *std::move(loaded);
  const std::string eval_dir = options.output_dir + "/eval";
  absl::StatusOr<std::unique_ptr<EventWriter>> opened = EventWriter::Open(eval_dir);
  if (!opened.ok()) return AsSetupFailure(opened.status());
  std::unique_ptr<EventWriter> events = *std::move(opened);
  const std::string scored_path = ScoredPath(options.output_dir);
  int64_t scored = ReadScoredStep(options.output_dir);
  Log("evaluator: watching ", CheckpointIndexPath(options.output_dir),
      scored >= 0 ? absl::StrCat(" (scored up to step ", scored, ")") : std::string());
  std::vector<Score> scores;
  std::set<int64_t> unusable;  // damaged checkpoints, said once
  std::set<int64_t> said, incomplete;
  absl::Time last_new = absl::Now();
  bool model_checked = false;
  while (true) {
    // No index yet: nothing written so far.
    CheckpointIndex index{-1, false};
    if (auto read = ReadCheckpointIndex(options.output_dir); read.ok()) {
      index = *read;
    } else if (read.status().code() != absl::StatusCode::kNotFound) {
      return read.status();
    }
    // Every complete checkpoint not scored yet, oldest first (with `once`,
    // only the newest).
    std::vector<CompleteCheckpoint> steps =
        ToScore(options.output_dir, scored, index.step, unusable, &said, &incomplete);
    // The index is written after the checkpoint it names is whole.
    if (index.final && incomplete.count(index.step) > 0) {
      return absl::DataLossError(absl::StrCat("evaluator: the job's final checkpoint, at step ",
                                              index.step, ", cannot be scored (see above)"));
    }
    if (options.once && !steps.empty()) steps = {steps.back()};
    // Before the first score: the run whose checkpoints these are is of
    // this model (its run.json), or the evaluator was given other flags.
    if (!steps.empty() && !model_checked) {
      PSTRAIN_RETURN_IF_ERROR(CheckRunModel(options.output_dir, backend->network(), job));
      model_checked = true;
    }
    for (const CompleteCheckpoint& c : steps) {
      const int64_t step = c.step;
      auto scored_now =
          ScoreCheckpoint(*backend, job.seed, options.output_dir, step, c.num_ps, test);
      // A chief that does not know of this evaluator (one left out of the
      // cluster) may delete an old checkpoint while it is being read.
      if (scored_now.status().code() == absl::StatusCode::kNotFound) {
        Log("checkpoint at step ", step,
            " is gone before it was scored: ", scored_now.status().message());
        continue;
      }
      // A damaged checkpoint (a checksum that fails, a tensor missing) is
      // passed over with a line saying why, unless it is the job's last.
      if (scored_now.status().code() == absl::StatusCode::kDataLoss &&
          !(index.final && step == index.step)) {
        Log("evaluator: checkpoint at step ", step,
            " cannot be scored: ", scored_now.status().message(), "; not scoring it");
        unusable.insert(step);
        continue;
      }
      if (!scored_now.ok()) return scored_now.status();
      const model::BatchResult& r = *scored_now;
      Score s{step, r.mean_loss(), r.accuracy()};
      if (r.has_auc()) s.auc = r.Auc();
      // The chief writes the final step's summary when it knows of no
      // evaluator (this one not in its cluster): once, whichever is first.
      PSTRAIN_ASSIGN_OR_RETURN(const bool wrote, events->WriteScalarsOnce(s.step, r.ScoreScalars()));
      if (!wrote) Log("eval summary of step ", s.step, ": the chief wrote it already");
      PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(scored_path, absl::StrCat(s.step, "\n")));
      Log(absl::StrFormat("eval at step %d: loss %.4f - accuracy %.4f%s", s.step, s.loss,
                          s.accuracy,
                          s.auc.has_value() ? absl::StrFormat(" - auc %.4f", *s.auc) : ""));
      scores.push_back(s);
      scored = step;
      last_new = absl::Now();
      if (options.once) return scores;
    }
    if (index.final && index.step <= scored) return scores;
    if (options.job_failure) {
      if (absl::Status failed = options.job_failure(); !failed.ok()) return failed;
    }
    if (absl::Now() - last_new > options.idle_timeout) {
      return absl::DeadlineExceededError(
          absl::StrCat("evaluator: no new checkpoint in ", CheckpointIndexPath(options.output_dir),
                       " for ", absl::FormatDuration(options.idle_timeout)));
    }
    absl::SleepFor(options.poll);
  }
}

}  // namespace pstrain::evaluator
