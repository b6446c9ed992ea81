#include "allreduce/allreduce_main.h"

#include <atomic>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/clock.h"
#include "base/crc32c.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "client/collective_store.h"
#include "job/final_score.h"
#include "job/flag_table.h"
#include "job/job_description.h"
#include "job/job_flags.h"
#include "job/run_info.h"
#include "job/run_record.h"
#include "job/task_flags.h"
#include "model/compute_threads.h"
#include "train/local_trainer.h"
#include "transport/frame_tls.h"

namespace pstrain::allreduce {

std::vector<RingMember> RingMembers(const ClusterSpec& cluster) {
  std::vector<RingMember> members;
  if (cluster.chief.has_value()) {
    members.push_back({"chief:0", cluster.chief->host, cluster.chief->port});
  }
  for (size_t i = 0; i < cluster.worker.size(); ++i) {
    members.push_back({absl::StrCat("worker:", i), cluster.worker[i].host, cluster.worker[i].port});
  }
  return members;
}

int ReplicaOf(const TaskId& task, const ClusterSpec& cluster) {
  if (task.role == Role::kChief) return 0;
  return (cluster.chief.has_value() ? 1 : 0) + task.index;
}

absl::Status CheckJobForAllReduce(const model::JobSpec& job, bool consistency_given,
                                  int num_replicas) {
  if (consistency_given && !job.consistency.sync()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--consistency=", job.consistency.ToString(),
        " needs parameter servers: a cluster without ps trains by all-reduce, where every "
        "step is synchronous; drop the flag (or give --consistency=sync), or add ps to "
        "TF_CONFIG's cluster for async or ssp training"));
  }
  if (job.replicas_to_aggregate > 0 && job.replicas_to_aggregate != num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replicas_to_aggregate=", job.replicas_to_aggregate, " (backup workers) needs "
        "parameter servers: an all-reduce step takes every one of the ", num_replicas,
        " replicas; drop the flag, or add ps to TF_CONFIG's cluster"));
  }
  return absl::OkStatus();
}

absl::Status TrainOverRing(Ring* ring, train::ReplicaGroup* group, const model::JobSpec& job) {
  int64_t pack = job.bytes_per_pack;
  if (pack < 0) {
    // Over TCP (between hosts) the all-reduce takes the link's time, which
    // the layers still to differentiate can fill; through shared memory it
    // is memory copies on the cores that compute, and one pack costs least.
    const bool on_tcp = ring->size() > 1 && !(ring->left_shared() && ring->right_shared());
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> links, ring->AllGather(on_tcp ? "t" : "s"));
    pack = absl::c_count(links, "t") > 0 ? model::kAutoPackBytes : 0;
  }
  if (ring->rank() == 0) {
    Log(pack > 0 ? absl::StrCat("gradients all-reduced in packs of ", pack,
                                " bytes as backprop produces them")
                 : std::string("gradients all-reduced in one pack after each step"),
        job.bytes_per_pack < 0 ? (pack > 0 ? " (--bytes_per_pack=auto: a link of the ring is tcp)"
                                           : " (--bytes_per_pack=auto: every link of the ring is "
                                             "shared memory)")
                               : "");
  }
  group->bytes_per_pack = pack;
  auto vote = std::make_shared<client::StopVote>();
  client::CollectiveOptions options;
  options.bfloat16_wire = job.bfloat16_wire;
  options.bytes_per_pack = pack;
  options.vote = vote;
  group->wrap = [ring, options](std::unique_ptr<client::ParameterStore> own,
                                const Placement& placement, const std::vector<int64_t>& offsets) {
    return std::unique_ptr<client::ParameterStore>(
        new client::CollectiveStore(std::move(own), ring, placement, offsets, options));
  };
  group->stop_vote = [vote](int mine) {
    vote->mine.store(mine, std::memory_order_relaxed);
    return vote->agreed.load(std::memory_order_relaxed);
  };
  group->all_gather = [ring](const std::string& mine) { return ring->AllGather(mine); };
  group->end_gather = [ring](const std::string& mine) {
    return ring->AllGather(mine, train::ReplicaGroup::kEndWait);
  };
  group->announce = [ring](const std::string& failure) { return ring->Announce(failure); };
  group->told = [ring]() -> std::optional<std::pair<int, std::string>> {
    std::optional<RingNotice> notice = ring->notice();
    if (!notice.has_value()) return std::nullopt;
    return std::make_pair(notice->from, notice->text);
  };
  return absl::OkStatus();
}

namespace {

struct Setup {
  model::JobSpec job;
  std::string output_dir;
  RingOptions ring;
  train::ReplicaGroup group;
  Json run;
  // How long the replica that writes the checkpoints waits for a listed
  // evaluator's score of the final one (zero: no evaluator, or no wait).
  absl::Duration eval_wait;
  // Set when run.json says this job ended well before this start (a replica
  // restarted after the others had finished, or a whole job relaunched
  // after its end): when (job/run_record.h, EndedWell).
  std::optional<std::string> ended;
};

absl::StatusOr<Setup> Configure(const TfConfig& cfg, CliArgs& args, const Security& security) {
  Setup setup;
  const std::vector<RingMember> members = RingMembers(cfg.cluster);
  if (members.empty()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG's cluster has no chief and no worker: nothing would train");
  }
  const bool consistency_given = args.Has("consistency");
  PSTRAIN_ASSIGN_OR_RETURN(setup.job, JobSpecFromFlags(args));
  PSTRAIN_RETURN_IF_ERROR(
      CheckJobForAllReduce(setup.job, consistency_given, static_cast<int>(members.size())));
  setup.job.consistency = Consistency::Sync();
  PSTRAIN_ASSIGN_OR_RETURN(setup.output_dir, OutputDirFromFlags(args, cfg.environment));
  // How long the ring waits for every task to come up, and for a neighbour
  // inside a step.
  PSTRAIN_ASSIGN_OR_RETURN(int64_t wait_s, IntFlag(args, "ps_wait_s"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t step_wait_s, IntFlag(args, "sync_wait_secs"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t blas_threads, IntFlag(args, "blas_threads"));
  PSTRAIN_ASSIGN_OR_RETURN(std::string bind,
                           StringFlag(args, "bind", cfg.task_address()->ToString()));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t eval_wait_s, IntFlag(args, "eval_wait_secs"));
  setup.eval_wait = cfg.cluster.evaluator.empty() ? absl::ZeroDuration()
                                                  : absl::Seconds(eval_wait_s);
  PSTRAIN_RETURN_IF_ERROR(CheckTaskFlags(args, cfg.task.role));
  if (std::string plan = DevicePlan(setup.job); !plan.empty()) Log(plan);
  model::SetComputeThreads(static_cast<int>(blas_threads));

  const int replica = ReplicaOf(cfg.task, cfg.cluster);
  RingOptions& ring = setup.ring;
  ring.members = members;
  ring.rank = replica;
  PSTRAIN_ASSIGN_OR_RETURN(HostPort bind_at, ParseHostPort(bind, "--bind"));
  ring.listen_host = bind_at.host;
  ring.members[replica].port = bind_at.port;
  ring.connect_timeout = absl::Seconds(wait_s);
  ring.timeout = absl::Seconds(step_wait_s);
  ring.shared_memory = setup.job.shared_memory;
  ring.token = security.token();
  if (security.tls()) {
    // Every link inside TLS with the job's certificates, as the PS path's.
    PSTRAIN_ASSIGN_OR_RETURN(ring.tls_server, FrameTls::Make(security, FrameTls::Side::kServer));
    PSTRAIN_ASSIGN_OR_RETURN(ring.tls_client, FrameTls::Make(security, FrameTls::Side::kClient));
  }
  // Tasks started with other job flags (or of another job) do not join.
  PSTRAIN_ASSIGN_OR_RETURN(Json described, DescribeJobAndModel(setup.job));
  const std::string job_text = described.dump();
  ring.job_key = absl::StrFormat("%08x", Crc32c(job_text.data(), job_text.size()));

  train::ReplicaGroup& group = setup.group;
  group.replica = replica;
  group.num_replicas = static_cast<int>(members.size());
  for (const RingMember& m : members) group.names.push_back(m.name);
  group.mode = "allreduce";
  setup.run = RunInfo(args, cfg);
  if (!setup.output_dir.empty()) {
    setup.ended = EndedWell(setup.output_dir, args.raw_flags(), ClusterOf(cfg));
  }
  return setup;
}

absl::Status Work(const TfConfig& cfg, Setup& setup) {
  const train::ReplicaGroup& g = setup.group;
  // The replicas end together once replica 0 has recorded the job's end
  // (train/local_trainer.h): a replica started after that has no ring to
  // join, and nothing to do.
  if (setup.ended.has_value()) {
    Log("the job finished at ", *setup.ended, " (", RunRecordPath(setup.output_dir),
        "): nothing to train");
    return absl::OkStatus();
  }
  Log("a cluster without ps: ", g.num_replicas, " replicas train by ring all-reduce; this is ",
      g.names[g.replica], " (replica ", g.replica, "), its neighbours ",
      g.names[(g.replica + g.num_replicas - 1) % g.num_replicas], " and ",
      g.names[(g.replica + 1) % g.num_replicas]);
  absl::StatusOr<std::unique_ptr<Ring>> formed = Ring::Form(setup.ring);
  // A neighbour that never came may come next time (retryable); one of
  // another job, or started with other job flags, will not.
  if (!formed.ok()) return AsSetupFailure(formed.status());
  std::unique_ptr<Ring> ring = *std::move(formed);
  Log("ring formed: ", ring->DescribeLinks());
  PSTRAIN_RETURN_IF_ERROR(TrainOverRing(ring.get(), &setup.group, setup.job));
  // SIGTERM or SIGINT to any replica: the replicas agree on it in the next
  // step's all-reduce and all stop before the step after, the chief
  // checkpointing the step they reached.
  static std::atomic<int> stop{0};
  WatchStopSignals([](int signo) { stop.store(signo); });
  train::LocalOptions options;
  options.output_dir = setup.output_dir;
  options.run = setup.run;
  options.stop = &stop;
  options.group = &setup.group;
  PSTRAIN_ASSIGN_OR_RETURN(train::LocalResult result, train::RunLocal(setup.job, options));
  if (result.stopped_by != 0) {
    return absl::CancelledError(
        absl::StrCat("stopped by signal ", result.stopped_by, " at step ", result.steps));
  }
  Log(absl::StrFormat("trained %d steps: %.0f examples/s over the %d replicas; %.1f MB sent "
                      "around the ring",
                      result.steps, result.examples_per_sec, g.num_replicas,
                      ring->bytes_sent() / 1e6));
  ring.reset();  // the other replicas may exit now
  if (g.replica == 0) {
    Log(absl::StrFormat("test accuracy: %.4f (loss %.4f)", result.test_accuracy,
                        result.test_loss));
    // As the PS mode's chief ends (coordinator/job_finisher.h): not before
    // the evaluator has scored the final checkpoint, up to --eval_wait_secs.
    WaitForFinalScore(setup.output_dir, result.steps, setup.eval_wait, absl::Milliseconds(500),
                      Clock::Real());
  }
  return absl::OkStatus();
}

}  // namespace

int AllReduceMain(const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security) {
  absl::StatusOr<Setup> setup = Configure(cfg, args, *security);
  if (!setup.ok()) {
    Log("failed: ", setup.status().message());
    return RoleExitCode(setup.status(), FailureKind::kBadConfig);
  }
  absl::Status s = Work(cfg, *setup);
  if (!s.ok()) {
    Log("failed: ", s.message());
    return RoleExitCode(s, FailureKind::kPermanent);
  }
  return kExitOk;
}

}  // namespace pstrain::allreduce
