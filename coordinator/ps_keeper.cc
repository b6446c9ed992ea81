#include "coordinator/ps_keeper.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/file_util.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "coordinator/checkpointer.h"

namespace pstrain::coordinator {
namespace {

// <output_dir>/generation: the highest recovery generation a chief of this
// job has handed out, written before the PS are told it.
std::string GenerationPath(const std::string& dir) { return dir + "/generation"; }

absl::StatusOr<int64_t> ReadGeneration(const std::string& dir) {
  auto text = ReadFile(GenerationPath(dir));
  if (text.status().code() == absl::StatusCode::kNotFound) return 0;
  if (!text.ok()) return text.status();
  int64_t generation = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &generation) || generation < 0) {
    return absl::DataLossError(absl::StrCat(GenerationPath(dir), " does not hold a generation: \"",
                                            absl::CEscape(text->substr(0, 40)), "\""));
  }
  return generation;
}

}  // namespace

PsKeeper::PsKeeper(client::PsAdmin* admin, PsKeeperOptions options)
    : admin_(admin), options_(std::move(options)) {}

int64_t PsKeeper::generation() const {
  absl::MutexLock lock(&ps_mu_);
  return generation_;
}

int64_t PsKeeper::last_checkpoint() const {
  absl::MutexLock lock(&mu_);
  return last_checkpoint_;
}

int64_t PsKeeper::rolled_back() const {
  absl::MutexLock lock(&mu_);
  return rolled_back_;
}

void PsKeeper::SeeStep(int64_t step) {
  absl::MutexLock lock(&mu_);
  last_seen_step_ = std::max(last_seen_step_, step);
}

int64_t PsKeeper::seen_step() const {
  absl::MutexLock lock(&mu_);
  return last_seen_step_;
}

absl::StatusOr<int64_t> PsKeeper::NextGeneration() {
  const int64_t next = generation_ + 1;
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(options_.output_dir));
  PSTRAIN_RETURN_IF_ERROR(
      WriteFileAtomically(GenerationPath(options_.output_dir), absl::StrCat(next, "\n")));
  generation_ = next;
  return next;
}

client::CreateOptions PsKeeper::CreateOptionsFor(int64_t generation) const {
  client::CreateOptions create = options_.create;
  create.generation = generation;
  create.restore_dir.clear();
  create.restore_step = -1;
  create.restore_num_ps = 0;
  return create;
}

absl::Status PsKeeper::CheckpointNow(bool final) {
  absl::MutexLock ps_lock(&ps_mu_);
  return CheckpointNowLocked(final);
}

absl::Status PsKeeper::CheckpointNowLocked(bool final) {
  {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t now, admin_->GlobalStep());
    absl::MutexLock lock(&mu_);
    if (now <= last_checkpoint_ && !final) return absl::OkStatus();
  }
  // Every PS cut at one moment: their pushes held from before the step is
  // read until each one's snapshot is taken, so a replica's pushes in the
  // shards differ by at most the one it had in flight.
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t step, admin_->HoldPushes(options_.push_hold_lease));
  PSTRAIN_ASSIGN_OR_RETURN(
      CheckpointRecord r,
      SaveCheckpoint(admin_, options_.output_dir, step, options_.keep_checkpoints, final,
                     options_.spare_unscored, absl::Minutes(10), /*release_hold=*/true));
  Log(absl::StrFormat("checkpoint at step %d: %d bytes in %.3fs (ps: %.3fs) under %s", r.step,
                      r.bytes, r.seconds, r.ps_seconds, options_.output_dir));
  absl::MutexLock lock(&mu_);
  last_checkpoint_ = step;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsKeeper::TakeOver() {
  absl::MutexLock ps_lock(&ps_mu_);
  const std::string& dir = options_.output_dir;
  const int n = admin_->num_ps();
  // What each PS holds now, and the highest generation handed out so far:
  // a restore must go above both, so that generations only move forward.
  PSTRAIN_ASSIGN_OR_RETURN(generation_, ReadGeneration(dir));
  int live = 0;
  int64_t live_generation = -1;
  bool one_generation = true;
  for (int ps = 0; ps < n; ++ps) {
    PSTRAIN_ASSIGN_OR_RETURN(v1::HealthResponse h, admin_->Health(ps, absl::Seconds(10), true));
    generation_ = std::max(generation_, h.generation());
    if (!h.initialized()) continue;
    ++live;
    if (live_generation >= 0 && h.generation() != live_generation) one_generation = false;
    live_generation = std::max(live_generation, h.generation());
  }
  std::vector<IncompleteCheckpoint> skipped;
  const std::vector<CompleteCheckpoint> candidates = CompleteCheckpoints(dir, &skipped);
  for (const IncompleteCheckpoint& c : skipped) Log(c.ToString());
  // Every PS alive with its variables (this chief restarted, the PS did
  // not): they are ahead of any checkpoint; carry on with them.
  if (live == n && one_generation) {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t step, admin_->GlobalStep());
    Log("every ps serves initialised variables (generation ", live_generation, ", global step ",
        step, "): carrying on with them, nothing restored");
    {
      absl::MutexLock lock(&mu_);
      last_checkpoint_ = candidates.empty() ? -1 : candidates[0].step;
      last_seen_step_ = step;
    }
    // An earlier chief died before its first checkpoint was complete.
    if (candidates.empty()) PSTRAIN_RETURN_IF_ERROR(CheckpointNowLocked(/*final=*/false));
    return live_generation;
  }
  // A job whose output directory holds a complete checkpoint resumes from it.
  if (!candidates.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t generation, NextGeneration());
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t step, RestoreNewest(candidates, generation));
    absl::MutexLock lock(&mu_);
    last_checkpoint_ = step;
    last_seen_step_ = step;
    return generation;
  }
  // No checkpoint: the variables are created. PS that hold some already (an
  // earlier chief died before its first checkpoint) keep them, and the others
  // join their generation.
  int64_t generation = live_generation;
  if (live == 0) {
    PSTRAIN_ASSIGN_OR_RETURN(generation, NextGeneration());
  }
  std::vector<int> kept;
  const std::vector<float> initial =
      options_.initial_values ? options_.initial_values() : std::vector<float>();
  PSTRAIN_RETURN_IF_ERROR(admin_
                              ->CreateVariables(options_.placement, initial, options_.offsets,
                                                CreateOptionsFor(generation), &kept)
                              .status());
  if (!kept.empty()) {
    Log(kept.size(), " of ", n, " ps already held initialised variables; they were kept");
  }
  int64_t parameters = 0;
  for (const VariableDef& v : options_.placement.variables) parameters += v.elements();
  Log("initialised ", parameters, " parameters in ", options_.placement.variables.size(),
      " variables on ", n, " ps");
  // The checkpoint of step 0: what a PS lost before the first periodic
  // checkpoint comes back from.
  PSTRAIN_RETURN_IF_ERROR(CheckpointNowLocked(/*final=*/false));
  return generation;
}

absl::StatusOr<int64_t> PsKeeper::RestoreAll(const std::vector<int>& restarted) {
  absl::MutexLock ps_lock(&ps_mu_);
  std::vector<IncompleteCheckpoint> skipped;
  const std::vector<CompleteCheckpoint> candidates =
      CompleteCheckpoints(options_.output_dir, &skipped);
  for (const IncompleteCheckpoint& c : skipped) Log(c.ToString());
  absl::StatusOr<int64_t> next = NextGeneration();
  if (!next.ok()) {
    return absl::Status(next.status().code(), absl::StrCat("recording the next generation: ",
                                                           next.status().message()));
  }
  if (candidates.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no complete checkpoint under ", options_.output_dir));
  }
  // How far the job had got, from the PS that kept their variables (their
  // counts of updates applied): the heartbeat's last sample of the global
  // step may be well behind it.
  int64_t reached = 0;
  for (int ps = 0; ps < admin_->num_ps(); ++ps) {
    if (std::find(restarted.begin(), restarted.end(), ps) != restarted.end()) continue;
    absl::StatusOr<v1::HealthResponse> h = admin_->Health(ps, absl::Seconds(1));
    if (h.ok() && h->initialized()) reached = std::max(reached, h->global_step());
  }
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t step, RestoreNewest(candidates, *next));
  absl::MutexLock lock(&mu_);
  last_seen_step_ = std::max(last_seen_step_, reached);
  last_checkpoint_ = step;
  if (last_seen_step_ > step) {
    Log("global steps rolled back: ", last_seen_step_ - step, " (from ", last_seen_step_, " to ",
        step, "); replicas still training redo theirs");
    rolled_back_ += last_seen_step_ - step;
  }
  last_seen_step_ = step;
  return step;
}

absl::Status PsKeeper::RestoreOne(const CompleteCheckpoint& c, int64_t generation,
                                  const std::vector<float>& initial) {
  const std::string& dir = options_.output_dir;
  client::CreateOptions create = CreateOptionsFor(generation);
  create.restore_dir = dir;
  create.restore_step = c.step;
  create.restore_num_ps = c.num_ps;
  absl::Status s;
  for (int attempt = 1;; ++attempt) {
    // PS without variables create them and load the checkpoint; those that
    // already serve some (from an earlier attempt too) are then rolled back
    // to it.
    std::vector<int> kept;
    s = admin_->CreateVariables(options_.placement, initial, options_.offsets, create, &kept)
            .status();
    if (s.ok() && !kept.empty()) {
      s = admin_->Restore(kept, dir, c.step, c.num_ps, generation, absl::Minutes(10)).status();
    }
    // A file that was there a moment ago (the listing checked every shard)
    // and cannot be opened or read now: storage that hiccups (NotFound, an
    // I/O error). Tried again; the checkpoint is not damaged.
    const bool transient =
        s.code() == absl::StatusCode::kNotFound || s.code() == absl::StatusCode::kInternal;
    if (!transient || attempt == options_.restore_tries) return s;
    Log("restoring the checkpoint at step ", c.step, ": ", s.message(), "; trying again (",
        attempt, " of ", options_.restore_tries, ")");
    options_.clock->SleepFor(absl::Seconds(attempt));
  }
}

absl::StatusOr<int64_t> PsKeeper::RestoreNewest(const std::vector<CompleteCheckpoint>& candidates,
                                                int64_t generation) {
  const std::string& dir = options_.output_dir;
  const std::vector<float> initial =
      options_.initial_values ? options_.initial_values() : std::vector<float>();
  absl::Status last;
  for (const CompleteCheckpoint& c : candidates) {
    const absl::Time start = absl::Now();
    const absl::Status s = RestoreOne(c, generation, initial);
    if (s.ok()) {
      Log(absl::StrFormat(
          "restored every ps to the checkpoint at step %d in %s%s (generation %d)", c.step,
          absl::FormatDuration(absl::Now() - start),
          c.num_ps == admin_->num_ps() ? "" : absl::StrCat(", re-sliced from ", c.num_ps, " ps"),
          generation));
      return c.step;
    }
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      // Written for another model (an output directory without run.json,
      // or one edited): the checkpoint is whole; the job is what differs.
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint at step ", c.step, " in ", dir, " does not fit this job (", s.message(),
          "); nothing was changed. Relaunch with the flags and --model_config "
          "that wrote it to resume, or give a new --output_dir to start afresh"));
    }
    if (s.code() != absl::StatusCode::kDataLoss) {
      // Left in place: a read that keeps failing says nothing of the files.
      return absl::Status(s.code(), absl::StrCat("restoring the checkpoint at step ", c.step,
                                                 " (left in place): ", s.message()));
    }
    // A shard that fails its checks (a checksum, a short file): the previous
    // checkpoint is used, and this one set aside so that nothing picks it up
    // again.
    SetAsideCheckpoint(dir, c.step, s.message());
    last = s;
  }
  return absl::DataLossError(absl::StrCat("no checkpoint under ", dir,
                                          " could be restored; the last error: ", last.message()));
}

}  // namespace pstrain::coordinator
