#include "checkpoint/reshard.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "cluster/placement.h"

namespace pstrain::ckpt {

Resharder::Resharder(std::vector<TargetTensor> targets, int ps_index, int num_ps)
    : ps_index_(ps_index), num_ps_(num_ps) {
  for (TargetTensor& t : targets) {
    Target target;
    target.out.set_key(t.key);
    target.out.set_embedding(t.embedding);
    if (t.embedding) {
      target.out.set_dim(t.dim);
    } else {
      target.out.set_variable(t.variable);
      target.out.set_row_begin(t.row_begin);
      target.out.set_row_end(t.row_end);
      target.out.set_row_elements(t.row_elements);
      target.out.set_elements((t.row_end - t.row_begin) * t.row_elements);
    }
    target.def = std::move(t);
    targets_.push_back(std::move(target));
  }
}

absl::Status Resharder::Add(const ShardContents& old) {
  const v1::ShardHeader& h = old.header;
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("checkpoint shard ", h.ps_index(), " of ", h.num_ps(),
                                            " at step ", h.step(), ": ", what));
  };
  if (!started_) {
    if (h.num_ps() < 1) return bad("its header names no PS count");
    started_ = true;
    first_ = h;
    seen_.assign(h.num_ps(), false);
    for (Target& t : targets_) {
      if (!t.def.embedding) {
        const int planes = t.def.trainable() ? 1 + h.num_slots() : 1;
        t.data.assign(static_cast<size_t>(t.out.elements()) * planes * sizeof(float), '\0');
      }
    }
  }
  if (h.step() != first_.step() || h.num_ps() != first_.num_ps() ||
      h.num_slots() != first_.num_slots() || h.optimizer() != first_.optimizer()) {
    return bad(absl::StrCat("it disagrees with shard ", first_.ps_index(),
                            " on the step, PS count or optimizer"));
  }
  if (h.ps_index() < 0 || h.ps_index() >= h.num_ps() || seen_[h.ps_index()]) {
    return bad("it was given twice or its index is out of range");
  }
  seen_[h.ps_index()] = true;
  const int64_t planes = 1 + h.num_slots();
  std::map<std::string, std::vector<const v1::TensorCheckpoint*>, std::less<>> dense_of;
  std::map<std::string, const v1::TensorCheckpoint*, std::less<>> table_of;
  for (const v1::TensorCheckpoint& c : old.tensors) {
    if (c.embedding()) {
      table_of[c.key()] = &c;
      continue;
    }
    const int64_t stored = c.update().empty() ? planes : 1;  // non-trainable: values alone
    if (c.variable().empty() || c.row_elements() <= 0 || c.row_end() <= c.row_begin() ||
        c.data().size() != static_cast<size_t>((c.row_end() - c.row_begin()) * c.row_elements() *
                                               stored * sizeof(float))) {
      return bad(absl::StrCat(c.key(),
                              " lacks its row layout or its size disagrees with it, "
                              "so it cannot be re-sliced"));
    }
    dense_of[c.variable()].push_back(&c);
  }
  for (Target& t : targets_) {
    if (t.def.embedding) {
      auto it = table_of.find(t.def.key);
      if (it == table_of.end()) continue;
      const v1::TensorCheckpoint& c = *it->second;
      if (absl::Status s = CheckTableRecord(c, planes - 1, t.def.dim); !s.ok()) {
        return bad(s.message());
      }
      const int64_t stride = c.dim() * planes;
      t.out.set_updates(std::max(t.out.updates(), c.updates()));
      std::string* data = t.out.mutable_data();
      for (int r = 0; r < c.row_ids_size(); ++r) {
        if (EmbeddingOwner(c.row_ids(r), num_ps_) != ps_index_) continue;
        t.out.add_row_ids(c.row_ids(r));
        t.out.add_row_updates(c.row_updates(r));
        data->append(c.data().data() + r * stride * sizeof(float), stride * sizeof(float));
      }
      continue;
    }
    auto it = dense_of.find(t.def.variable);
    if (it == dense_of.end()) continue;
    const int64_t re = t.def.row_elements;
    const int64_t elements = t.out.elements();
    for (const v1::TensorCheckpoint* c : it->second) {
      const int64_t lo = std::max(t.def.row_begin, c->row_begin());
      const int64_t hi = std::min(t.def.row_end, c->row_end());
      if (lo >= hi) continue;
      if (c->row_elements() != re) {
        return bad(absl::StrCat(c->key(), " has rows of ", c->row_elements(),
                                " floats, this job's ", t.def.variable, " rows of ", re));
      }
      const bool old_trainable = c->update().empty();
      if (t.def.trainable() && !old_trainable && planes > 1) {
        return bad(absl::StrCat(c->key(), " is non-trainable there (", c->update(),
                                ", stored without optimizer slots) but this job trains ",
                                t.def.variable));
      }
      const int64_t old_elements = (c->row_end() - c->row_begin()) * re;
      // A variable trainable there but not here leaves its slots behind.
      const int64_t copied = t.def.trainable() ? planes : 1;
      for (int64_t p = 0; p < copied; ++p) {
        std::memcpy(
            t.data.data() + (p * elements + (lo - t.def.row_begin) * re) * sizeof(float),
            c->data().data() + (p * old_elements + (lo - c->row_begin()) * re) * sizeof(float),
            (hi - lo) * re * sizeof(float));
      }
      t.rows_covered += hi - lo;
      t.out.set_updates(std::max(t.out.updates(), c->updates()));
      // Each replica's pushes: the fewest any old slice of it took (slices
      // of one variable differ only by pushes in flight at the cut).
      if (t.out.replica_pushes_size() == 0) {
        *t.out.mutable_replica_pushes() = c->replica_pushes();
      } else if (t.out.replica_pushes_size() == c->replica_pushes_size()) {
        for (int r = 0; r < c->replica_pushes_size(); ++r) {
          t.out.set_replica_pushes(r, std::min(t.out.replica_pushes(r), c->replica_pushes(r)));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardContents> Resharder::Finish() {
  if (!started_) return absl::DataLossError("no checkpoint shard was read");
  for (size_t i = 0; i < seen_.size(); ++i) {
    if (!seen_[i]) {
      return absl::DataLossError(absl::StrCat("checkpoint at step ", first_.step(), ": shard ", i,
                                              " of ", seen_.size(), " was not read"));
    }
  }
  ShardContents shard;
  shard.header = first_;
  shard.header.set_ps_index(ps_index_);
  shard.header.set_num_ps(num_ps_);
  shard.header.set_num_tensors(static_cast<int>(targets_.size()));
  for (Target& t : targets_) {
    if (!t.def.embedding) {
      const int64_t rows = t.def.row_end - t.def.row_begin;
      if (t.rows_covered != rows) {
        return absl::DataLossError(
            absl::StrCat("checkpoint at step ", first_.step(), ": ", t.def.key, " needs rows ",
                         t.def.row_begin, "..", t.def.row_end, " of ", t.def.variable,
                         " but its shards hold ", t.rows_covered, " of them"));
      }
      t.out.set_data(std::move(t.data));
      if (!t.def.trainable()) t.out.set_update(t.def.update);
    }
    shard.tensors.push_back(std::move(t.out));
  }
  targets_.clear();
  return shard;
}

absl::StatusOr<ShardContents> ReadCheckpointFor(const std::string& dir, int64_t step,
                                                int written_by, int ps_index, int num_ps,
                                                std::vector<TargetTensor> targets, Env* env) {
  if (written_by < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint at step ", step, ": written by ", written_by, " PS"));
  }
  if (written_by == num_ps) return ReadShard(ShardPath(dir, step, ps_index, num_ps), env);
  Resharder resharder(std::move(targets), ps_index, num_ps);
  for (int i = 0; i < written_by; ++i) {
    auto old = ReadShard(ShardPath(dir, step, i, written_by), env);
    if (!old.ok()) return old.status();
    if (absl::Status s = resharder.Add(*old); !s.ok()) return s;
  }
  return resharder.Finish();
}

}  // namespace pstrain::ckpt
