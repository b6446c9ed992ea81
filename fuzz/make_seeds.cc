// Writes the seed inputs of the checkpoint and PS-request fuzz targets with
// the project's own writers: `bazel run //fuzz:make_seeds -- DIR`.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_shard.h"
#include "base/file_util.h"
#include "transport/wire_frame.h"
#include "fuzz/small_store.h"
#include "store/shard_store.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::unique_ptr<pstrain::ps::ShardStore> owned = pstrain::fuzz::SmallStore("adam");
  pstrain::ps::ShardStore& store = *owned;
  // Touch two table rows so the shard holds some.
  pstrain::ps::ShardStore::PullBatch touch;
  const std::vector<int64_t> ids = {3, 7};
  touch.tensors.push_back({"emb", ids});
  std::vector<char> rows(16);
  std::vector<pstrain::ps::ShardStore::Pulled> pulled;
  std::string why;
  if (!store.TryPull(touch, rows.data(), &pulled, &why).ok()) return 1;
  auto snap = store.Snapshot(5);
  if (!snap.ok() || !pstrain::MakeDirs(dir + "/checkpoint").ok() ||
      !pstrain::MakeDirs(dir + "/ps_request").ok() ||
      !pstrain::ckpt::WriteShard(dir + "/checkpoint/shard", *snap).ok()) {
    return 1;
  }
  // A push-then-pull of w and of two table rows, the ids in the header
  // (any protobuf client) or in the payload (as pstrain's workers send them).
  for (const bool payload_ids : {false, true}) {
    pstrain::v1::FrameHeader h;
    h.set_request_id(1);
    h.set_replica(1);
    std::vector<int64_t> ids;
    for (auto* refs : {h.mutable_push(), h.mutable_pull()}) {
      pstrain::v1::TensorRef* r = refs->Add();
      r->set_key("w/part_0");
      r->set_bytes(32);
      r = refs->Add();
      r->set_key("emb");
      if (payload_ids) {
        r->set_id_count(2);
        ids.insert(ids.end(), {3, 7});
      } else {
        r->add_ids(3);
        r->add_ids(7);
      }
      r->set_bytes(16);
    }
    const std::vector<float> grads(12, 0.5f);
    std::vector<grpc::Slice> payload;
    if (!ids.empty()) payload.emplace_back(ids.data(), ids.size() * sizeof(int64_t));
    payload.emplace_back(grads.data(), grads.size() * sizeof(float));
    grpc::ByteBuffer frame = pstrain::EncodeFrame(h, std::move(payload));
    std::vector<grpc::Slice> slices;
    if (!frame.Dump(&slices).ok()) return 1;
    std::string bytes;
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    const std::string name = payload_ids ? "push_pull_payload_ids" : "push_pull";
    if (!pstrain::WriteFileAtomically(dir + "/ps_request/" + name, bytes).ok()) return 1;
  }
  std::printf("seeds written under %s\n", dir.c_str());
  return 0;
}
