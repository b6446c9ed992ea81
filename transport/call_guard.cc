#include "transport/call_guard.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/logging.h"

namespace pstrain {

CallGuard::CallGuard(std::shared_ptr<const Security> security, CallLimits limits)
    : security_(security == nullptr ? Security::None() : std::move(security)), limits_(limits) {}

CallGuard::Admission::~Admission() {
  if (guard_ != nullptr) guard_->Release(peer_);
}

absl::StatusOr<CallGuard::Admission> CallGuard::Admit(const grpc::ServerContextBase& ctx,
                                                      const char* method) {
  return Admit(security_->Authenticate(ctx), ctx.peer(), method);
}

absl::StatusOr<CallGuard::Admission> CallGuard::Admit(absl::string_view token, std::string peer,
                                                      const char* method) {
  return Admit(security_->CheckToken(token), std::move(peer), method);
}

absl::StatusOr<CallGuard::Admission> CallGuard::Admit(absl::Status auth, std::string peer,
                                                      const char* method) {
  if (!auth.ok()) return Refuse(std::move(auth), peer, method, &unauthenticated_);
  absl::Status over;
  {
    absl::MutexLock lock(&mu_);
    int& mine = per_peer_[peer];
    if (mine >= limits_.max_calls_per_client) {
      over = absl::ResourceExhaustedError(
          absl::StrCat(peer, " already has ", mine,
                       " calls in flight, the limit per client (--max_calls_per_client)"));
    } else if (total_ >= limits_.max_calls) {
      over = absl::ResourceExhaustedError(absl::StrCat(
          "the server already has ", total_, " calls in flight, its limit (--max_calls)"));
      if (mine == 0) per_peer_.erase(peer);
    } else {
      ++mine;
      ++total_;
    }
  }
  if (!over.ok()) return Refuse(std::move(over), peer, method, &over_limit_);
  return Admission(this, std::move(peer));
}

void CallGuard::Release(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  --total_;
  auto it = per_peer_.find(peer);
  if (it != per_peer_.end() && --it->second <= 0) per_peer_.erase(it);
}

int CallGuard::in_flight() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

absl::Status CallGuard::Refuse(absl::Status why, const std::string& peer, const char* method,
                               std::atomic<int64_t>* count) {
  count->fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&log_mu_);
  const absl::Time now = absl::Now();
  if (now - last_log_ < absl::Seconds(10)) {
    ++unlogged_;
    return why;
  }
  Log("refused ", method, " from ", peer, ": ", why.message(),
      unlogged_ > 0 ? absl::StrCat(" (and ", unlogged_, " other refusals since the last report)")
                    : "");
  last_log_ = now;
  unlogged_ = 0;
  return why;
}

}  // namespace pstrain
