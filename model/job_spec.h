// What a training job is: the model, the data, the optimizer and the
// schedule. Every task of a job must be given the same JobSpec (pstrain
// launch passes the same flags to each); the chief and workers derive the
// placement and the parameter layout from it.
#ifndef PSTRAIN_MODEL_JOB_SPEC_H_
#define PSTRAIN_MODEL_JOB_SPEC_H_

#include <cstdint>
#include <map>
#include <string>

#include "cluster/consistency.h"
#include "cluster/optimizer_spec.h"
#include "data/input.h"
#include "model/device.h"
#include "model/network.h"

namespace pstrain::model {

// What --bytes_per_pack=auto packs to when the ring has a TCP link.
inline constexpr int64_t kAutoPackBytes = 256 << 10;

struct JobSpec {
  // One hidden layer of 128: fast, about 0.86 test accuracy.
  NetworkSpec model = NetworkSpec::FromWidths(784, {128}, 10);
  // Debian's dataset-fashion-mnist package installs the files here.
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // What files of it are read and how (data/input.h): by default its IDX
  // files.
  data::InputSpec input;
  int batch_size = 32;  // per replica, as in TensorFlow's guides
  int epochs = 2;       // over each replica's shard
  // 0 means "epochs decide"; otherwise stop each replica after this many.
  int64_t max_steps = 0;
  // SGD at 0.05 with batch 32: on this MLP it converges in about one epoch
  // without diverging under async updates from a few workers.
  OptimizerSpec optimizer{"sgd", 0.05f};
  uint64_t seed = 1;  // initial values and shuffling
  // Async, sync or ssp:S (cluster/consistency.h), parsed from the flags.
  Consistency consistency;
  // sync: gradients averaged per step; 0 means every worker.
  int replicas_to_aggregate = 0;
  // Where workers compute (model/device.h, model/backend.h).
  Device device;
  // --num_gpus as a platform passed it (UAI Train, AI Platform); -1 when not
  // given. 0 sets `device` to the CPU; N >= 1 leaves auto (a replica trains
  // on one device).
  int num_gpus = -1;
  // Workers push each layer's gradient (and pull its new values) as soon as
  // backprop produces it, instead of the whole model after the step. Off by
  // default: on a 2-core machine, where the round trips cost more CPU than
  // the compute they would overlap, three smaller rounds per step measured
  // 10-20% slower than one (docs/benchmarks/history.md); it pays where
  // compute dominates.
  bool push_per_layer = false;
  // A job without PS: the replicas' gradients go around the ring in packs
  // of at least this many bytes (--bytes_per_pack, as TensorFlow's
  // CommunicationOptions name it), each as soon as backprop has produced
  // it, so the last layers' all-reduce runs while the earlier layers are
  // still being differentiated (client/collective_store.h); 0: the whole
  // model in one all-reduce after the step; -1 (auto): kAutoPackBytes when
  // a link of the ring is TCP (between hosts, where the overlap pays), 0
  // when every link is shared memory (where the all-reduce is memory copies
  // on the cores that compute). docs/benchmarks/history.md has both.
  int64_t bytes_per_pack = -1;
  // Replicas offer each PS shared memory for the tensor bytes of their
  // frames (client/ps_stream.h): a PS on the same host maps it and the bytes
  // skip the loopback socket; one on another host declines, and they travel
  // in the frames.
  bool shared_memory = true;
  // Exchange frames over the PS's TCP frame port when it offers one (not
  // with TLS), else in the gRPC stream (client/ps_stream.h).
  bool tcp_frames = true;
  // Gradients and pulled values cross the wire as bfloat16 (--wire_dtype):
  // half the bytes; the PS keeps and updates float32 (base/bfloat16.h).
  bool bfloat16_wire = false;
  // The chief checkpoints every this many seconds and/or global steps (0:
  // not on that account), and once more when the job ends; it keeps the
  // newest keep_checkpoints.
  int checkpoint_every_secs = 60;
  int64_t checkpoint_every_steps = 0;
  int keep_checkpoints = 5;
  // The chief trains as replica 0 besides its duties (TensorFlow's
  // convention: the chief is a worker too), so a cluster of a chief and N
  // workers has N + 1 replicas. False leaves it coordinating only.
  bool chief_trains = true;
  // How long a replica waits for the others at a sync step (or the ssp
  // bound) before failing with the missing replicas named.
  int sync_wait_secs = 120;
  // Straggler injection (experiments): per task ("worker:1", "chief:0", or
  // "all" for every training task unless it is named itself), how long it
  // sleeps before a training step, on each step with `probability`.
  struct Straggler {
    int ms = 0;
    double probability = 1;
  };
  std::map<std::string, Straggler> stragglers;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_JOB_SPEC_H_
