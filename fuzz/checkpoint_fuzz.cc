// Checkpoint shard files: read, verified, and restored into a store of a
// small model (or refused with nothing changed).
#include <cstdint>
#include <string>

#include "fuzz/small_store.h"
#include "fuzz/temp_file.h"
#include "checkpoint/checkpoint_shard.h"
#include "store/shard_store.h"

namespace {

pstrain::ps::ShardStore* Store() {
  static pstrain::ps::ShardStore* store = pstrain::fuzz::SmallStore("adam").release();
  return store;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto shard = pstrain::ckpt::ReadShard(pstrain::fuzz::WriteTemp(data, size));
  if (shard.ok()) (void)Store()->Restore(*shard);
  return 0;
}
