#include "client/control_channel.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/logging.h"

namespace pstrain::client {

absl::StatusOr<PsReady> WaitForPs(PsControlChannel& channel, absl::Duration timeout,
                                  bool require_initialized,
                                  const std::function<absl::Status()>& abort_check) {
  const int n = channel.num_ps();
  const absl::Time start = absl::Now();
  absl::Time next_log = start + absl::Seconds(5);
  std::vector<std::string> why(n);
  while (true) {
    // Every PS each round: ready ones must agree on the generation.
    std::vector<int> missing;
    std::vector<v1::HealthResponse> health(n);
    int64_t newest = 0;
    for (int ps = 0; ps < n; ++ps) {
      // Asked before each PS's wait (up to 2 s each): the job's failure
      // ends the wait within seconds however many PS are away.
      if (abort_check) {
        if (absl::Status aborted = abort_check(); !aborted.ok()) return aborted;
      }
      // Waiting for the connection keeps gRPC working on it: a PS that
      // comes up while the channel backs off is reached as soon as its
      // handshake (with TLS, several round trips) completes.
      auto resp = channel.Health(ps, absl::Now() + absl::Seconds(2), /*wait_for_connection=*/true);
      if (!resp.ok() && resp.status().code() == absl::StatusCode::kDeadlineExceeded) {
        // Waiting hides why the connection fails; a call that does not wait
        // reports the channel's last error ("Connection refused", the TLS
        // handshake's failure).
        auto now = channel.Health(ps, absl::Now() + absl::Milliseconds(200), false);
        if (now.ok() || now.status().code() != absl::StatusCode::kDeadlineExceeded) {
          resp = std::move(now);
        }
      }
      if (!resp.ok() && resp.status().code() == absl::StatusCode::kFailedPrecondition) {
        return resp.status();
      }
      if (!resp.ok()) {
        why[ps] = absl::StrCat("not answering (", resp.status().message(), ")",
                               channel.Hint(resp.status()));
        missing.push_back(ps);
      } else if (require_initialized && !resp->initialized()) {
        why[ps] = "variables not initialised yet";
        missing.push_back(ps);
      } else {
        health[ps] = *std::move(resp);
        newest = std::max(newest, health[ps].generation());
      }
    }
    if (missing.empty() && require_initialized) {
      // A PS still on an older generation is being restored by the chief.
      for (int ps = 0; ps < n; ++ps) {
        if (health[ps].generation() != newest) {
          why[ps] = absl::StrCat("being restored (generation ", health[ps].generation(),
                                 ", others ", newest, ")");
          missing.push_back(ps);
        }
      }
    }
    if (missing.empty()) {
      PsReady ready;
      ready.generation = newest;
      for (const v1::HealthResponse& h : health) {
        ready.restored_step = std::max(ready.restored_step, h.restored_step());
      }
      return ready;
    }
    auto names = [&] {
      return absl::StrJoin(missing, "; ", [&](std::string* out, int ps) {
        absl::StrAppend(out, channel.PsName(ps), ": ", why[ps]);
      });
    };
    if (abort_check) {
      if (absl::Status aborted = abort_check(); !aborted.ok()) return aborted;
    }
    const absl::Time now = absl::Now();
    if (now - start >= timeout) {
      return absl::DeadlineExceededError(
          absl::StrCat("after waiting ", absl::FormatDuration(timeout), ": ", names()));
    }
    if (now >= next_log) {
      Log("waiting since ", absl::FormatDuration(absl::Trunc(now - start, absl::Seconds(1))),
          " for ", names());
      next_log = now + absl::Seconds(5);
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::StatusOr<int64_t> ReplicaPushesIn(const std::vector<v1::StatsResponse>& stats,
                                        const Placement& placement, int replica,
                                        const PsControlChannel& channel) {
  std::optional<int64_t> fewest;
  for (const v1::StatsResponse& ps : stats) {
    for (const v1::SliceStats& slice : ps.slices()) {
      const bool table = std::any_of(placement.embeddings.begin(), placement.embeddings.end(),
                                     [&](const VariableDef& v) { return v.name == slice.key(); });
      if (table) continue;
      if (replica < 0 || replica >= slice.replica_pushes_size()) {
        return absl::NotFoundError(absl::StrCat(channel.PsName(ps.ps_index()),
                                                " keeps no count of replica ", replica,
                                                "'s pushes to ", slice.key()));
      }
      const int64_t n = slice.replica_pushes(replica);
      fewest = fewest.has_value() ? std::min(*fewest, n) : n;
    }
  }
  if (!fewest.has_value()) return absl::NotFoundError("the model has no dense variable");
  return *fewest;
}

}  // namespace pstrain::client
