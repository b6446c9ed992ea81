// Admission of server calls: every call of every pstrain service passes
// here first. A call must carry the cluster token (Security::Authenticate),
// and the calls in flight are bounded per client connection (gRPC's peer,
// "ipv4:10.0.0.3:51234") and in all, so one client cannot hold every
// handler, stream or buffer of a server. A refused call changes nothing.
// Refusals are counted and logged (at most once per 10 s per kind, with the
// count since), naming the peer and the method.
// Thread-safe.
#ifndef PSTRAIN_TRANSPORT_CALL_GUARD_H_
#define PSTRAIN_TRANSPORT_CALL_GUARD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transport/security.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

struct CallLimits {
  // Calls (a stream counts for its whole life) one connection may have in
  // flight. A PsClient holds one stream per PS and makes one control call
  // at a time, so well-behaved clients stay far below.
  int max_calls_per_client = 64;
  // Calls in flight from all clients together.
  int max_calls = 1024;
};

class CallGuard {
 public:
  CallGuard(std::shared_ptr<const Security> security, CallLimits limits);

  // Holds a call's place until destroyed. Move-only.
  class Admission {
   public:
    Admission(Admission&& o) noexcept : guard_(o.guard_), peer_(std::move(o.peer_)) {
      o.guard_ = nullptr;
    }
    Admission& operator=(Admission&&) = delete;
    Admission(const Admission&) = delete;
    ~Admission();

   private:
    friend class CallGuard;
    Admission(CallGuard* guard, std::string peer) : guard_(guard), peer_(std::move(peer)) {}
    CallGuard* guard_;
    std::string peer_;
  };

  // Unauthenticated (from Security::Authenticate) or ResourceExhausted
  // naming the limit ("ipv4:...:N already has 64 calls in flight, the limit
  // per client (--max_calls_per_client)"). `method` is for the log.
  absl::StatusOr<Admission> Admit(const grpc::ServerContextBase& ctx, const char* method)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same for a call that reached the server other than through gRPC
  // (transport/frame_socket.h): `token` is the one it presented ("" for none),
  // `peer` names the connection ("10.0.0.3:51234").
  absl::StatusOr<Admission> Admit(absl::string_view token, std::string peer, const char* method)
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t unauthenticated() const { return unauthenticated_.load(std::memory_order_relaxed); }
  int64_t over_limit() const { return over_limit_.load(std::memory_order_relaxed); }
  int in_flight() const ABSL_LOCKS_EXCLUDED(mu_);
  const Security& security() const { return *security_; }

 private:
  absl::StatusOr<Admission> Admit(absl::Status auth, std::string peer, const char* method)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const std::string& peer) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Refuse(absl::Status why, const std::string& peer, const char* method,
                      std::atomic<int64_t>* count) ABSL_LOCKS_EXCLUDED(log_mu_);

  const std::shared_ptr<const Security> security_;
  const CallLimits limits_;
  std::atomic<int64_t> unauthenticated_{0};
  std::atomic<int64_t> over_limit_{0};
  mutable absl::Mutex mu_;
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> per_peer_ ABSL_GUARDED_BY(mu_);
  absl::Mutex log_mu_;
  absl::Time last_log_ ABSL_GUARDED_BY(log_mu_) = absl::InfinitePast();
  int64_t unlogged_ ABSL_GUARDED_BY(log_mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_CALL_GUARD_H_
