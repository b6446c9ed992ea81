// Client side of the PS service for every role that talks to the PS: the
// worker (pull, push), the chief (create, final pull, shutdown) and tools
// (stats). Owns one channel and stub per PS.
//
// Every call has a deadline. Calls that span several PS run in parallel, one
// RPC per PS. Only Unavailable is retried, with exponential backoff, up to
// `max_attempts`; every other error is returned at once. Errors name the PS:
// "ps:1 (127.0.0.1:4001): Pull: <what the PS said>".
//
// Thread-compatible: the pull/push paths reuse request buffers, so use one
// PsClient per thread (they are cheap; channels to the same address are
// shared by gRPC).
#ifndef PSTRAIN_WORKER_PS_CLIENT_H_
#define PSTRAIN_WORKER_PS_CLIENT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/optimizer_spec.h"
#include "common/placement.h"
#include "common/tf_config.h"
#include "proto/ps_service.grpc.pb.h"

namespace pstrain::worker {

struct PsClientOptions {
  std::vector<HostPort> ps_addresses;
  // 30 s: a pull or push of the largest slice on loopback takes milliseconds;
  // anything this slow is a lost peer.
  absl::Duration rpc_deadline = absl::Seconds(30);
  // Attempts per call for Unavailable, with backoff 50 ms doubling to 2 s.
  int max_attempts = 8;
  int max_message_bytes = 512 << 20;
};

class PsClient {
 public:
  // `placement` fixes which slices pull and push move. InvalidArgument when
  // the placement's PS count differs from the addresses given.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(
      const PsClientOptions& options, const Placement& placement);

  int num_ps() const { return static_cast<int>(stubs_.size()); }
  // "ps:1 (127.0.0.1:4001)".
  std::string PsName(int ps) const;

  // Polls every PS's Health until all answer (and, if `require_initialized`,
  // report initialised variables) or `timeout` passes. Logs, every 5 s, whom
  // it still waits for. DeadlineExceeded naming every PS still missing.
  absl::Status WaitUntilReady(absl::Duration timeout, bool require_initialized);

  // Sends every PS its slices with values taken from `params` (the flat
  // layout: variable v starts at `offsets[v]`, in placement.variables order).
  // Returns how many PS were already initialised (and kept their values).
  absl::StatusOr<int> CreateVariables(const std::vector<float>& params,
                                      const std::vector<int64_t>& offsets,
                                      const OptimizerSpec& optimizer);

  // Pulls every slice into `params` (flat layout as above). On error the
  // contents of `params` are unspecified. Returns the largest global step
  // among the PS.
  absl::StatusOr<int64_t> PullAll(float* params,
                                  const std::vector<int64_t>& offsets);

  // Pushes the gradient of every slice from `grads` (flat layout).
  absl::Status PushAll(const float* grads, const std::vector<int64_t>& offsets,
                       int replica, int64_t step);

  absl::StatusOr<std::vector<v1::StatsResponse>> Stats();

  // Asks every PS to exit; PS that are already gone are not an error.
  absl::Status ShutdownAll(const std::string& reason);

 private:
  PsClient(const PsClientOptions& options, const Placement& placement);

  // Runs `call(ps, ctx, done)` for each PS in `targets` concurrently and
  // waits for all, retrying Unavailable ones with backoff. `call` must start
  // an async RPC on ctx and arrange for done(status) to run when it ends.
  using AsyncCall = std::function<void(int ps, grpc::ClientContext* ctx,
                                       std::function<void(grpc::Status)> done)>;
  absl::Status CallEach(const std::vector<int>& targets,
                        absl::string_view method, const AsyncCall& call,
                        absl::Duration deadline);

  const PsClientOptions options_;
  const Placement placement_;
  std::vector<std::unique_ptr<v1::PsService::Stub>> stubs_;
  // Per PS: its slices (placement order), and reusable requests/responses.
  std::vector<std::vector<SliceDef>> slices_on_;
  std::vector<int> ps_with_slices_;
  std::vector<v1::PullRequest> pull_requests_;
  std::vector<v1::PullResponse> pull_responses_;
  std::vector<v1::PushRequest> push_requests_;
  std::vector<v1::PushResponse> push_responses_;
  std::map<std::string, int> variable_index_;
};

}  // namespace pstrain::worker

#endif  // PSTRAIN_WORKER_PS_CLIENT_H_
