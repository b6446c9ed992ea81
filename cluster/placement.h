// Placement of variables on parameter servers: a pure function of the
// variables and the PS count, so every process computes the same plan without
// talking to anyone.
//
// Rules (in the spirit of TensorFlow's min-max variable partitioner plus
// greedy load balancing):
//   1. A variable of at least 2 * min_slice_bytes is split by rows into
//      k = min(num_ps, rows, bytes / min_slice_bytes) slices whose row counts
//      differ by at most one; its slices go to k distinct PS, the least
//      loaded first. Large variables are placed before small ones.
//   2. Every other variable is one slice on the least-loaded PS by bytes
//      (ties go to the lowest index), largest first.
//   3. Embedding tables are not sliced by range: row `id` lives on PS
//      EmbeddingOwner(id, num_ps). They count towards each PS's load as
//      their rows would if every id were touched (placed before rule 1, so
//      dense variables balance around them).
// Ties in size are broken by name, so the input order does not matter.
// Thread-compatible plain data.
#ifndef PSTRAIN_CLUSTER_PLACEMENT_H_
#define PSTRAIN_CLUSTER_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cluster/consistency.h"

namespace pstrain {

// What changes a variable, Keras's trainable flag and what moves a
// non-trainable one:
enum class VariableUpdate {
  // Trainable: its gradients, through the job's optimizer, which keeps its
  // slots beside it.
  kOptimizer,
  // Non-trainable, moved by the increments replicas push in place of a
  // gradient (batch normalization's moving mean and variance: Keras's
  // `moving = moving * momentum + batch_stat * (1 - momentum)` sent as
  // `(1 - momentum) * (batch_stat - moving)`), added as they are, once
  // each (a sync round adds their mean): TensorFlow's assign_sub on the PS.
  // No optimizer slots, no learning rate.
  kIncrement,
  // Non-trainable and never pushed (a layer with `trainable: false`, as in
  // transfer learning): no slots; a push to it is refused.
  kFrozen,
};

// "optimizer", "increment" or "frozen".
const char* VariableUpdateName(VariableUpdate update);
// The inverse, "" meaning "optimizer"; InvalidArgument quoting anything else.
absl::StatusOr<VariableUpdate> ParseVariableUpdate(absl::string_view name);

// A dense float32 variable. shape[0] is the row dimension; a rank-1 variable
// has rows of one element.
struct VariableDef {
  std::string name;
  std::vector<int64_t> shape;
  // A sparse embedding table: shape is {vocabulary, dim}; rows are created on
  // first touch and spread by id hash.
  bool embedding = false;
  // Overrides the job's consistency mode for this variable; none: the job's.
  std::optional<Consistency> consistency;
  // What the PS fills the variable with when it is not sent values
  // ("zeros", "uniform:A"); empty: the sender provides values (dense) or
  // "uniform:0.05" (tables).
  std::string initializer;
  VariableUpdate update = VariableUpdate::kOptimizer;

  // Keras's trainable: whether the optimizer moves it.
  bool trainable() const { return update == VariableUpdate::kOptimizer; }
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  // Elements per row (product of shape[1:]).
  int64_t row_elements() const;
  int64_t elements() const { return rows() * row_elements(); }
  int64_t bytes() const { return elements() * 4; }
};

struct SliceDef {
  std::string variable;   // VariableDef::name
  int slice_index = 0;
  int num_slices = 1;
  int64_t row_begin = 0;  // inclusive
  int64_t row_end = 0;    // exclusive
  int64_t row_elements = 0;
  int ps = 0;             // the PS that holds this slice

  int64_t elements() const { return (row_end - row_begin) * row_elements; }
  int64_t bytes() const { return elements() * 4; }
  // "<variable>/part_<slice_index>": how pulls and pushes address the slice.
  std::string key() const;
  // Offset of this slice's first element within the whole variable.
  int64_t element_offset() const { return row_begin * row_elements; }
};

struct PlacementOptions {
  // 256 KiB: below this, splitting costs more in per-RPC overhead than it
  // gains in balance.
  int64_t min_slice_bytes = 256 * 1024;
};

struct Placement {
  int num_ps = 0;
  std::vector<VariableDef> variables;  // as given
  // Every dense slice, ordered by variable (as given) then slice_index.
  std::vector<SliceDef> slices;
  // The embedding tables, as given; every PS holds part of each.
  std::vector<VariableDef> embeddings;
  std::vector<int64_t> bytes_per_ps;

  // Slices held by PS `ps`, in `slices` order.
  std::vector<SliceDef> SlicesOn(int ps) const;
  // Slices of one variable, in slice_index order.
  std::vector<SliceDef> SlicesOf(const std::string& variable) const;
};

// The PS that holds row `id` of every embedding table: hash(id) mod num_ps,
// with a mixing hash so consecutive ids spread evenly.
int EmbeddingOwner(int64_t id, int num_ps);

// InvalidArgument when num_ps < 1, a name is empty or repeated, a dimension is
// not positive, an embedding table is not of rank 2, or min_slice_bytes < 4.
absl::StatusOr<Placement> ComputePlacement(
    const std::vector<VariableDef>& variables, int num_ps,
    const PlacementOptions& options = PlacementOptions());

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_PLACEMENT_H_
