#include "train/local_trainer.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/checkpoint_layout.h"
#include "common/event_file.h"
#include "common/file_util.h"
#include "common/flush_denormals.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "data/dataset.h"
#include "data/input.h"
#include "data/prefetcher.h"
#include "job/job_description.h"
#include "job/run_record.h"
#include "model/backend.h"
#include "model/embeddings.h"
#include "model/network.h"
#include "optim/optimizer.h"
#include "train/local_checkpoint.h"
#include "train/local_table.h"
#include "train/progress.h"

namespace pstrain::train {

namespace {

// RunLocal, which sets `*recorded` once run.json holds this run's start (so
// that a failure after it is recorded as the run's end).
absl::StatusOr<LocalResult> TrainLocally(const model::JobSpec& job, const LocalOptions& options,
                                         bool* recorded) {
  const int log_every_steps = std::max(options.log_every_steps, 1);
  const std::string& dir = options.output_dir;
  const bool writes = !dir.empty();
  const absl::Time started = absl::Now();
  const absl::Time load_start = absl::Now();
  PSTRAIN_ASSIGN_OR_RETURN(data::TrainingInput train_data,
                           data::OpenTrainingInput(job.data_dir, job.input, 0, 1, job.batch_size,
                                                   job.seed, job.model.num_classes()));
  data::BatchSource& train = *train_data.source;
  if (train_data.skipped_records > 0) {
    Log("skipped ", train_data.skipped_records, " bad training records (skip_bad_records)");
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      data::Dataset test,
      data::LoadInputSplit(job.data_dir, job.input, data::Split::kTest, job.model.num_classes()));
  const double load_seconds = absl::ToDoubleSeconds(absl::Now() - load_start);
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<model::Backend> backend,
      model::CreateBackend(job.model, std::max(job.batch_size, 1024), job.device));
  Log("computing on ", backend->Describe());
  const model::Network* mlp = &backend->network();
  if (train.example_dim() != job.model.input_dim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("data examples have %d features but the model's input_dim is %d",
                        train.example_dim(), job.model.input_dim));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> opt,
                           optim::CreateOptimizer(job.optimizer));
  if (train.batches_per_epoch() == 0) {
    return absl::InvalidArgumentError("the training set is smaller than one batch");
  }
  const int64_t total = job.max_steps > 0 ? job.max_steps : job.epochs * train.batches_per_epoch();
  std::vector<float> params = mlp->InitialParameters(job.seed);
  const size_t n = params.size();
  std::vector<float> grads(n);
  // Slots after the values, as the PS keeps them.
  std::vector<std::vector<float>> slot_store(opt->num_slots());
  std::vector<absl::Span<float>> slots;
  for (int k = 0; k < opt->num_slots(); ++k) {
    slot_store[k].assign(n, opt->initial_slot_value(k));
    slots.push_back(absl::MakeSpan(slot_store[k]));
  }
  // The embedding tables, held here with the PS's row semantics.
  const model::Embeddings& embeddings = mlp->embeddings();
  const bool embedded = !embeddings.empty();
  PSTRAIN_ASSIGN_OR_RETURN(LocalTables tables,
                           LocalTables::Create(mlp->variables(), job.seed, &job.optimizer));
  // Before anything in the output directory changes: a run of another
  // model there is refused, its checkpoints left as they are.
  const Json model_json = DescribeModel(mlp->variables(), job.optimizer.name);
  LocalModelState state;
  PSTRAIN_ASSIGN_OR_RETURN(state.placement, ComputePlacement(mlp->variables(), 1));
  state.offsets = mlp->offsets();
  state.optimizer = job.optimizer.name;
  state.params = &params;
  state.slots = &slot_store;
  state.tables = &tables;
  int64_t first = 0;
  std::unique_ptr<EventWriter> train_summaries;
  if (writes) {
    PSTRAIN_RETURN_IF_ERROR(CheckRelaunch(dir, model_json));
    PSTRAIN_ASSIGN_OR_RETURN(first, RestoreLocalCheckpoint(dir, state));
    PSTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
    Json run = options.run;
    run["job"] = DescribeJob(job);
    run["model"] = model_json;
    run["cluster"] = Json::object();  // none: one process
    PSTRAIN_RETURN_IF_ERROR(WriteRunStart(dir, std::move(run), started));
    *recorded = true;
    PSTRAIN_ASSIGN_OR_RETURN(train_summaries, EventWriter::Open(dir + "/train"));
  }
  if (first > 0) {
    Log("resuming from the checkpoint at step ", first, " in ", dir, ": its input at batch ",
        first % train.batches_per_epoch(), " of ", train.batches_per_epoch(), " in epoch ",
        first / train.batches_per_epoch());
  }
  if (first >= total) {
    Log("the run had reached step ", first, " of ", total, " already; scoring it");
  }
  PSTRAIN_RETURN_IF_ERROR(train.Seek(std::min(first, total)));
  model::EmbeddingBatch lookups;
  std::vector<float> emb_out, emb_grad;
  LocalResult result;
  result.resumed_step = first;
  if (embedded) {
    emb_out.resize(static_cast<size_t>(job.batch_size) * embeddings.output_width());
    emb_grad.resize(emb_out.size());
  }
  auto read_rows = [&tables](const std::string& table, absl::Span<const int64_t> ids, float* out) {
    return tables.Read(table, ids, out);
  };
  std::vector<float> x(static_cast<size_t>(job.batch_size) * train.example_dim());
  std::vector<int32_t> y(job.batch_size);
  const bool with_ids = embeddings.reads_ids();
  std::vector<int64_t> ids(with_ids ? static_cast<size_t>(job.batch_size) * train.ids_dim() : 0);
  // Batches are gathered on a background thread, a few steps ahead.
  data::Prefetcher prefetch(&train, 4, with_ids);
  Log("training locally: ", total, " steps of batch ", job.batch_size, " over ", train.shard_size(),
      " examples", train_data.streamed ? " (streamed)" : "",
      first > 0 ? absl::StrCat(", from step ", std::min(first, total)) : std::string());
  // The test set scored with the current parameters (and table).
  auto score = [&]() -> absl::StatusOr<model::BatchResult> {
    return model::EvaluateExamples(embeddings, read_rows, test.features.data(), test.ids.data(),
                                   test.labels.data(), test.num_examples,
                                   static_cast<int>(test.example_dim), test.ids_dim, 1024,
                                   [&](const float* in, const int32_t* labels, int n) {
                                     return backend->Evaluate(params.data(), in, labels, n);
                                   });
  };
  // Logs an epoch's test score and keeps its accuracy.
  auto report_epoch = [&](int64_t epoch, const model::BatchResult& e) {
    const double accuracy = e.accuracy();
    result.epoch_test_accuracy.push_back(accuracy);
    Log(absl::StrFormat("epoch %d/%d: test accuracy %.4f%s - test loss %.4f", epoch, job.epochs,
                        accuracy, e.has_auc() ? absl::StrFormat(" - test auc %.4f", e.Auc()) : "",
                        e.mean_loss()));
  };
  const int64_t per_epoch = train.batches_per_epoch();
  absl::Duration eval_time;
  model::BatchResult window;
  const absl::Time start = absl::Now();
  absl::Time window_start = start;
  absl::Time last_checkpoint = start;
  int64_t checkpointed = first;
  // Saves the step reached; a failure is reported and tried again later.
  auto checkpoint = [&](int64_t step, bool final) {
    const absl::Time save_start = absl::Now();
    absl::Status s = SaveLocalCheckpoint(dir, step, state, job.keep_checkpoints, final);
    last_checkpoint = absl::Now();
    if (!s.ok()) {
      Log("checkpoint at step ", step, " failed: ", s.message());
      return s;
    }
    checkpointed = step;
    Log("checkpoint at step ", step, " written to ", CheckpointDir(dir, step), " in ",
        absl::FormatDuration(absl::Now() - save_start));
    return absl::OkStatus();
  };
  int64_t step = std::min(first, total);
  while (step < total) {
    if (options.stop != nullptr && options.stop->load(std::memory_order_relaxed) != 0) {
      result.stopped_by = options.stop->load(std::memory_order_relaxed);
      break;
    }
    ++step;
    PSTRAIN_RETURN_IF_ERROR(
        prefetch.Next(x.data(), y.data(), with_ids ? ids.data() : nullptr).status());
    backend->SetStepSeed(model::StepSeed(job.seed, 0, step));
    const float* input = x.data();
    if (embedded) {
      PSTRAIN_RETURN_IF_ERROR(
          embeddings.MakeBags(x.data(), ids.data(), train.ids_dim(), job.batch_size, &lookups));
      PSTRAIN_RETURN_IF_ERROR(embeddings.FetchRows(read_rows, &lookups));
      embeddings.Forward(lookups, emb_out.data());
      input = emb_out.data();
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        model::BatchResult br,
        backend->ComputeGradients(params.data(), input, y.data(), job.batch_size, grads.data(),
                                  nullptr, embedded ? emb_grad.data() : nullptr));
    {
      // As the PS applies it (optim/optimizer.h).
      ScopedFlushDenormals flush;
      opt->Apply(absl::MakeSpan(params), absl::MakeConstSpan(grads), absl::MakeConstSpan(slots),
                 step);
    }
    if (embedded) {
      embeddings.Backward(emb_grad.data(), &lookups);
      for (int i = 0; i < embeddings.size(); ++i) {
        PSTRAIN_RETURN_IF_ERROR(
            tables[i].Apply(lookups.bags[i].unique_ids, lookups.row_grads[i].data()));
      }
    }
    window.Add(br);
    if (step % log_every_steps == 0 || step == total) {
      const absl::Time now = absl::Now();
      const double rate = window.count / std::max(1e-9, absl::ToDoubleSeconds(now - window_start));
      Log(ProgressLine(step, total, window, rate, absl::ToDoubleSeconds(now - start),
                       (total - step) * job.batch_size / rate));
      if (train_summaries != nullptr) {
        PSTRAIN_RETURN_IF_ERROR(train_summaries->WriteScalars(
            step, ProgressScalars(window, rate, rate / job.batch_size, step,
                                  job.optimizer.learning_rate)));
      }
      window = model::BatchResult();
      window_start = now;
    }
    if (job.max_steps == 0 && step % per_epoch == 0 && step < total) {
      const absl::Time eval_start = absl::Now();
      PSTRAIN_ASSIGN_OR_RETURN(model::BatchResult e, score());
      report_epoch(step / per_epoch, e);
      eval_time += absl::Now() - eval_start;
      window_start += absl::Now() - eval_start;
    }
    if (writes && step < total &&
        ((job.checkpoint_every_secs > 0 &&
          absl::Now() - last_checkpoint >= absl::Seconds(job.checkpoint_every_secs)) ||
         (job.checkpoint_every_steps > 0 && step >= checkpointed + job.checkpoint_every_steps))) {
      const absl::Time save_start = absl::Now();
      checkpoint(step, false).IgnoreError();  // logged; the run goes on
      eval_time += absl::Now() - save_start;
      window_start += absl::Now() - save_start;
    }
  }
  result.steps = step;
  const int64_t trained = step - std::min(first, total);
  result.train_seconds = absl::ToDoubleSeconds(absl::Now() - start - eval_time);
  result.load_seconds = load_seconds;
  result.input_wait_seconds = absl::ToDoubleSeconds(prefetch.waited());
  result.examples_per_sec = trained * job.batch_size / std::max(result.train_seconds, 1e-9);
  if (result.stopped_by != 0) {
    // Stopped: the step reached is kept, and the run ends there.
    Log("stopped by signal ", result.stopped_by, " at step ", step, " of ", total);
    absl::Status saved = writes && step > checkpointed ? checkpoint(step, false) : absl::OkStatus();
    if (writes) {
      const absl::Status outcome = absl::CancelledError(
          absl::StrCat("stopped by signal ", result.stopped_by, " at step ", step,
                       saved.ok() ? absl::StrCat(", checkpointed at step ", checkpointed)
                                  : absl::StrCat("; its checkpoint failed: ", saved.message())));
      if (absl::Status s = WriteRunEnd(dir, outcome, absl::Now()); !s.ok()) {
        Log("could not record the run's end in ", RunRecordPath(dir), ": ", s.message());
      }
    }
    PSTRAIN_RETURN_IF_ERROR(saved);
    result.params = std::move(params);
    result.tables = std::move(tables);
    return result;
  }
  if (writes && step > checkpointed) {
    PSTRAIN_RETURN_IF_ERROR(checkpoint(step, /*final=*/true));
  }
  PSTRAIN_ASSIGN_OR_RETURN(model::BatchResult r, score());
  result.test_accuracy = r.accuracy();
  if (job.max_steps == 0) report_epoch(job.epochs, r);
  result.test_loss = r.mean_loss();
  if (r.has_auc()) result.test_auc = r.Auc();
  if (writes) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> eval, EventWriter::Open(dir + "/eval"));
    PSTRAIN_RETURN_IF_ERROR(eval->WriteScalars(step, r.ScoreScalars()));
    // As a cluster's chief writes it (the keys it shares with one mean the same).
    Json metrics = DescribeScore(r, step);
    metrics["resumed_from_step"] = first;
    metrics["examples"] = trained * job.batch_size;
    metrics["training_seconds"] = result.train_seconds;
    metrics["examples_per_sec"] = result.examples_per_sec;
    metrics["load_seconds"] = result.load_seconds;
    metrics["input_wait_seconds"] = result.input_wait_seconds;
    metrics["epoch_test_accuracy"] = result.epoch_test_accuracy;
    metrics["seconds"] = absl::ToDoubleSeconds(absl::Now() - started);
    metrics["job"] = DescribeJob(job);
    metrics["local"] = true;
    PSTRAIN_RETURN_IF_ERROR(
        WriteFileAtomically(dir + "/final_metrics.json", metrics.dump() + "\n"));
    if (absl::Status s = WriteRunEnd(dir, absl::OkStatus(), absl::Now()); !s.ok()) {
      Log("could not record the run's end in ", RunRecordPath(dir), ": ", s.message());
    }
  }
  result.params = std::move(params);
  result.tables = std::move(tables);
  return result;
}

}  // namespace

absl::StatusOr<LocalResult> RunLocal(const model::JobSpec& job, const LocalOptions& options) {
  bool recorded = false;
  absl::StatusOr<LocalResult> result = TrainLocally(job, options, &recorded);
  if (!result.ok() && recorded) {
    if (absl::Status s = WriteRunEnd(options.output_dir, result.status(), absl::Now()); !s.ok()) {
      Log("could not record the run's end in ", RunRecordPath(options.output_dir), ": ",
          s.message());
    }
  }
  return result;
}

absl::StatusOr<LocalResult> RunLocal(const model::JobSpec& job, int log_every_steps) {
  LocalOptions options;
  options.log_every_steps = log_every_steps;
  return RunLocal(job, options);
}

}  // namespace pstrain::train
