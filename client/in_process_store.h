// A parameter store (client/parameter_store.h) whose PS are ShardStores in
// this process (store/shard_store.h), reached by function call instead of
// frames: TensorFlow's local-worker bypass. `pstrain train --local` trains
// on one; unit tests of the trainer and the chief run several replicas and
// several PS in one process with the PS's real rules (sync rounds, ssp
// bounds, generations, checkpoint holds), no network in between.
//
// Gradients are pushed from the caller's memory (no copy) and, for a
// push-then-pull of async tensors, the new values are written back while
// they are in cache (ShardStore::PushBatch::read_back), straight into the
// caller's parameters where a PS's slices lie side by side there. Pulls that
// must wait (sync, ssp) park on the store's WaitList.
//
// Exchanges run on the thread that starts them: Start* returns once the
// exchange has ended, and Wait only reports. Thread-compatible, as
// ParameterStore; any number of InProcessStores (one per replica) may use
// the same ShardStores at once.
#ifndef PSTRAIN_CLIENT_IN_PROCESS_STORE_H_
#define PSTRAIN_CLIENT_IN_PROCESS_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/parameter_store.h"
#include "cluster/placement.h"
#include "store/shard_store.h"

namespace pstrain::client {

struct InProcessOptions {
  // This store's training replica, sent with every push and pull.
  int replica = 0;
  // The job's consistency mode, sent with pushes (a PS of another mode
  // refuses them); tables without a mode of their own follow it.
  Consistency consistency;
  // How long a pull may wait for other replicas (sync, ssp) before it fails
  // naming them, when the job sets no bound of its own.
  absl::Duration wait_timeout = absl::Seconds(120);
};

class InProcessStore final : public ParameterStore {
 public:
  // PS `ps`'s store, or Unavailable when it is down (a test's PS that
  // stopped); called for each exchange, so a PS started again is found.
  using PsLookup = std::function<absl::StatusOr<std::shared_ptr<ps::ShardStore>>(int ps)>;

  // The PS of `placement` (placement.num_ps of them) through `lookup`,
  // exchanging with arrays laid out by `offsets` (variable v from
  // offsets[v], in placement.variables' order). InvalidArgument when the
  // offsets do not match the variables.
  static absl::StatusOr<std::unique_ptr<InProcessStore>> Create(PsLookup lookup,
                                                                const Placement& placement,
                                                                std::vector<int64_t> offsets,
                                                                const InProcessOptions& options);
  // The same over fixed stores, stores[ps] for each PS.
  static absl::StatusOr<std::unique_ptr<InProcessStore>> Create(
      std::vector<std::shared_ptr<ps::ShardStore>> stores, const Placement& placement,
      std::vector<int64_t> offsets, const InProcessOptions& options);

  absl::Status WaitUntilReady(absl::Duration timeout) override;
  int64_t generation() const override { return generation_; }
  int64_t restored_step() const override { return restored_step_; }
  absl::StatusOr<int64_t> ReplicaPushes(int replica) override;
  void set_stop_step(int64_t step) override { stop_step_ = step; }
  int64_t dropped_pushes() const override { return dropped_; }

  Ticket StartDense(absl::Span<const int> variables, const float* grads, float* params,
                    Queue queue) override;
  Ticket StartRows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull,
                   Queue queue) override;
  absl::StatusOr<int64_t> Wait(Ticket ticket) override;
  absl::Status Drain() override;

 private:
  InProcessStore(PsLookup lookup, const Placement& placement, std::vector<int64_t> offsets,
                 const InProcessOptions& options);

  // One PS's slices an exchange moves: indices into slices_on_[ps].
  struct DenseWork {
    int ps = 0;
    std::vector<int> slices;
  };
  absl::StatusOr<int64_t> Dense(absl::Span<const int> variables, const float* grads,
                                float* params);
  // Push and/or pull of `work`'s slices on its PS; returns its global step.
  absl::StatusOr<int64_t> DenseOnPs(const DenseWork& work, const float* grads, float* params);
  // One table's rows of an exchange, by the PS that owns them: each PS's
  // ids and, with several PS, their positions in the caller's arrays (none:
  // all of them, in order). A sync table exchanges with every PS, rows or
  // not.
  struct RowsOf {
    int index = 0;  // in placement_.embeddings
    int64_t dim = 0;
    bool sync = false;
    std::vector<absl::Span<const int64_t>> ids_on;
    std::vector<std::vector<size_t>> pos_on;
    std::vector<std::vector<int64_t>> own_ids;  // what ids_on views, with several PS
    bool Sends(int ps) const { return sync || !ids_on[ps].empty(); }
  };
  absl::Status GroupRows(absl::Span<const TableRows> tables, std::vector<RowsOf>* out) const;
  absl::Status Rows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull);
  absl::Status PushRowsTo(ps::ShardStore& store, absl::Span<const TableRows> push,
                          const std::vector<RowsOf>& pushed);
  absl::Status PullRowsFrom(ps::ShardStore& store, absl::Span<const TableRows> pull,
                            const std::vector<RowsOf>& pulled);
  // Pulls `batch` from `store` into `out`, waiting as the PS's rules say (at
  // most the job's sync wait, else options_.wait_timeout).
  absl::Status PullWaiting(ps::ShardStore& store, const ps::ShardStore::PullBatch& batch,
                           char* out, std::vector<ps::ShardStore::Pulled>* pulled);
  absl::StatusOr<std::shared_ptr<ps::ShardStore>> StoreOf(int ps);
  std::string PsName(int ps) const;

  const PsLookup lookup_;
  const Placement placement_;
  const std::vector<int64_t> offsets_;
  const InProcessOptions options_;
  // Per PS: its slices (placement order), their keys, the variable each is
  // of, and the version each was last pulled at (sent with its next push).
  std::vector<std::vector<SliceDef>> slices_on_;
  std::vector<std::vector<std::string>> keys_;
  std::vector<std::vector<int>> slice_variable_;
  std::vector<std::vector<int64_t>> versions_;
  // Per embedding table, per PS: its version in the last pull of its rows.
  std::vector<std::vector<int64_t>> table_versions_;
  // Where values and gradients go when they are not side by side in the
  // caller's memory.
  std::vector<char> scratch_;
  int64_t generation_ = 0;
  int64_t restored_step_ = 0;
  int64_t stop_step_ = 0;
  int64_t dropped_ = 0;
  EndedQueues queues_;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_IN_PROCESS_STORE_H_
