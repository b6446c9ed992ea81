// One tensor a PS holds (a dense slice or an embedding table) and the rules
// of its storage: where values and optimizer slots lie, how a table's rows
// are created and read, and how an answer may be sent straight from the
// values (HeldBytes) while later writes move on to a copy. Update rules,
// sync rounds and checkpoint records are elsewhere (update_rules.h,
// round_gate.h, store_checkpoint.h); ShardStore ties them together.
#ifndef PSTRAIN_STORE_STORED_TENSOR_H_
#define PSTRAIN_STORE_STORED_TENSOR_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "cluster/consistency.h"
#include "cluster/placement.h"
#include "cluster/staleness.h"
#include "optim/initializer.h"
#include "optim/optimizer.h"

namespace pstrain::ps {

// Bytes an answer is sent from where they are stored. They stay unchanged
// while `hold`, or a copy of it, lives: the tensor's next write goes to a
// new buffer instead (BeforeWriteLocked), and the old one is freed with the
// last hold.
struct HeldBytes {
  const char* data = nullptr;
  int64_t size = 0;
  std::shared_ptr<const void> hold;
};

struct StoredTensor {
  // Set at creation, read-only afterwards.
  int index = 0;  // lock order among a store's tensors
  std::string key;
  std::string variable;
  bool embedding = false;
  Consistency consistency;
  SliceDef def;             // dense
  int64_t vocabulary = 0;   // tables
  int64_t dim = 0;          // tables: floats per row
  optim::Initializer init;  // tables: a row's values before its first update
  uint64_t seed = 1;        // the job's, for `init`
  int slots = 0;            // optimizer slots per value (0 unless trainable)
  // Dense: trainable (the optimizer's), moved by increments (added as
  // pushed) or frozen (pushes refused). Tables are trainable.
  VariableUpdate update = VariableUpdate::kOptimizer;
  int64_t bytes = 0;        // dense: the slice's bytes

  // Shared with answers sent from `data` itself (HoldValuesLocked).
  struct Pin;

  mutable absl::Mutex mu;
  // Dense: values at [0, n), slot k at [(k+1) n, (k+2) n). Tables: rows of
  // (values, slots), stride dim * (1 + slots), found through row_of.
  std::vector<float> data ABSL_GUARDED_BY(mu);
  // Set while answers may be sent from `data`; writers call
  // BeforeWriteLocked first.
  std::shared_ptr<Pin> pin ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<int64_t, int64_t> row_of ABSL_GUARDED_BY(mu);
  std::vector<int64_t> row_updates ABSL_GUARDED_BY(mu);  // lazy Adam's t
  int64_t updates ABSL_GUARDED_BY(mu) = 0;
  // sync: the sum so far for version `updates`, and who contributed.
  std::vector<float> accum ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<int64_t, std::vector<float>> sparse_accum ABSL_GUARDED_BY(mu);
  std::vector<char> contributed ABSL_GUARDED_BY(mu);
  int contributors ABSL_GUARDED_BY(mu) = 0;
  // sync: the newest version each replica pushed (-1: none).
  std::vector<int64_t> last_pushed ABSL_GUARDED_BY(mu);
  // ssp: pushes per replica.
  std::vector<int64_t> clocks ABSL_GUARDED_BY(mu);
  // Every mode: the pushes applied from each replica since the variables
  // were created, restored with a checkpoint (where a replica that starts
  // again is in its own schedule); empty when unknown (restored from a
  // checkpoint without them).
  int num_replicas ABSL_GUARDED_BY(mu) = 0;
  std::vector<int64_t> replica_pushes ABSL_GUARDED_BY(mu);

  // Mirrors for lock-free reads (stats, global step).
  std::atomic<int64_t> version{0};
  std::atomic<int64_t> min_clock{0};
  std::atomic<int64_t> rows{0};
  std::atomic<int64_t> pushes{0};
  std::atomic<int64_t> pulls{0};
  std::atomic<int64_t> dropped_stale{0};
  std::atomic<int64_t> repeated{0};  // ShardStore::PushBatch::push_number
  std::array<std::atomic<int64_t>, kStalenessBuckets> staleness{};
};

// t's values (its `bytes` from data), held from being written in place
// until the result's hold is dropped. REQUIRES: t is dense.
HeldBytes HoldValuesLocked(StoredTensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);
// The first `size` bytes of t.data (values and slots: at most
// t.data.size() * 4), held the same way. REQUIRES: t is dense.
HeldBytes HoldDataLocked(StoredTensor& t, int64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);
// Call before writing t.data: when an answer is still being sent from it,
// the answer keeps that buffer and the tensor goes on in a copy.
void BeforeWriteLocked(StoredTensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

// Bytes a push or pull of t moves: dense, its bytes (InvalidArgument when
// ids are named); a table, dim floats per id (InvalidArgument naming an id
// out of range or owned by another PS than ps:`ps_index` of `num_ps`).
absl::StatusOr<int64_t> TransferBytes(const StoredTensor& t, absl::Span<const int64_t> ids,
                                      int ps_index, int num_ps);

// Table row `id`'s values and slots, created from the initializer (and
// `opt`'s initial slots) on first touch; its place in t's rows (row_of) in
// `*index` when that is not null.
float* RowLocked(StoredTensor& t, int64_t id, const optim::Optimizer& opt, int64_t* index = nullptr)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);
// Copies row `id`'s values to `out`: the stored row, or, for a row not
// created yet, its initial values (creating nothing).
void ReadRowLocked(const StoredTensor& t, int64_t id, char* out) ABSL_SHARED_LOCKS_REQUIRED(t.mu);
// ResourceExhausted when creating the rows `ids` names (and, for sync, those
// waiting in the step's sum) would take table t past `max_rows` rows.
absl::Status CheckRowLimitLocked(const StoredTensor& t, absl::Span<const int64_t> ids,
                                 int64_t max_rows, int ps_index) ABSL_SHARED_LOCKS_REQUIRED(t.mu);

}  // namespace pstrain::ps

#endif  // PSTRAIN_STORE_STORED_TENSOR_H_
