#include "coordinator/ps_watch.h"

#include <utility>
#include <vector>

#include "cluster/global_step.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/exit_codes.h"
#include "base/logging.h"

namespace pstrain::coordinator {

PsWatch::PsWatch(client::PsAdmin* admin, PsKeeper* keeper, JobTracker* tracker,
                 PsWatchOptions options)
    : admin_(admin),
      keeper_(keeper),
      tracker_(tracker),
      options_(std::move(options)),
      down_(admin->num_ps(), false),
      down_since_(admin->num_ps()) {}

PsWatch::~PsWatch() { Stop(); }

void PsWatch::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void PsWatch::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int PsWatch::ps_down() const {
  absl::MutexLock lock(&mu_);
  return ps_down_;
}

void PsWatch::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      options_.clock->AwaitWithTimeout(&mu_, absl::Condition(&stopping_), options_.heartbeat);
      if (stopping_) return;
    }
    if (!Round()) return;
  }
}

bool PsWatch::Round() {
  // A permanent failure (a task started with other job flags) ends every
  // replica's training now, this task's own too: the PS are told to exit
  // with its code, and training against them stops.
  if (absl::Status failed = tracker_->failure();
      !failed.ok() && RoleExitCode(failed, FailureKind::kPermanent) < kExitRetryable) {
    Log("the job failed (", failed.message(), "); stopping the ps");
    if (options_.on_permanent_failure) options_.on_permanent_failure(failed);
    return false;
  }
  std::vector<int> restarted;
  int64_t round_step = -1;  // the lowest global step of those answering this round
  bool all_answered = true;
  for (int ps = 0; ps < admin_->num_ps(); ++ps) {
    auto health = admin_->Health(ps, 2 * options_.heartbeat);
    const absl::Time now = options_.clock->Now();
    if (!health.ok()) {
      all_answered = false;
      if (!down_[ps]) {
        down_[ps] = true;
        down_since_[ps] = now;
        Log(admin_->PsName(ps), " stopped answering (", health.status().message(),
            "); it gets the newest checkpoint when it is back");
        absl::MutexLock lock(&mu_);
        ++ps_down_;
      } else if (now - down_since_[ps] > options_.ps_wait) {
        tracker_->Fail(absl::UnavailableError(absl::StrCat(
            admin_->PsName(ps), " has not answered for ",
            absl::FormatDuration(absl::Trunc(now - down_since_[ps], absl::Seconds(1))),
            " (--ps_wait_s): ", health.status().message())));
        return false;
      }
      continue;
    }
    if (down_[ps]) {
      down_[ps] = false;
      absl::MutexLock lock(&mu_);
      --ps_down_;
    }
    // A PS without variables was restarted: it lost its part of the model.
    if (!health->initialized()) {
      restarted.push_back(ps);
    } else {
      round_step = SlowerStep(round_step, health->global_step());
    }
  }
  if (restarted.empty()) {
    // The job's global step as last seen whole: what a restore rolls back.
    if (all_answered && round_step >= 0) keeper_->SeeStep(round_step);
    return true;
  }
  for (int ps : restarted) {
    Log(admin_->PsName(ps), " restarted without variables (",
        down_since_[ps] == absl::Time()
            ? std::string("between two heartbeats")
            : absl::StrCat("away ", absl::FormatDuration(absl::Trunc(options_.clock->Now() - down_since_[ps],
                                                                 absl::Milliseconds(1)))),
        "): restoring every ps from the newest checkpoint");
    down_since_[ps] = absl::Time();
  }
  absl::StatusOr<int64_t> step = keeper_->RestoreAll(restarted);
  if (!step.ok()) {
    tracker_->Fail(absl::UnavailableError(absl::StrCat("restoring the ps after ",
                                                       admin_->PsName(restarted[0]),
                                                       " restarted: ", step.status().message())));
    return false;
  }
  tracker_->SetGeneration(keeper_->generation());
  return true;
}

}  // namespace pstrain::coordinator
