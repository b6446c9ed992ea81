// The control plane of a job's PS, as the chief and the tools use it:
// create the variables (or restore them), hold pushes and save a
// checkpoint cut at one moment, read counts, stop the PS. Each call goes to
// every PS at once (a thread per PS) through a PsControlChannel
// (client/control_channel.h): gRPC, or a test's in-process cluster.
//
// A call's deadline covers its retries: a PS not reached (Unavailable) is
// asked again, 50 ms later and then at doubling intervals up to 2 s, until
// the deadline; any other error ends the call. Errors name the PS ("ps:1
// (127.0.0.1:4001): SaveCheckpoint: ...").
//
// Thread-safe: the chief's checkpoint loop, PS watch and final phase share
// one.
#ifndef PSTRAIN_CLIENT_PS_ADMIN_H_
#define PSTRAIN_CLIENT_PS_ADMIN_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/control_channel.h"
#include "client/create_request.h"
#include "client/grpc_control_channel.h"
#include "cluster/placement.h"

namespace pstrain::client {

class PsAdmin {
 public:
  // 30 s: a control call on loopback takes milliseconds; anything this slow
  // is a lost peer. Saves and restores of large models get their own.
  static constexpr absl::Duration kCallDeadline = absl::Seconds(30);

  // Over gRPC to the PS of `options`.
  static std::unique_ptr<PsAdmin> Connect(const ControlChannelOptions& options) {
    return std::make_unique<PsAdmin>(std::make_unique<GrpcControlChannel>(options));
  }
  // Over `channel`, which must outlive the admin.
  explicit PsAdmin(PsControlChannel* channel) : channel_(channel) {}
  // Owning `channel`.
  explicit PsAdmin(std::unique_ptr<PsControlChannel> channel)
      : owned_(std::move(channel)), channel_(owned_.get()) {}

  int num_ps() const { return channel_->num_ps(); }
  std::string PsName(int ps) const { return channel_->PsName(ps); }
  PsControlChannel& channel() { return *channel_; }
  // PsControlChannel::CancelCalls.
  void CancelCalls() { channel_->CancelCalls(); }

  // One PS's Health within `timeout` (see PsControlChannel::Health).
  absl::StatusOr<v1::HealthResponse> Health(int ps, absl::Duration timeout,
                                            bool wait_for_connection = false);
  // WaitForPs: every PS answering (initialised or not).
  absl::Status WaitUntilAnswering(absl::Duration timeout,
                                  const std::function<absl::Status()>& abort_check = nullptr);

  // Sends every PS its slices of `placement` with values from `params`
  // (CreateRequestFor; empty: their initializers), and every table.
  // Returns how many PS were already initialised (and kept their values);
  // their indices go to `kept_ps` when not null.
  absl::StatusOr<int> CreateVariables(const Placement& placement,
                                      const std::vector<float>& params,
                                      const std::vector<int64_t>& offsets,
                                      const CreateOptions& create,
                                      std::vector<int>* kept_ps = nullptr);

  // Every PS's Stats, in PS order.
  absl::StatusOr<std::vector<v1::StatsResponse>> Stats();
  // ReplicaPushesIn over every PS's Stats.
  absl::StatusOr<int64_t> ReplicaPushes(const Placement& placement, int replica);
  // The job's global step: the lowest any PS reports.
  absl::StatusOr<int64_t> GlobalStep();

  // Holds every PS's pushes for at most `lease` (HoldPushesRequest) and
  // returns the global step at that cut (the lowest any PS reports). On an
  // error, the PS that did hold are released and the error names the PS
  // that failed. InvalidArgument for a lease under 1 ms.
  absl::StatusOr<int64_t> HoldPushes(absl::Duration lease);
  // Ends every PS's hold (also those whose lease ended already).
  absl::Status ReleasePushes();

  // Every PS writes its shard of checkpoint `step` under `dir`, ending its
  // push hold once its snapshot is cut when `release_hold`; the answers in
  // PS order.
  absl::StatusOr<std::vector<v1::SaveCheckpointResponse>> SaveCheckpoint(const std::string& dir,
                                                                         int64_t step,
                                                                         absl::Duration timeout,
                                                                         bool release_hold = false);

  // PS `targets` replace their values with checkpoint `step` under `dir`,
  // written by `written_by` PS, and serve `generation`; the answers by PS
  // index (empty for PS not targeted).
  absl::StatusOr<std::vector<v1::RestoreResponse>> Restore(const std::vector<int>& targets,
                                                           const std::string& dir, int64_t step,
                                                           int written_by, int64_t generation,
                                                           absl::Duration timeout);

  // Asks every PS to exit with `exit_code` (base/exit_codes.h). A PS not
  // answering (Unavailable) is asked again every half second for up to
  // `wait_for_unreachable` (it may be restarting); one still not answering
  // then is taken to be gone already and logged, not an error.
  absl::Status ShutdownAll(const std::string& reason, int exit_code = 0,
                           absl::Duration wait_for_unreachable = absl::ZeroDuration());

 private:
  // Runs call(ps, deadline) for every PS of `targets` at once and waits for
  // all, retrying those not reached until `timeout` has passed. The first
  // error (by PS order) other than a retried Unavailable, else OK.
  absl::Status OnEach(absl::Span<const int> targets, absl::Duration timeout,
                      const std::function<absl::Status(int ps, absl::Time deadline)>& call);
  std::vector<int> AllPs() const;

  std::unique_ptr<PsControlChannel> owned_;
  PsControlChannel* const channel_;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_PS_ADMIN_H_
