// An embedding table held in one process, with the PS's row semantics
// (store/shard_store.h): a row is created on first touch from the
// table's initializer and the job's seed (optim/initializer.h), so a
// row never pushed reads the same as on any PS; each row keeps its own
// optimizer slots and update count (lazy Adam and Adagrad). `pstrain train
// --local` trains a model's embedding tables in them, and the evaluator
// loads a checkpoint's rows into them (no optimizer: read only).
// Thread-compatible.
#ifndef PSTRAIN_TRAIN_LOCAL_TABLE_H_
#define PSTRAIN_TRAIN_LOCAL_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cluster/optimizer_spec.h"
#include "cluster/placement.h"
#include "optim/initializer.h"
#include "optim/optimizer.h"

namespace pstrain::train {

class LocalTable {
 public:
  // `table` is an embedding VariableDef ([vocabulary, dim]); `optimizer`
  // null for a read-only table. InvalidArgument for a variable that is not
  // a table, an initializer or optimizer that does not parse.
  static absl::StatusOr<std::unique_ptr<LocalTable>> Create(const VariableDef& table, uint64_t seed,
                                                            const OptimizerSpec* optimizer);

  const std::string& name() const { return name_; }
  int64_t dim() const { return dim_; }
  int64_t vocabulary() const { return vocabulary_; }
  // Rows created so far.
  int64_t rows() const { return static_cast<int64_t>(row_of_.size()); }

  // Rows `ids` into `out` (ids.size() x dim): stored values, or the
  // initializer's for rows never written. InvalidArgument naming the first
  // id outside [0, vocabulary), with `out` then unspecified.
  absl::Status Read(absl::Span<const int64_t> ids, float* out) const;

  // Applies one gradient row per id (ids distinct) with the optimizer, each
  // row counting its own updates. With the optimizer's dense table updates
  // (OptimizerSpec::dense_table_updates), every row the table holds takes
  // the step, with the table's step count (one per Apply), as Keras's
  // optimizer takes an Embedding's: the rows not in `ids` as
  // Optimizer::ApplyToRowNotInBatch says (Adam moves them on a zero
  // gradient, Nadam decays their slots). Rows never created stay at their
  // initial values either way: zero slots move nothing. InvalidArgument (nothing
  // applied) for an id out of range, or FailedPrecondition on a read-only
  // table.
  absl::Status Apply(absl::Span<const int64_t> ids, const float* grads);

  // Sets row `id`'s values (a checkpoint's), creating it if needed.
  // InvalidArgument for an id out of range.
  absl::Status Set(int64_t id, const float* values);

  // Optimizer slots each row keeps (0 for a read-only table).
  int num_slots() const;
  // Floats a row is stored as, and checkpointed as (a PS's table record,
  // checkpoint/checkpoint_shard.h): its dim values, then each slot's dim.
  int64_t stride() const { return stride_; }

  // The rows created so far, in the order they were made: their ids, their
  // stored floats (stride() each) and their update counts. Valid until the
  // table next changes.
  struct StoredRows {
    std::vector<int64_t> ids;
    absl::Span<const float> data;
    absl::Span<const int64_t> updates;
  };
  StoredRows Stored() const;

  // Replaces every row with `ids`' (a checkpoint's): stride() floats each in
  // `data`, one update count each in `updates`. InvalidArgument (the table
  // unchanged) for sizes that disagree, an id out of range or repeated.
  absl::Status Restore(absl::Span<const int64_t> ids, absl::Span<const float> data,
                       absl::Span<const int64_t> updates);

 private:
  LocalTable(const VariableDef& table, uint64_t seed, optim::Initializer init,
             std::unique_ptr<optim::Optimizer> optimizer, bool dense);
  absl::Status CheckIds(absl::Span<const int64_t> ids) const;
  float* Row(int64_t id);

  const std::string name_;
  const int64_t vocabulary_;
  const int64_t dim_;
  const uint64_t seed_;
  const optim::Initializer init_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  const bool dense_;      // every row moves at every step
  const int64_t stride_;  // dim * (1 + slots): values then each slot
  absl::flat_hash_map<int64_t, int64_t> row_of_;
  std::vector<float> data_;
  std::vector<int64_t> updates_;
};

// Every embedding table of a model, in the order of its variables.
class LocalTables {
 public:
  // A LocalTable for each embedding variable of `variables` (none: an
  // empty set); LocalTable::Create's errors.
  static absl::StatusOr<LocalTables> Create(const std::vector<VariableDef>& variables,
                                            uint64_t seed, const OptimizerSpec* optimizer);

  int size() const { return static_cast<int>(tables_.size()); }
  LocalTable& operator[](int i) { return *tables_[i]; }
  // The table named `name`, or null.
  LocalTable* Find(const std::string& name) const;
  // LocalTable::Read on table `name`; InvalidArgument for a table this set
  // does not hold.
  absl::Status Read(const std::string& name, absl::Span<const int64_t> ids, float* out) const;

 private:
  std::vector<std::unique_ptr<LocalTable>> tables_;
};

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_LOCAL_TABLE_H_
