// The control plane of one PS, apart from any transport: what the chief's
// calls do to a ShardStore (create the variables, hold pushes, save and
// restore checkpoints, report health and counts), on the messages of
// proto/ps_service.proto. The gRPC service (ps_server/ps_service.h) adapts
// these to its RPCs; an in-process cluster (client/in_process_cluster.h)
// calls them directly, so the chief's logic is tested against a PS's real
// rules without a network.
//
// Hold and Save block (a hold waits for pushes being applied, a save for
// its fsyncs): callers that must not block run them elsewhere. Thread-safe.
#ifndef PSTRAIN_STORE_PS_CONTROL_H_
#define PSTRAIN_STORE_PS_CONTROL_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/env.h"
#include "proto/ps_service.pb.h"
#include "store/shard_store.h"

namespace pstrain::ps {

// The longest a chief may hold a PS's pushes: a chief that dies holding them
// stalls training no longer than this.
inline constexpr int32_t kMaxHoldLeaseMs = 60'000;

struct PsControlOptions {
  // Where checkpoint shards are written and read (never null; must outlive
  // the control).
  Env* env = Env::Default();
};

class PsControl {
 public:
  // `store` must outlive this.
  explicit PsControl(ShardStore* store, const PsControlOptions& options = PsControlOptions())
      : store_(store), options_(options) {}

  ShardStore& store() { return *store_; }

  // Creates the variables the request names (with its values, or from
  // their initializers), then, when it asks, restores its checkpoint.
  // `already_initialized` in the answer: the store held variables before
  // (they are kept). InvalidArgument naming what is wrong: a request meant
  // for another PS, values that do not match the slices, a slice that does
  // not fit its shape; Initialize's and Restore's errors.
  absl::StatusOr<v1::CreateVariablesResponse> CreateVariables(
      const v1::CreateVariablesRequest& req);

  // Loads the checkpoint the request names (re-sliced when another number
  // of PS wrote it) and serves its generation. FailedPrecondition before
  // the variables exist; InvalidArgument for a reference without a
  // directory, step or PS count; the read's errors naming the file.
  absl::StatusOr<v1::RestoreResponse> Restore(const v1::RestoreRequest& req);

  // Holds pushes for the request's lease (0 ms: ends the hold) and answers
  // the global step at the cut. InvalidArgument for a lease outside [0,
  // kMaxHoldLeaseMs]; PushHold::Hold's errors. Blocks while pushes being
  // applied finish.
  absl::StatusOr<v1::HoldPushesResponse> HoldPushes(const v1::HoldPushesRequest& req);

  // Writes this PS's shard of the request's checkpoint (a snapshot, then
  // the file, fsynced), ending a push hold once the snapshot is cut when
  // the request says so. InvalidArgument without a directory or a step;
  // Snapshot's and WriteShard's errors naming the file. Blocks.
  absl::StatusOr<v1::SaveCheckpointResponse> SaveCheckpoint(const v1::SaveCheckpointRequest& req);

  // Whether the variables are ready, their generation, the global step,
  // this PS's index and the step last restored (frame_port: the caller's).
  v1::HealthResponse Health() const;
  // Every tensor's counts and the global step (the transport's own counts:
  // the caller's).
  v1::StatsResponse Stats() const;

  // Shards written (SaveCheckpoint calls completed).
  int64_t shards_written() const { return shards_written_.load(std::memory_order_acquire); }

 private:
  absl::Status RestoreFrom(const v1::CheckpointRef& ref, int64_t generation,
                           v1::RestoreResponse* resp);

  ShardStore* const store_;
  const PsControlOptions options_;
  std::atomic<int64_t> shards_written_{0};
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_STORE_PS_CONTROL_H_
