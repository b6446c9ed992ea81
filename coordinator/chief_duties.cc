#include "coordinator/chief_duties.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/event_file.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/checkpointer.h"
#include "data/dataset.h"
#include "data/input.h"
#include "model/embeddings.h"

namespace pstrain::coordinator {

ChiefDuties::ChiefDuties(const TfConfig& cfg, const ChiefOptions& options)
    : cfg_(cfg),
      options_(options),
      tracker_(cfg.cluster, options.job.chief_trains),
      service_(&tracker_, options.security) {}

ChiefDuties::~ChiefDuties() {
  StopCheckpointing();
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
}

void ChiefDuties::StopCheckpointing() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (checkpointer_.joinable()) checkpointer_.join();
  if (watcher_.joinable()) watcher_.join();
}

absl::StatusOr<int64_t> ChiefDuties::GlobalStep() {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<v1::StatsResponse> stats, client_->Stats());
  int64_t step = -1;
  for (const v1::StatsResponse& s : stats) {
    step = step < 0 ? s.global_step() : std::min(step, s.global_step());
  }
  return step;
}

absl::Status ChiefDuties::CheckpointNow(bool final) {
  absl::MutexLock ps_lock(&ps_mu_);
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t step, GlobalStep());
  {
    absl::MutexLock lock(&mu_);
    if (step <= last_checkpoint_ && !final) return absl::OkStatus();
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      CheckpointRecord r,
      SaveCheckpoint(client_.get(), options_.output_dir, step, options_.job.keep_checkpoints, final,
                     /*spare_unscored=*/!cfg_.cluster.evaluator.empty()));
  Log(absl::StrFormat("checkpoint at step %d: %d bytes in %.3fs (ps: %.3fs) under %s", r.step,
                      r.bytes, r.seconds, r.ps_seconds, options_.output_dir));
  absl::MutexLock lock(&mu_);
  last_checkpoint_ = step;
  return absl::OkStatus();
}

void ChiefDuties::CheckpointLoop() {
  const model::JobSpec& job = options_.job;
  absl::Time last_time = absl::Now();
  while (true) {
    int64_t last_step;
    {
      absl::MutexLock lock(&mu_);
      // Wakes every 200 ms to look at the step, or at once to stop.
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(200));
      if (stopping_) return;
      // No checkpoint while a PS is away: it would fail, and hold up the
      // restore that follows its return.
      if (ps_down_ > 0) continue;
      last_step = std::max<int64_t>(last_checkpoint_, 0);
    }
    bool due = job.checkpoint_every_secs > 0 &&
               absl::Now() - last_time >= absl::Seconds(job.checkpoint_every_secs);
    if (!due && job.checkpoint_every_steps > 0) {
      auto step = GlobalStep();
      if (!step.ok()) continue;
      due = *step >= last_step + job.checkpoint_every_steps;
    }
    if (!due) continue;
    last_time = absl::Now();
    // A failed checkpoint is reported and tried again later; the job goes on.
    if (absl::Status s = CheckpointNow(); !s.ok()) Log("checkpoint failed: ", s.message());
  }
}

absl::StatusOr<std::unique_ptr<ChiefDuties>> ChiefDuties::Start(const TfConfig& cfg,
                                                                const ChiefOptions& options) {
  std::unique_ptr<ChiefDuties> chief(new ChiefDuties(cfg, options));
  chief->started_ = absl::Now();
  PSTRAIN_ASSIGN_OR_RETURN(
      chief->server_,
      GrpcServer::Create({options.bind_address, 512 << 20, options.security}, {&chief->service_}));
  Log("coordinator serving on ", options.bind_address);
  PSTRAIN_ASSIGN_OR_RETURN(chief->mlp_, model::Network::Create(options.job.model, 1024));
  PSTRAIN_ASSIGN_OR_RETURN(Placement placement,
                           ComputePlacement(chief->mlp_->variables(), cfg.cluster.ps.size()));
  client::PsClientOptions client_options;
  client_options.ps_addresses = cfg.cluster.ps;
  client_options.replica = -1;  // this client only observes; training has its own
  client_options.security = options.security;
  PSTRAIN_ASSIGN_OR_RETURN(chief->client_, client::PsClient::Create(client_options, placement));
  Log("waiting for ", cfg.cluster.ps.size(), " ps");
  PSTRAIN_RETURN_IF_ERROR(chief->client_->WaitUntilReady(options.ps_wait, false));
  // A job whose output directory holds a complete checkpoint resumes from it.
  std::vector<IncompleteCheckpoint> skipped;
  const std::vector<CompleteCheckpoint> candidates =
      CompleteCheckpoints(options.output_dir, &skipped);
  for (const IncompleteCheckpoint& c : skipped) Log(c.ToString());
  if (!candidates.empty()) {
    absl::MutexLock ps_lock(&chief->ps_mu_);
    PSTRAIN_ASSIGN_OR_RETURN(int64_t step, chief->RestoreNewest(candidates, 1));
    absl::MutexLock lock(&chief->mu_);
    chief->last_checkpoint_ = step;
  } else {
    std::vector<int> kept;
    PSTRAIN_RETURN_IF_ERROR(chief->client_
                                ->CreateVariables(chief->mlp_->InitialParameters(options.job.seed),
                                                  chief->mlp_->offsets(),
                                                  chief->CreateOptionsFor(1), &kept)
                                .status());
    if (!kept.empty()) {
      Log(kept.size(), " of ", cfg.cluster.ps.size(),
          " ps already held initialised variables; they were kept");
    }
    Log("initialised ", chief->mlp_->num_parameters(), " parameters in ",
        chief->mlp_->variables().size(), " variables on ", cfg.cluster.ps.size(), " ps");
    // The checkpoint of step 0: what a PS lost before the first periodic
    // checkpoint comes back from.
    PSTRAIN_RETURN_IF_ERROR(chief->CheckpointNow());
  }
  ChiefDuties* self = chief.get();
  chief->watcher_ = std::thread([self] { self->WatchLoop(); });
  if (options.job.checkpoint_every_secs > 0 || options.job.checkpoint_every_steps > 0) {
    chief->checkpointer_ = std::thread([self] { self->CheckpointLoop(); });
  }
  return chief;
}

client::CreateOptions ChiefDuties::CreateOptionsFor(int64_t generation) const {
  client::CreateOptions create;
  create.optimizer = options_.job.optimizer;
  create.consistency = options_.job.consistency;
  create.num_replicas = static_cast<int>(tracker_.replicas().size());
  create.replicas_to_aggregate = options_.job.replicas_to_aggregate;
  create.seed = options_.job.seed;
  create.generation = generation;
  create.sync_wait = absl::Seconds(options_.job.sync_wait_secs);
  return create;
}

absl::StatusOr<int64_t> ChiefDuties::RestoreNewest(
    const std::vector<CompleteCheckpoint>& candidates, int64_t generation) {
  const std::string& dir = options_.output_dir;
  const std::vector<float> initial = mlp_->InitialParameters(options_.job.seed);
  absl::Status last;
  for (const CompleteCheckpoint& c : candidates) {
    const absl::Time start = absl::Now();
    client::CreateOptions create = CreateOptionsFor(generation);
    create.restore_dir = dir;
    create.restore_step = c.step;
    create.restore_num_ps = c.num_ps;
    // PS without variables create them and load the checkpoint; those that
    // already serve some are then rolled back to it.
    std::vector<int> kept;
    absl::Status s = client_->CreateVariables(initial, mlp_->offsets(), create, &kept).status();
    if (s.ok() && !kept.empty()) {
      s = client_->Restore(kept, dir, c.step, c.num_ps, generation, absl::Minutes(10)).status();
    }
    if (s.ok()) {
      Log(absl::StrFormat(
          "restored every ps to the checkpoint at step %d in %s%s (generation %d)", c.step,
          absl::FormatDuration(absl::Now() - start),
          c.num_ps == client_->num_ps() ? "" : absl::StrCat(", re-sliced from ", c.num_ps, " ps"),
          generation));
      return c.step;
    }
    if (s.code() != absl::StatusCode::kDataLoss && s.code() != absl::StatusCode::kNotFound) {
      return s;
    }
    // A shard that fails its checks: the previous checkpoint is used, and
    // this one set aside so that nothing picks it up again.
    SetAsideCheckpoint(dir, c.step, s.message());
    last = s;
  }
  return absl::DataLossError(absl::StrCat("no checkpoint under ", dir,
                                          " could be restored; the last error: ", last.message()));
}

void ChiefDuties::WatchLoop() {
  const int n = client_->num_ps();
  std::vector<bool> down(n, false);
  std::vector<absl::Time> down_since(n);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), kHeartbeat);
      if (stopping_) return;
    }
    std::vector<int> restarted;
    for (int ps = 0; ps < n; ++ps) {
      auto health = client_->Health(ps, 2 * kHeartbeat);
      const absl::Time now = absl::Now();
      if (!health.ok()) {
        if (!down[ps]) {
          down[ps] = true;
          down_since[ps] = now;
          Log(client_->PsName(ps), " stopped answering (", health.status().message(),
              "); it gets the newest checkpoint when it is back");
          absl::MutexLock lock(&mu_);
          ++ps_down_;
        } else if (now - down_since[ps] > options_.ps_wait) {
          tracker_.Fail(absl::UnavailableError(absl::StrCat(
              client_->PsName(ps), " has not answered for ",
              absl::FormatDuration(absl::Trunc(now - down_since[ps], absl::Seconds(1))),
              " (--ps_wait_s): ", health.status().message())));
          return;
        }
        continue;
      }
      if (down[ps]) {
        down[ps] = false;
        absl::MutexLock lock(&mu_);
        --ps_down_;
      }
      // A PS without variables was restarted: it lost its part of the model.
      if (!health->initialized()) restarted.push_back(ps);
    }
    if (restarted.empty()) continue;
    absl::MutexLock ps_lock(&ps_mu_);
    std::vector<IncompleteCheckpoint> skipped;
    const std::vector<CompleteCheckpoint> candidates =
        CompleteCheckpoints(options_.output_dir, &skipped);
    for (const IncompleteCheckpoint& c : skipped) Log(c.ToString());
    const int64_t generation = ++generation_;
    for (int ps : restarted) {
      Log(client_->PsName(ps), " restarted without variables (",
          down_since[ps] == absl::Time()
              ? std::string("between two heartbeats")
              : absl::StrCat("away ", absl::FormatDuration(absl::Trunc(absl::Now() - down_since[ps],
                                                                       absl::Milliseconds(1)))),
          "): restoring every ps from the newest checkpoint");
      down_since[ps] = absl::Time();
    }
    auto step = candidates.empty()
                    ? absl::StatusOr<int64_t>(absl::FailedPreconditionError(
                          absl::StrCat("no complete checkpoint under ", options_.output_dir)))
                    : RestoreNewest(candidates, generation);
    if (!step.ok()) {
      tracker_.Fail(absl::UnavailableError(absl::StrCat("restoring the ps after ",
                                                        client_->PsName(restarted[0]),
                                                        " restarted: ", step.status().message())));
      return;
    }
    absl::MutexLock lock(&mu_);
    last_checkpoint_ = *step;
  }
}

void ChiefDuties::StopParameterServers(const absl::Status& why) {
  const int code = ExitCodeFor(why);
  if (code >= kExitRetryable) {
    Log("leaving the ps running: the failure is retryable (exit ", code,
        ") and a restarted task needs them");
    return;
  }
  absl::Status s = client_->ShutdownAll(why.ok() ? "job finished" : "job failed", code);
  if (!s.ok()) Log("stopping the ps: ", s.message());
}

absl::StatusOr<Json> ChiefDuties::Finish() {
  // Sync with backup replicas: the steps are done once replicas_to_aggregate
  // replicas finished; a lost backup is not waited for beyond a grace time.
  const model::JobSpec& job = options_.job;
  const int replicas = static_cast<int>(tracker_.replicas().size());
  const bool backups = job.consistency == "sync" && job.replicas_to_aggregate > 0 &&
                       job.replicas_to_aggregate < replicas;
  absl::Status waited =
      tracker_.WaitForAll(options_.job_timeout, backups ? job.replicas_to_aggregate : 0,
                          absl::Seconds(std::min(30, job.sync_wait_secs)));
  StopCheckpointing();
  if (!waited.ok()) {
    StopParameterServers(waited);
    return waited;
  }
  // The final checkpoint: what a relaunch of the finished job resumes from.
  if (absl::Status s = CheckpointNow(/*final=*/true); !s.ok()) {
    StopParameterServers(s);
    return s;
  }
  auto scored = [&]() -> absl::StatusOr<Json> {
    PSTRAIN_ASSIGN_OR_RETURN(
        data::Dataset test,
        data::LoadInputSplit(options_.job.data_dir, options_.job.input, data::Split::kTest,
                             options_.job.model.num_classes()));
    std::vector<float> params(mlp_->num_parameters());
    PSTRAIN_ASSIGN_OR_RETURN(int64_t step, client_->PullAll(params.data(), mlp_->offsets()));
    // The embeddings' rows come from the PS, a chunk's ids at a time.
    PSTRAIN_ASSIGN_OR_RETURN(
        model::BatchResult r,
        model::EvaluateExamples(
            mlp_->embeddings(),
            [&](const std::string& table, absl::Span<const int64_t> ids, float* out) {
              return client_->PullRows(table, ids, out);
            },
            test.features.data(), test.ids.data(), test.labels.data(), test.num_examples,
            static_cast<int>(test.example_dim), test.ids_dim, 1024,
            [&](const float* in, const int32_t* labels, int n) {
              return mlp_->Evaluate(params.data(), in, labels, n);
            }));
    Json metrics = Json::object();
    metrics["test_accuracy"] = r.accuracy();
    metrics["test_loss"] = r.mean_loss();
    if (r.has_auc()) metrics["test_auc"] = r.Auc();
    metrics["test_examples"] = r.count;
    metrics["global_step"] = step;
    Json replicas = Json::array();
    double total_rate = 0;
    for (const auto& [replica, rep] : tracker_.reports()) {
      Json w = Json::object();
      w["replica"] = replica;
      w["task"] = absl::StrCat(rep.task_type(), ":", rep.task_index());
      w["steps"] = rep.steps();
      w["examples"] = rep.examples();
      w["final_loss"] = rep.final_loss();
      w["examples_per_sec"] = rep.examples_per_sec();
      total_rate += rep.examples_per_sec();
      replicas.push_back(std::move(w));
    }
    metrics["replicas"] = std::move(replicas);
    metrics["seconds"] = absl::ToDoubleSeconds(absl::Now() - started_);
    // What the PS saw: gradients dropped as stale, and the staleness of
    // those applied (summed over every slice; buckets as SliceStats says).
    if (auto stats = client_->Stats(); stats.ok()) {
      int64_t dropped = 0;
      std::vector<int64_t> histogram;
      for (const v1::StatsResponse& ps : *stats) {
        for (const v1::SliceStats& slice : ps.slices()) {
          dropped += slice.dropped_stale();
          if (histogram.size() < static_cast<size_t>(slice.staleness_histogram_size())) {
            histogram.resize(slice.staleness_histogram_size());
          }
          for (int b = 0; b < slice.staleness_histogram_size(); ++b) {
            histogram[b] += slice.staleness_histogram(b);
          }
        }
      }
      metrics["dropped_gradients"] = dropped;
      Json h = Json::array();
      for (int64_t count : histogram) h.push_back(count);
      metrics["staleness_histogram"] = std::move(h);
    }
    metrics["examples_per_sec"] = total_rate;
    PSTRAIN_RETURN_IF_ERROR(MakeDirs(options_.output_dir));
    // With an evaluator in the cluster, output_dir/eval is its to write.
    if (cfg_.cluster.evaluator.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> eval,
                               EventWriter::Open(options_.output_dir + "/eval"));
      PSTRAIN_RETURN_IF_ERROR(eval->WriteScalars(step, r.ScoreScalars()));
    }
    PSTRAIN_RETURN_IF_ERROR(
        WriteFileAtomically(options_.output_dir + "/final_metrics.json", metrics.dump() + "\n"));
    return metrics;
  }();
  StopParameterServers(scored.status());
  return scored;
}

}  // namespace pstrain::coordinator
