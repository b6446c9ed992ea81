// Holds this PS's part of the model and applies pushed gradients to it:
//   - dense slices, each one contiguous block with its optimizer slots beside
//     it (values at [0, n), slot k at [(k+1) n, (k+2) n)); a non-trainable
//     slice has no slots and is moved by the increments pushed to it
//     (added as they are) or, frozen, not at all (a push is refused);
//   - embedding tables, whose rows owned by this PS (EmbeddingOwner) are
//     created on first touch from the initializer and updated lazily: only
//     the rows a push names move, each with its own update count (lazy Adam
//     and Adagrad).
// Every tensor (slice or table) has a consistency mode, the job's unless the
// model overrides it per variable:
//   async  each gradient is applied on arrival.
//   sync   gradients for version v are summed until replicas_to_aggregate
//          distinct replicas have pushed, then their average is applied once
//          and the version becomes v + 1. A gradient for an older version
//          (a late backup replica's) is dropped and counted; one for a newer
//          version, or a second one from the same replica, is an error.
//   ssp:S  applied on arrival; a replica's clock counts its pushes to the
//          tensor, and its pull waits while its clock is more than S ahead
//          of the slowest replica's.
// In sync mode a replica's pull waits until the tensor has moved past every
// version that replica pushed, so each replica sees each aggregated step.
// A tensor's version counts the updates applied to it. Pulls return it, and
// pushes say which version their gradient was computed from, which gives
// staleness (version now minus version pulled) for the histogram.
//
// Lifecycle: created empty; Initialize() fills it once; afterwards the set of
// tensors never changes, so lookups need no lock. Each tensor has its own
// mutex. Thread-safe.
//
// The store is the coordinator of its parts, each with one reason to change:
// stored_tensor.h (storage, table rows, answers held in place),
// update_rules.h (optimizer application, NaN/Inf checks), round_gate.h
// (sync rounds, the ssp bound), store_checkpoint.h (checkpoint records),
// push_hold.h (the checkpoint's hold on pushes). It
// knows nothing of gRPC: gradients arrive as a Payload (base/payload.h)
// and in-place answers leave as HeldBytes; ps_service.cc speaks the wire.
#ifndef PSTRAIN_STORE_SHARD_STORE_H_
#define PSTRAIN_STORE_SHARD_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/reshard.h"
#include "base/clock.h"
#include "cluster/consistency.h"
#include "cluster/global_step.h"
#include "base/payload.h"
#include "cluster/placement.h"
#include "cluster/staleness.h"
#include "optim/optimizer.h"
#include "store/push_hold.h"
#include "store/stored_tensor.h"
#include "store/update_rules.h"
#include "store/wait_list.h"

namespace pstrain::ps {

struct TensorStats {
  std::string key;  // slice key, or the table's name
  std::string variable;
  std::string consistency;
  int64_t bytes = 0;   // values held (tables: rows created so far)
  int64_t rows = 0;    // tables: rows created
  int64_t pushes = 0;  // gradients received (applied or dropped)
  int64_t pulls = 0;
  int64_t version = 0;  // updates applied (sync: aggregated steps)
  int64_t dropped_stale = 0;
  std::array<int64_t, kStalenessBuckets> staleness{};
  std::vector<int64_t> replica_pushes;  // dense: pushes applied per replica
  // Dense async and ssp: pushes received again (PushBatch::push_number)
  // and answered without being applied a second time.
  int64_t repeated_pushes = 0;
};

class ShardStore {
 public:
  // Rows one embedding table may create on this PS: pulls of rows never
  // pushed create nothing (their values follow from the seed), and a push
  // that would take a table past the limit is refused whole with
  // ResourceExhausted naming it.
  static constexpr int64_t kDefaultMaxTableRows = int64_t{1} << 24;

  // The push hold's leases and the wait list's deadlines run on `clock`
  // (never null; must outlive the store).
  ShardStore(int ps_index, int num_ps, int64_t max_table_rows = kDefaultMaxTableRows,
             const Clock* clock = Clock::Real());
  ~ShardStore();
  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  int ps_index() const { return ps_index_; }
  int num_ps() const { return num_ps_; }

  struct JobConfig {
    OptimizerSpec optimizer;
    Consistency consistency;
    int num_replicas = 1;
    int replicas_to_aggregate = 0;  // 0: num_replicas
    uint64_t seed = 1;
    // The recovery generation the created values belong to (0: unchecked).
    int64_t generation = 0;
    // How long a pull may wait for other replicas (sync step, ssp bound)
    // before it fails naming them; zero: the service's default.
    absl::Duration sync_wait = absl::ZeroDuration();
  };
  struct DenseInit {
    SliceDef def;
    std::string consistency;  // empty: the job's
    std::string initializer;  // used when !has_value
    // Trainable (optimizer slots beside it), moved by increments or frozen
    // (no slots; pushes refused; not counted in the global step).
    VariableUpdate update = VariableUpdate::kOptimizer;
    bool has_value = false;
    absl::string_view value;  // raw float32 bytes of the slice
  };
  struct EmbeddingInit {
    std::string variable;
    int64_t vocabulary = 0;
    int64_t dim = 0;
    std::string consistency;
    std::string initializer;  // empty: "uniform:0.05", Keras's default
  };

  // Creates the tensors. Returns true when created now, false when the store
  // was already initialised (the existing values are kept; the request is
  // ignored). InvalidArgument, with nothing stored, naming the tensor when:
  // a slice is meant for another PS, a key repeats, row bounds do not fit, a
  // value has the wrong byte length or holds NaN/Inf, an initializer or
  // consistency does not parse, replica counts are out of range, or the
  // optimizer is unknown.
  // `await_restore`: the values are about to be replaced from a checkpoint;
  // the store is not ready() until Restore succeeds.
  absl::StatusOr<bool> Initialize(const JobConfig& job, const std::vector<DenseInit>& dense,
                                  const std::vector<EmbeddingInit>& embeddings,
                                  bool await_restore = false) ABSL_LOCKS_EXCLUDED(init_mu_);

  // The tensors exist.
  bool initialized() const { return initialized_.load(std::memory_order_acquire); }
  // The tensors exist and hold the values to train from (not awaiting a
  // restore): what Health reports as initialised.
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // The recovery generation the values belong to: the job's at creation,
  // then that of the last Restore.
  int64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // Valid once initialized().
  const JobConfig& job() const { return job_; }

  // A tensor named in a push or pull.
  struct TensorRef {
    absl::string_view key;
    absl::Span<const int64_t> ids;  // tables only: the rows
    int64_t version = 0;            // push: the version the gradient came from
    int64_t bytes = -1;             // push: bytes the sender declared (-1: unchecked)
    // Push, tables: the ids are known to be distinct (an in-process caller
    // that made them so), so their rows need no merging. Never set from a
    // request received: a peer's repeated ids add up.
    bool distinct_ids = false;
  };
  struct Pulled {
    int64_t version = 0;
    int64_t bytes = 0;
  };

  struct PushBatch {
    int replica = 0;
    // The generation the gradient's values came from (0: unchecked);
    // another than the store's is refused, Aborted.
    int64_t generation = 0;
    // sync: the step the job ends at (0: none); gradients for tensors
    // already there are dropped (and counted) instead of starting a round
    // that the stopped replicas would never finish.
    int64_t stop_step = 0;
    std::string consistency;  // the sender's idea of the job's mode; empty: unchecked
    // The sender's count of its own pushes once this one is in (its step in
    // its schedule, 1, 2, ...); 0: not numbered. A dense async or ssp
    // tensor that has already applied that many pushes from the replica
    // (StoredTensor::replica_pushes) takes it as a repeat: it is answered
    // as if applied (its values read back, applied[i] true) but nothing
    // changes and it is counted in TensorStats::repeated_pushes. So a push
    // sent again (a replica resumed from the fewest count over slices, a
    // push that landed on some PS before a checkpoint cut or a crash and
    // not on others, a request retried after its answer was lost) lands
    // once in every slice. Sync tensors ignore it: a round's version says
    // whether the push is late.
    int64_t push_number = 0;
    std::vector<TensorRef> tensors;
    // The caller holds a PushHold::Pass for this push (push_hold(), Enter
    // or TryEnter) until Push returns: Push does not wait on the hold.
    bool admitted = false;
    // Optional, for a push-then-pull of the same tensors when every one is
    // dense and async (nothing to wait for): the new values are written here
    // back to back while they are still in cache, and each tensor's version
    // and bytes appended to read_back_versions, as TryPull would.
    char* read_back = nullptr;
    // Or the answer goes out without a reply buffer: set to the payload
    // given to Push (writable: received memory no one else reads), with
    // read_back_in_place set; exclusive with read_back. Then:
    // - with an optimizer that can exchange (SGD): the answer is the stored
    //   values themselves, appended to read_back_in_place->held. Each run
    //   of gradient is checked for NaN/Inf and applied while it is in L1,
    //   its previous values written over it
    //   (Optimizer::ApplyBytesExchanging), so there is no separate pass to
    //   check the gradient first; a bad value found part way copies the
    //   previous values back. While a hold lives, the next write to such a
    //   tensor moves on to a copy of its values instead of writing under
    //   the answer.
    // - otherwise: the new values overwrite the gradient in the payload
    //   (Payload::RewriteFloatRuns) and the answer is the payload's own
    //   bytes (read_back_in_place->in_payload).
    Payload* read_back_in_payload = nullptr;
    struct InPlaceAnswer {
      std::vector<HeldBytes> held;
      bool in_payload = false;
    };
    InPlaceAnswer* read_back_in_place = nullptr;
    std::vector<Pulled>* read_back_versions = nullptr;
  };

  // True when a push of `push` followed by a pull of `pull` may use
  // PushBatch::read_back: the same dense async tensors in the same order.
  bool CanReadBack(const PushBatch& push, const std::vector<TensorRef>& pull) const;
  // Applies one push: tensor i's gradient is bytes [offset_i, offset_i +
  // bytes_i) of `payload`, back to back from its start. All or nothing: an
  // error leaves every tensor as it was (everything is checked before
  // anything is applied, or, when exchanging, what was applied is taken
  // back). Returns, per tensor, whether the gradient was applied or
  // aggregated (false: dropped as stale).
  // Aborted for a batch of another generation than the store's (also
  // before Initialize: the PS started again); FailedPrecondition before
  // Initialize for a batch of generation 0, for a mode mismatch, or a sync
  // push ahead of the tensor's version or repeated by a replica; NotFound for
  // an unknown key; InvalidArgument for a key named twice, a byte length
  // that differs from the tensor's, ids out of range or owned by another PS,
  // a NaN or Inf, a replica out of range, or a payload of the wrong size.
  // (Locks a run-time set of tensors in index order, which the static
  // analysis cannot follow.)
  absl::StatusOr<std::vector<bool>> Push(const PushBatch& batch,
                                         const Payload& payload) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  struct PullBatch {
    int replica = 0;         // -1: an observer (chief, tools), which never waits
    int64_t generation = 0;  // as PushBatch::generation
    int64_t min_step = 0;    // sync: also wait for at least this version
    int64_t stop_step = 0;   // sync: no waiting once a tensor is here (0: none)
    std::vector<TensorRef> tensors;
  };
  // Checks a pull and returns the bytes its values take.
  absl::StatusOr<int64_t> PullSize(const PullBatch& batch) const;
  // Ready: copies the values back to back into `out` (PullSize bytes), says
  // each tensor's version and bytes, and returns true. Not ready (sync step or ssp
  // clock not reached): returns false and says what it waits for in
  // `*waiting_for`. Errors as PullSize.
  absl::StatusOr<bool> TryPull(const PullBatch& batch, char* out, std::vector<Pulled>* pulled,
                               std::string* waiting_for);

  // The clock the store's waits and leases run on.
  const Clock* clock() const { return clock_; }

  // Pulls that wait park here; Push notifies it when a sync step completes
  // or an ssp clock moves.
  WaitList& wait_list() { return wait_list_; }

  // Held by the chief's checkpoint so that every PS is cut at one moment
  // (push_hold.h); Push waits on it before it applies anything, unless the
  // batch was admitted by its caller.
  PushHold& push_hold() { return push_hold_; }

  // Over dense tensors but frozen ones (tables only when there are no
  // dense ones): with sync tensors, the lowest version among them; else
  // with ssp, the slowest replica's clock; else the highest version. 0
  // before Initialize. kNoStep when it holds frozen tensors alone, which
  // no push reaches: it has no step of its own, and whoever takes the
  // slowest PS's step passes it by (cluster/global_step.h).
  int64_t global_step() const;

  std::vector<TensorStats> Stats() const;

  // Every tensor's values, slots, update count and table rows; the header
  // says `step`. Dense tensors and tables that are not async as they are at
  // one moment: all locked together just long enough to hold the dense
  // buffers (copied afterwards, with no lock held: a push meanwhile writes to
  // a copy) and to copy those tables; async tables each under its own lock
  // afterwards. `after_cut` (tests) runs between the two. FailedPrecondition
  // before Initialize.
  absl::StatusOr<ckpt::ShardContents> Snapshot(
      int64_t step,
      const std::function<void()>& after_cut = nullptr) const ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // Replaces every tensor's values, slots, update count and table rows with
  // those of `shard`, a Snapshot of a store initialised with the same
  // variables (sync partial sums and ssp clocks start afresh). Everything is
  // checked first: DataLoss naming the tensor when the shard lacks one of
  // this store's tensors, has one it lacks, or a size disagrees, and then
  // nothing changes. FailedPrecondition before Initialize. Afterwards the
  // store serves `generation` (0: keeps its own) and is ready().
  absl::Status Restore(const ckpt::ShardContents& shard,
                       int64_t generation = 0) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // What the store holds, for re-slicing a checkpoint written by another
  // number of PS (checkpoint/reshard.h). Empty before Initialize.
  std::vector<ckpt::TargetTensor> Layout() const;

  // The step of the checkpoint last restored; 0 when none was.
  int64_t restored_step() const { return restored_step_.load(std::memory_order_acquire); }

 private:
  // A push resolved against the store: its tensors, where each one's
  // gradient lies, how it is applied.
  struct PushPlan;

  absl::StatusOr<StoredTensor*> Find(absl::string_view key) const;
  // Aborted when `generation` is neither 0 nor the store's, or is not 0
  // and the store has no variables (the PS started again since).
  absl::Status CheckGeneration(int64_t generation) const;

  // Push, phase by phase. Resolve: the batch against the job and the
  // tensors (mode, replica, keys, byte lengths, payload size, read-back use).
  absl::StatusOr<PushPlan> ResolvePush(const PushBatch& batch, const Payload& payload) const;
  // Stage: checks every gradient that is not exchanged for NaN/Inf; those
  // applied from memory are copied to scratch, table rows merged by id.
  absl::Status StageGradients(const PushBatch& batch, const Payload& payload, PushPlan& plan) const;
  // Admit, with every target locked: the generation, table row limits, and
  // which sync pushes are taken or dropped as stale.
  absl::Status AdmitLocked(const PushBatch& batch,
                           PushPlan& plan) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Apply, with every target locked: returns whether a waiting pull may now
  // be ready.
  absl::StatusOr<bool> ApplyExchangingLocked(const PushBatch& batch,
                                             PushPlan& plan) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Answers tensor i of a push it applied before (PushPlan::repeat): its
  // values to the read-back the batch asks for, nothing applied.
  void AnswerRepeatLocked(const PushBatch& batch, const PushPlan& plan,
                          size_t i) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  bool ApplyAllLocked(const PushBatch& batch, const Payload& payload,
                      PushPlan& plan) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const int ps_index_;
  const int num_ps_;
  const int64_t max_table_rows_;
  const Clock* const clock_;
  absl::Mutex init_mu_;
  std::atomic<bool> initialized_{false};
  std::atomic<bool> ready_{false};
  // Changed only with every tensor locked (Restore), so a push or pull that
  // checks it under its tensors' locks sees values of that generation.
  std::atomic<int64_t> generation_{0};
  // Written once under init_mu_ before initialized_ is set (release);
  // read-only afterwards.
  JobConfig job_;
  int aggregate_ = 1;
  std::vector<std::unique_ptr<StoredTensor>> tensors_;
  std::map<std::string, StoredTensor*, std::less<>> by_key_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<UpdateRules> rules_;
  WaitList wait_list_;
  PushHold push_hold_;
  std::atomic<int64_t> restored_step_{0};
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_STORE_SHARD_STORE_H_
