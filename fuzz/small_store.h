// The PS store the fuzz targets (and their seed writer) work on: one dense
// slice "w/part_0" of 4 x 2 floats and an embedding table "emb" of 100 rows
// of 2, with `optimizer`, async, 2 replicas.
#ifndef PSTRAIN_FUZZ_SMALL_STORE_H_
#define PSTRAIN_FUZZ_SMALL_STORE_H_

#include <memory>
#include <string>

#include "store/shard_store.h"

namespace pstrain::fuzz {

inline std::unique_ptr<ps::ShardStore> SmallStore(const std::string& optimizer) {
  auto store = std::make_unique<ps::ShardStore>(0, 1);
  ps::ShardStore::JobConfig job;
  job.optimizer = {optimizer, 0.01f};
  job.consistency = *ParseConsistency("async");
  job.num_replicas = 2;
  SliceDef w;
  w.variable = "w";
  w.row_end = 4;
  w.row_elements = 2;
  ps::ShardStore::DenseInit d;
  d.def = w;
  d.initializer = "zeros";
  ps::ShardStore::EmbeddingInit e{"emb", 100, 2, "", "uniform:0.1"};
  if (!store->Initialize(job, {d}, {e}).ok()) __builtin_trap();
  return store;
}

}  // namespace pstrain::fuzz

#endif  // PSTRAIN_FUZZ_SMALL_STORE_H_
