// What the chief does to the job's PS as a whole, one thing at a time:
// take them over at start (carry on with their variables, restore the
// newest checkpoint, or create the variables and checkpoint step 0), cut a
// checkpoint of every PS at one moment, and restore every PS after one came
// back empty. Checkpoints and restores never overlap. Generations only move
// forward: the next one is recorded in <output_dir>/generation before any
// PS is told it.
//
// The chief's parts share one keeper: the PS watch (coordinator/
// ps_watch.h) restores through it, the checkpoint loop (coordinator/
// checkpoint_loop.h) and the job finisher (coordinator/job_finisher.h)
// checkpoint through it. Thread-safe.
#ifndef PSTRAIN_COORDINATOR_PS_KEEPER_H_
#define PSTRAIN_COORDINATOR_PS_KEEPER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/create_request.h"
#include "client/ps_admin.h"
#include "cluster/checkpoint_layout.h"
#include "base/clock.h"
#include "cluster/placement.h"

namespace pstrain::coordinator {

struct PsKeeperOptions {
  std::string output_dir;
  // The job's model on its PS, and how the PS are to run it (generation
  // and restore fields are the keeper's).
  Placement placement;
  std::vector<int64_t> offsets;
  client::CreateOptions create;
  // Values to create the model with, in the layout of `offsets`, instead
  // of the variables' initializers (unset or empty: each PS fills its
  // slices from them, as the chief's model does); asked when the
  // variables are created or restored.
  std::function<std::vector<float>()> initial_values;
  int keep_checkpoints = 5;
  // An evaluator is in the cluster: checkpoints it has not scored yet are
  // kept beyond keep_checkpoints (coordinator/checkpointer.h).
  bool spare_unscored = false;
  // How long a checkpoint may hold the PS's pushes: the hold lasts from the
  // HoldPushes answers to each PS's cut (milliseconds); the lease only
  // bounds the stall should the chief die in between.
  absl::Duration push_hold_lease = absl::Seconds(10);
  // Tries of a restore whose reads fail without a failed check (1 s, then
  // 2 s, ... apart).
  int restore_tries = 3;
  // The waits between tries are on this clock.
  const Clock* clock = Clock::Real();
};

class PsKeeper {
 public:
  // `admin` must outlive the keeper.
  PsKeeper(client::PsAdmin* admin, PsKeeperOptions options);

  const PsKeeperOptions& options() const { return options_; }

  // Start's choice: every PS serving initialised variables of one
  // generation (the chief restarted, the PS did not) are carried on with
  // (and step 0 checkpointed if no checkpoint is complete yet); else the
  // newest complete checkpoint under output_dir is restored (RestoreNewest);
  // else the variables are created (PS that hold some keep them) and step
  // 0 is checkpointed. Returns the generation the PS serve afterwards.
  absl::StatusOr<int64_t> TakeOver() ABSL_LOCKS_EXCLUDED(mu_, ps_mu_);

  // After PS `restarted` came back without variables: every PS to the
  // newest complete checkpoint under a new generation. Returns the step
  // restored (the global step rolled back to it is counted). Errors: none
  // complete, or RestoreNewest's.
  absl::StatusOr<int64_t> RestoreAll(const std::vector<int>& restarted)
      ABSL_LOCKS_EXCLUDED(mu_, ps_mu_);

  // Checkpoints the current global step, every PS cut at one moment, unless
  // that step was saved already (`final`: the job's last; saved even then,
  // to mark it final).
  absl::Status CheckpointNow(bool final = false) ABSL_LOCKS_EXCLUDED(mu_, ps_mu_);

  // The job's global step as seen whole (every PS answering): restores
  // count what they roll back from it. Never goes back but by a restore.
  void SeeStep(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t seen_step() const ABSL_LOCKS_EXCLUDED(mu_);

  int64_t generation() const ABSL_LOCKS_EXCLUDED(ps_mu_);
  // The step of the last checkpoint written or restored (-1: none).
  int64_t last_checkpoint() const ABSL_LOCKS_EXCLUDED(mu_);
  // Global steps restores rolled back in all.
  int64_t rolled_back() const ABSL_LOCKS_EXCLUDED(mu_);


 private:
  // Puts every PS on checkpoint `candidates` (newest first), under
  // `generation`: creates the variables where missing, loads the newest
  // candidate whose files pass every check, setting aside those that do
  // not (DataLoss: a checksum, a short file). A read that fails otherwise
  // (NotFound, an I/O error) is tried options.restore_tries times, then
  // returned, the checkpoint left in place; FailedPrecondition for a
  // checkpoint of another model. Returns the step restored. DataLoss when
  // no candidate passes its checks.
  absl::StatusOr<int64_t> RestoreNewest(const std::vector<CompleteCheckpoint>& candidates,
                                        int64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ps_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // generation_ + 1, recorded in output_dir/generation first.
  absl::StatusOr<int64_t> NextGeneration() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ps_mu_);
  absl::Status CheckpointNowLocked(bool final) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ps_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  client::CreateOptions CreateOptionsFor(int64_t generation) const;
  // Creates the variables where missing and restores checkpoint `c` on
  // every PS, trying a read that fails without a failed check again.
  absl::Status RestoreOne(const CompleteCheckpoint& c, int64_t generation,
                          const std::vector<float>& initial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ps_mu_);

  client::PsAdmin* const admin_;
  const PsKeeperOptions options_;

  // Held while checkpoints are written or the PS restored, so that the two
  // never overlap. Acquired before mu_.
  mutable absl::Mutex ps_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // The highest generation handed out (TakeOver, NextGeneration).
  int64_t generation_ ABSL_GUARDED_BY(ps_mu_) = 0;

  mutable absl::Mutex mu_;
  int64_t last_checkpoint_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t last_seen_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rolled_back_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain::coordinator

#endif  // PSTRAIN_COORDINATOR_PS_KEEPER_H_
