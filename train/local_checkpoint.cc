#include "train/local_checkpoint.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/commit.h"
#include "checkpoint/reshard.h"
#include "cluster/checkpoint_layout.h"
#include "base/status_macros.h"
#include "optim/optimizer.h"

namespace pstrain::train {
namespace {

// The optimizer slots each value of `store` keeps.
absl::StatusOr<int> NumSlots(const ps::ShardStore& store) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> opt,
                           optim::CreateOptimizer(store.job().optimizer));
  return opt->num_slots();
}

// FailedPrecondition naming what of `shard` (checkpoint `where`) differs
// from what `store` holds: the optimizer, a tensor missing or of another
// size.
absl::Status CheckFits(const ckpt::ShardContents& shard, const ps::ShardStore& store,
                       const std::string& where) {
  PSTRAIN_ASSIGN_OR_RETURN(const int slots, NumSlots(store));
  const std::string& optimizer = store.job().optimizer.name;
  if (shard.header.num_slots() != slots || shard.header.optimizer() != optimizer) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " was written with ", shard.header.optimizer(), " (", shard.header.num_slots(),
        " optimizer slots); this run uses ", optimizer, " (", slots, ")"));
  }
  std::map<std::string, const v1::TensorCheckpoint*> by_key;
  for (const v1::TensorCheckpoint& t : shard.tensors) by_key[t.key()] = &t;
  for (const ckpt::TargetTensor& t : store.Layout()) {
    auto it = by_key.find(t.key);
    if (t.embedding) {
      if (it == by_key.end() || !it->second->embedding()) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, " holds no embedding table ", t.key));
      }
      if (absl::Status s = ckpt::CheckTableRecord(*it->second, slots, t.dim); !s.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(where, ": ", s.message()));
      }
      continue;
    }
    if (it == by_key.end() || it->second->embedding()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " holds no dense ", t.key, " of this model"));
    }
    const int64_t elements = (t.row_end - t.row_begin) * t.row_elements;
    const int own = t.trainable() ? slots : 0;  // non-trainable: values alone
    if (static_cast<int64_t>(it->second->data().size()) != elements * 4 * (1 + own)) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": ", t.key, " holds ", it->second->data().size(),
                       " bytes, this model's ", elements, " values and their ", own,
                       " optimizer slots take ", elements * 4 * (1 + own)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveLocalCheckpoint(const std::string& dir, int64_t step, const ps::ShardStore& store,
                                 int keep, bool final) {
  PSTRAIN_ASSIGN_OR_RETURN(ckpt::ShardContents shard, store.Snapshot(step));
  const std::string path = ShardPath(dir, step, 0, 1);
  auto written = ckpt::WriteShard(path, std::move(shard));
  absl::Status s = written.status();
  if (s.ok()) {
    s = ckpt::CommitCheckpoint(dir, step, {{path, written->bytes, written->crc}}, keep, final,
                               /*spare_unscored=*/false);
  }
  if (!s.ok()) ckpt::DiscardCheckpoint(dir, step);
  return s;
}

absl::StatusOr<int64_t> RestoreLocalCheckpoint(const std::string& dir, ps::ShardStore* store) {
  const std::vector<CompleteCheckpoint> complete = CompleteCheckpoints(dir, nullptr);
  if (complete.empty()) return 0;
  const CompleteCheckpoint& newest = complete[0];
  PSTRAIN_ASSIGN_OR_RETURN(
      ckpt::ShardContents shard,
      ckpt::ReadCheckpointFor(dir, newest.step, newest.num_ps, 0, 1, store->Layout()));
  const std::string where = CheckpointDir(dir, newest.step);
  PSTRAIN_RETURN_IF_ERROR(CheckFits(shard, *store, where));
  if (absl::Status s = store->Restore(shard); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
  }
  return newest.step;
}

}  // namespace pstrain::train
