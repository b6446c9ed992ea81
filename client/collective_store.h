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
// same model and schedule does).
//
// Exchanges run on a thread of the store's, one after another in the order
// started (the ring's collectives must come in the same order on every
// replica), so Start* returns at once: a step loop that starts each layer's
// exchange as soon as backprop has produced its gradient (push_per_layer)
// has the ring average the last layers while the earlier ones are still
// being differentiated, as DDP's buckets and Horovod's fusion buffer do.
// Consecutive dense exchanges of the same gradient and parameter arrays
// are packed into one all-reduce until the pack holds `bytes_per_pack`
// bytes of gradients or the model's first variable (the last that backprop
// produces); a pack is also sent when anything else is started or waited
// for. What goes into a pack depends only on the calls' order and sizes,
// never on timing, so every replica packs alike. Thread-compatible: one
// thread starts and waits.
#ifndef PSTRAIN_CLIENT_COLLECTIVE_STORE_H_
#define PSTRAIN_CLIENT_COLLECTIVE_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/serial_worker.h"
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

struct CollectiveOptions {
  // --wire_dtype=bfloat16: the dense gradients cross the ring as bfloat16
  // (Ring::AllReduceSum); rows stay float32.
  bool bfloat16_wire = false;
  // The replicas' stop vote, carried in every dense all-reduce; may be null.
  std::shared_ptr<StopVote> vote;
  // A pack's size (--bytes_per_pack, as TensorFlow's CommunicationOptions
  // name it): dense exchanges are packed into one all-reduce until they
  // hold this many bytes of gradients. 0: each exchange is sent as it
  // starts.
  int64_t bytes_per_pack = 0;
};

class CollectiveStore final : public ParameterStore {
 public:
  // `local`: the replica's own store of `placement`'s variables, laid out
  // by `offsets` (dense variable v from offsets[v]). `ring` must outlive
  // the store, and nothing else may call its collectives while an exchange
  // is under way (between a Start* and the Drain or Wait that ends it).
  CollectiveStore(std::unique_ptr<ParameterStore> local, Ring* ring, const Placement& placement,
                  std::vector<int64_t> offsets, CollectiveOptions options);
  // Waits for the exchanges started (each ends or fails within the ring's
  // timeout).
  ~CollectiveStore() override;

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

  // Seconds spent in the ring's collectives so far, and the all-reduces
  // the dense exchanges made (one per pack).
  double collective_seconds() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t dense_all_reduces() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Dense exchanges waiting to be sent as one all-reduce (the caller's).
  struct Pack {
    std::vector<int> variables;
    int64_t floats = 0;
    const float* grads = nullptr;
    float* params = nullptr;
    Queue queue = Queue::kDense;
    int64_t first = 0;  // the first and last ticket numbers in it (0: empty)
    int64_t last = 0;
  };
  // Hands the pack to the exchange thread (nothing when it is empty).
  void SendPack();
  Ticket NextTicket(Queue queue) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `exchange` on the exchange thread as ticket `last` (and every
  // earlier one of its queue); skipped after an error of that queue.
  void Post(Ticket last, std::function<absl::StatusOr<int64_t>()> exchange);

  // On the exchange thread.
  absl::StatusOr<int64_t> Dense(const std::vector<int>& variables, const float* grads,
                                float* params, Queue queue);
  absl::Status Rows(const std::vector<TableRows>& push, const std::vector<TableRows>& pull,
                    Queue queue);
  void AddCollectiveTime(absl::Time start) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t TableDim(const std::string& table) const;

  std::unique_ptr<ParameterStore> local_;
  Ring* const ring_;
  const CollectiveOptions options_;
  const std::vector<VariableDef> variables_;  // dense
  const std::vector<VariableDef> tables_;
  const std::vector<int64_t> offsets_;
  // The caller's: the pack being filled.
  Pack pack_;
  // The exchange thread's.
  std::vector<float> packed_;    // the exchange's gradients, packed, summed
  std::vector<float> averaged_;  // ... placed back in the model's layout

  mutable absl::Mutex mu_;
  EndedQueues queues_ ABSL_GUARDED_BY(mu_);
  double collective_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dense_all_reduces_ ABSL_GUARDED_BY(mu_) = 0;
  // Last: destroyed first, so its thread ends before what it uses.
  SerialWorker exchanges_;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_COLLECTIVE_STORE_H_
