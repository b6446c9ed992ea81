// What a PS does with a request frame from the network: parse it, check
// every tensor reference, apply the push, size and serve the pull.
#include <cstdint>
#include <string>
#include <vector>

#include "transport/wire_frame.h"
#include "fuzz/small_store.h"
#include "ps_server/exchange_session.h"
#include "store/shard_store.h"

namespace {

pstrain::ps::ShardStore* Store() {
  static pstrain::ps::ShardStore* store = pstrain::fuzz::SmallStore("sgd").release();
  return store;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  grpc::Slice slice(data, size);
  grpc::ByteBuffer buffer(&slice, 1);
  pstrain::DecodedFrame frame;
  if (!frame.Parse(buffer).ok()) return 0;
  const pstrain::v1::FrameHeader& h = frame.header();
  pstrain::ps::ShardStore* store = Store();
  std::vector<int64_t> ids;
  std::vector<pstrain::ps::ShardStore::TensorRef> pushed;
  pstrain::ps::ShardStore::PullBatch pull;
  if (!pstrain::ps::FrameRefs(&frame, &ids, &pushed, &pull.tensors).ok()) return 0;
  if (h.push_size() > 0) {
    pstrain::ps::ShardStore::PushBatch push;
    push.replica = h.replica();
    push.consistency = h.consistency();
    push.stop_step = h.stop_step();
    push.tensors = std::move(pushed);
    (void)store->Push(push, frame.payload());
  }
  pull.replica = h.replica();
  auto bytes = store->PullSize(pull);
  if (bytes.ok() && *bytes <= (int64_t{1} << 20)) {
    std::vector<char> out(*bytes);
    std::vector<pstrain::ps::ShardStore::Pulled> pulled;
    std::string why;
    (void)store->TryPull(pull, out.data(), &pulled, &why);
  }
  return 0;
}
