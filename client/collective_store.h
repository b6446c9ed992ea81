// A parameter store (client/parameter_store.h) for a job without PS, as
// MultiWorkerMirroredStrategy trains: every replica holds the whole model in
// a store of its own (an InProcessStore over one ShardStore, as `train
// --local` has), and before each update the replicas average their
// gradients among themselves over a ring (transport/ring.h):
//   dense   the gradients of the exchange's variables, packed into one
//           buffer (one fused all-reduce per exchange), summed by the ring
//           and scaled by 1/n, then applied by the replica's own store;
//   rows    each table's (ids, gradient rows) all-gathered, never
//           densified, and applied by every replica in rank order, each
//           row gradient scaled by 1/n (Horovod's treatment of IndexedSlices).
// The ring's sums are the same bits on every replica and the optimizers are
// deterministic, so the replicas stay identical, step after step; n
// replicas of batch B step as one replica of batch nB would, to float
// rounding.
//
// Pulls never leave the replica. Every replica must start the same
// exchanges in the same order (the step loop's, train/trainer.h, with the
// same model and schedule does). Exchanges run on the caller's thread, as
// the inner store's do. Thread-compatible.
#ifndef PSTRAIN_CLIENT_COLLECTIVE_STORE_H_
#define PSTRAIN_CLIENT_COLLECTIVE_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/parameter_store.h"
#include "cluster/placement.h"
#include "transport/ring.h"

namespace pstrain::client {

// The replicas' vote on stopping (a signal to any one of them), carried in
// each dense all-reduce: two more floats, this replica's signal (0: none)
// and whether it has one. After the exchange every replica holds the same
// sums, so they all agree on the answer, and stop before the same step.
struct StopVote {
  std::atomic<int> mine{0};    // this replica's signal, for the next exchange
  std::atomic<int> agreed{0};  // what the last exchange decided (0: go on)
};

class CollectiveStore final : public ParameterStore {
 public:
  // `local`: the replica's own store of `placement`'s variables, laid out
  // by `offsets` (dense variable v from offsets[v]). `ring` must outlive
  // the store. With `bfloat16_wire` (--wire_dtype=bfloat16) the dense
  // gradients cross the ring as bfloat16 (Ring::AllReduceSum); rows stay
  // float32.
  // `vote`, when given, travels in every dense exchange.
  CollectiveStore(std::unique_ptr<ParameterStore> local, Ring* ring, const Placement& placement,
                  std::vector<int64_t> offsets, bool bfloat16_wire = false,
                  std::shared_ptr<StopVote> vote = nullptr);

  absl::Status WaitUntilReady(absl::Duration timeout) override {
    return local_->WaitUntilReady(timeout);
  }
  int64_t generation() const override { return local_->generation(); }
  int64_t restored_step() const override { return local_->restored_step(); }
  absl::StatusOr<int64_t> ReplicaPushes(int replica) override {
    return local_->ReplicaPushes(replica);
  }
  void set_stop_step(int64_t step) override { local_->set_stop_step(step); }
  int64_t dropped_pushes() const override { return 0; }

  Ticket StartDense(absl::Span<const int> variables, const float* grads, float* params,
                    Queue queue) override;
  Ticket StartRows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull,
                   Queue queue) override;
  absl::StatusOr<int64_t> Wait(Ticket ticket) override;
  absl::Status Drain() override;

  // Seconds spent in the ring's collectives so far.
  double collective_seconds() const { return collective_seconds_; }

 private:
  absl::StatusOr<int64_t> Dense(absl::Span<const int> variables, const float* grads,
                                float* params, Queue queue);
  absl::Status Rows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull,
                    Queue queue);
  int64_t TableDim(const std::string& table) const;

  std::unique_ptr<ParameterStore> local_;
  Ring* const ring_;
  const bool bfloat16_wire_;
  const std::shared_ptr<StopVote> vote_;
  const std::vector<VariableDef> variables_;  // dense
  const std::vector<VariableDef> tables_;
  const std::vector<int64_t> offsets_;
  std::vector<float> packed_;   // the exchange's gradients, packed, summed
  std::vector<float> averaged_; // ... placed back in the model's layout
  double collective_seconds_ = 0;
  EndedQueues queues_;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_COLLECTIVE_STORE_H_
