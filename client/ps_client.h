// The data path of the PS service, as a training replica (or an observer
// reading values, such as the chief scoring the final model) uses it:
// pulls and pushes of dense slices and table rows, and the waits a replica
// makes for the PS. The control plane (create, hold, save, restore, stop)
// is client/ps_admin.h's. Owns one channel per PS and `lanes` Exchange
// streams (ps_stream.h) per PS.
//
// Pulls and pushes of dense slices go straight between the caller's flat
// parameter/gradient arrays and the wire: gradients are sent from `grads`
// without a copy, pulled values are copied once, from gRPC's buffers into
// `params`. Calls that span several PS run in parallel, one frame per PS
// and lane (below).
//
// Lanes: a dense round's slices on one PS are spread over up to `lanes`
// streams (one per 384 KiB the round moves to that PS), each carrying its
// share of the bytes, balanced by slice sizes. Over a socket
// (TCP frames or gRPC), a PS serves each connection on its own thread and
// the kernel's copies of each connection run on whichever core is free, so
// one round's frames go through the PS and the network stack side by side
// instead of one after another. A PS that mapped the stream's shared memory
// (a worker on its host) gets every frame on its first stream: the bytes
// then cross no socket, and a second stream only adds hand-offs.
//
// The client remembers, per slice, the version it last pulled and sends it
// with the next push (sync aggregation, staleness); the PS does the waiting
// a mode asks for. Every call has a deadline. Data calls do not retry
// (callers wait for the PS with WaitUntilReady first, and a PS lost mid-job
// is reported, not waited for).
// Errors name the PS: "ps:1 (127.0.0.1:4001): Exchange: <what the PS
// said>".
//
// Thread-compatible: one PsClient per thread, with one exception: a
// thread exchanging table rows (PullRows, PushRows, PushPullRows) may run
// beside one exchanging dense slices (PullAll, PushAll, PushPull*): they
// share only the streams, which are thread-safe, and atomics.
#ifndef PSTRAIN_CLIENT_PS_CLIENT_H_
#define PSTRAIN_CLIENT_PS_CLIENT_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/control_channel.h"
#include "client/frame_coding.h"
#include "client/grpc_control_channel.h"
#include "client/parameter_store.h"
#include "client/ps_stream.h"
#include "cluster/placement.h"
#include "transport/frame_tls.h"
#include "transport/security.h"
#include "cluster/tf_config.h"
#include "proto/ps_service.grpc.pb.h"

namespace pstrain::client {

struct PsClientOptions {
  std::vector<HostPort> ps_addresses;
  // 30 s: a pull or push of the largest slice on loopback takes
  // milliseconds; anything this slow is a lost peer. Sync and ssp pulls wait
  // for other replicas on the PS side, up to the PS's own wait timeout, so
  // pulls get `wait_deadline` instead.
  absl::Duration rpc_deadline = absl::Seconds(30);
  absl::Duration wait_deadline = absl::Seconds(150);
  int max_message_bytes = 512 << 20;
  // Dense slices of one PS travel in frames of at most this many tensor
  // bytes (one slice larger than this gets a frame of its own), so a large
  // model never needs one huge message or buffer on either side.
  int64_t max_frame_bytes = 4 << 20;
  // This client's replica index, sent with every pull and push; -1 for a
  // client that only observes (the chief, tools): its pulls never wait.
  int replica = 0;
  // The job's consistency mode as this client was told it; sent with pushes
  // so a PS running another mode refuses them. None: not sent.
  std::optional<Consistency> consistency;
  // TLS and token for every channel (transport/security.h); null: neither.
  std::shared_ptr<const Security> security;
  // Offer each PS shared memory for the tensor bytes of Exchange frames
  // (client/ps_stream.h); a PS on another host declines and frames carry
  // them as before.
  bool shared_memory = false;
  // A TCP connection of its own to each PS. gRPC otherwise shares one
  // connection among the channels of a process that have the same target
  // and arguments; separate worker processes never share, so a bench whose
  // threads stand in for workers sets this.
  bool own_connection = false;
  // Exchange frames over TCP when the PS offers it (HealthResponse.
  // frame_port; client/ps_stream.h), inside TLS 1.3 when `security` has
  // TLS (transport/frame_tls.h), else in gRPC.
  bool tcp_frames = true;
  // Gradients pushed and values pulled cross the wire as bfloat16
  // (base/bfloat16.h; FrameHeader.wire_dtype), half the bytes; the PS
  // keeps and updates float32. Applies to dense slices and table rows.
  bool bfloat16_wire = false;
  // Exchange streams per PS that dense rounds spread their frames over
  // (lanes, above); at least 1. Streams other than the first open on first
  // use, never offer shared memory, and carry dense slices only.
  int lanes = 2;
};

class PsClient {
 public:
  // `placement` fixes which slices pull and push move. InvalidArgument when
  // the placement's PS count differs from the addresses given.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(const PsClientOptions& options,
                                                          const Placement& placement);
  ~PsClient();

  int num_ps() const { return control_->num_ps(); }
  const Placement& placement() const { return placement_; }
  // Whether frames to `ps` on `lane` went over TCP on the stream last
  // opened (client/ps_stream.h), not in gRPC; false for a lane not used yet.
  bool frames_over_tcp(int ps, int lane = 0) const { return Stream(ps, lane).over_tcp(); }
  bool frames_over_tls(int ps, int lane = 0) const { return Stream(ps, lane).over_tls(); }
  bool frames_over_kernel_tls(int ps, int lane = 0) const {
    return Stream(ps, lane).over_kernel_tls();
  }
  // Exchange frames sent so far whose tensor bytes went through shared
  // memory (options.shared_memory), over all PS.
  int64_t SharedMemoryFrames() const;
  // "ps:1 (127.0.0.1:4001)".
  std::string PsName(int ps) const;

  // Polls every PS's Health until all answer (and, if `require_initialized`,
  // report initialised variables of one generation) or `timeout` passes. Logs, every 5 s,
  // whom it still waits for and since when. DeadlineExceeded naming every
  // PS still missing and why. With `require_initialized`, the client then
  // sends that generation with its pushes and pulls.
  // A non-OK status from the abort check (SetAbortCheck) ends the wait
  // with that status.
  absl::Status WaitUntilReady(absl::Duration timeout, bool require_initialized);

  // Asked every round of WaitUntilReady: a job that failed for good (the
  // chief in this process refused a task) stops a replica from waiting for
  // PS told to exit. Set before the client is used.
  void SetAbortCheck(std::function<absl::Status()> check) { abort_check_ = std::move(check); }

  // After WaitUntilReady(..., true): the step of the checkpoint the PS
  // restored the variables from (the largest any PS reported), 0 when they
  // were created fresh.
  int64_t restored_step() const { return restored_step_; }
  // After WaitUntilReady(..., true): the generation the PS serve.
  int64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // One PS's Health within `timeout`; errors name the PS (FailedPrecondition
  // when it says it is another PS). With `wait_for_connection` the call
  // waits (within `timeout`) for the connection, TLS handshake included,
  // instead of failing at once while the channel is reconnecting.
  absl::StatusOr<v1::HealthResponse> Health(int ps, absl::Duration timeout,
                                            bool wait_for_connection = false);

  // Pulls every dense slice into `params` (flat layout as above). On error
  // the contents of `params` are unspecified. Returns the smallest global
  // step among the PS (each counts its own; ShardStore::global_step).
  absl::StatusOr<int64_t> PullAll(float* params, const std::vector<int64_t>& offsets);

  // Pushes the gradient of every dense slice from `grads` (flat layout).
  // A gradient holding NaN or Inf is refused before anything is applied:
  // by this client when the push spans several frames, else by the PS. Each
  // frame is all-or-nothing on its PS; other errors (a PS that does not
  // know a slice, say) may leave earlier frames of a multi-frame push
  // applied.
  absl::Status PushAll(const float* grads, const std::vector<int64_t>& offsets);

  // Push then pull in one round trip per PS: what a training step ends with.
  // `grads` and `params` may not overlap. Returns as PullAll.
  absl::StatusOr<int64_t> PushPullAll(const float* grads, float* params,
                                      const std::vector<int64_t>& offsets);

  // PushPullAll restricted to the slices of `variables` (indices into
  // placement.variables): what a worker sends for one layer as soon as
  // backprop has produced its gradient. Returns the smallest global step
  // among the PS holding those slices. InvalidArgument for an index out of
  // range. Calls on one PsClient must not overlap.
  absl::StatusOr<int64_t> PushPullVariables(const std::vector<int>& variables, const float* grads,
                                            float* params, const std::vector<int64_t>& offsets);

  // Rows `ids` of embedding table `table` into `out` (ids.size() * dim
  // floats), asking each PS for the ids it owns.
  absl::Status PullRows(const std::string& table, absl::Span<const int64_t> ids, float* out);
  // Gradients for rows `ids` (ids.size() * dim floats; repeated ids add up).
  absl::Status PushRows(const std::string& table, absl::Span<const int64_t> ids,
                        const float* grads);

  // Rows of several tables in one exchange with each PS (a click model's
  // eight tables cost one round trip per PS, not eight): for a pull, the
  // rows of `ids` go to `out`; for a push, `grads` holds theirs (ids.size()
  // * the table's dim floats each). A table may appear once per call.
  // A sync table (its consistency, or the job's when it has none) takes
  // one push from every replica on every PS per round: its pushes go to
  // every PS, with no rows where the replica's batch names none there, and
  // carry the table's version on that PS, which its pulls (also sent to
  // every PS) bring back. Its pulls wait, as the PS's rules say, for the
  // rounds this replica pushed to end.
  using TableRows = client::TableRows;
  absl::Status PullRows(absl::Span<const TableRows> tables);
  absl::Status PushRows(absl::Span<const TableRows> tables);
  // Both in one exchange with each PS: each PS applies the pushed rows,
  // then answers the pull (so the pulled rows include this push where the
  // ids meet). One round trip where PushRows then PullRows take two.
  absl::Status PushPullRows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull);

  // What a parameter store's exchanges come down to (client/remote_store.h):
  // a push of `grads` (null: none), then a pull into `params` (null: none),
  // of the dense slices of `variables` (empty: every one), returning as
  // PushPullVariables; and a push of the rows of `push`, then a pull of
  // those of `pull` (either may be empty), as PushPullRows. A push
  // numbered `push_number` (> 0: this replica's count of its pushes once it
  // is in, FrameHeader.push_number) is applied at most once per slice,
  // however often it is sent.
  absl::StatusOr<int64_t> ExchangeDense(absl::Span<const int> variables, const float* grads,
                                        float* params, const std::vector<int64_t>& offsets,
                                        int64_t push_number = 0);
  absl::Status ExchangeRows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull) {
    return RowsRound(push, pull);
  }

  // sync: the global step the job ends at; pulls of tensors that reached it
  // no longer wait for other replicas (0: none).
  void set_stop_step(int64_t step) { stop_step_ = step; }

  // Gradients the PS dropped as stale (sync) among this client's pushes.
  int64_t dropped_pushes() const { return dropped_; }

  // Every PS's Stats.
  absl::StatusOr<std::vector<v1::StatsResponse>> Stats();

  // The pushes the PS applied from training replica `replica`
  // (client/ps_admin.h, ReplicaPushesIn), kept across restores: where an
  // async or ssp replica that starts again is in its own schedule.
  absl::StatusOr<int64_t> ReplicaPushes(int replica);

  // The control calls of this client's channels, for whoever administers
  // the same PS (a test, a tool): PsAdmin(&client->control()).
  PsControlChannel& control() { return *control_; }

 private:
  PsClient(const PsClientOptions& options, const Placement& placement,
           std::shared_ptr<const FrameTls> tls);

  // The Exchange stream of `lane` to `ps`.
  PsStream& Stream(int ps, int lane) const { return *streams_[ps * lanes_ + lane]; }

  // Sends frame i on stream stream_of[i] (ps * lanes + lane), all
  // concurrently; `build(i, header, payload, reply_into)` fills each
  // request (reply_into: where its answer's payload may land,
  // client/ps_stream.h) and `on_response(i, frame)` reads each answer (on a
  // gRPC thread). Waits for all; the first error wins.
  absl::Status ExchangeEach(
      const std::vector<int>& stream_of, absl::Duration timeout,
      const std::function<void(int, v1::FrameHeader*, std::vector<grpc::Slice>*, ReplyInto*)>&
          build,
      const std::function<absl::Status(int, const DecodedFrame&)>& on_response);

  // Dense slices are moved in groups: some slices of one PS, at most
  // max_frame_bytes together, sent on one of its lanes.
  struct Group {
    int ps = 0;
    int lane = 0;
    std::vector<int> slices;  // indices into slices_on_[ps]
  };
  // One group's slices as a request names them (client/frame_coding.h):
  // pushed from `grads` (may be null), pulled into `params` (may be null).
  std::vector<DenseSlice> DenseSlicesOf(const Group& g, const float* grads, float* params,
                                        const std::vector<int64_t>& offsets) const;
  // The groups of the slices of the wanted variables (empty: all), in PS
  // order; each PS's slices spread over up to laned[ps] lanes, one per
  // kMinLaneBytes of them on the wire (1: all on the first, in placement
  // order).
  std::vector<Group> MakeGroups(const std::vector<char>& wanted,
                                const std::vector<int>& laned) const;
  // The lanes each PS's dense frames take now: 1 for a PS whose first
  // stream shares memory with it, else options_.lanes.
  std::vector<int> LanesNow() const;
  // Every dense slice's groups for the lanes each PS takes now (cached).
  const std::vector<Group>& AllGroups();
  // Counts the pushes of a response the PS dropped as stale.
  void CountDropped(const DecodedFrame& f);
  // InvalidArgument naming the slice and element of the first NaN or Inf in
  // the groups' slices.
  absl::Status CheckFinite(const std::vector<Group>& groups, const float* grads,
                           const std::vector<int64_t>& offsets) const;
  // Push and/or pull of `groups`; returns the smallest global step seen.
  absl::StatusOr<int64_t> DenseRound(const std::vector<Group>& groups, const float* grads,
                                     float* params, const std::vector<int64_t>& offsets,
                                     absl::Duration timeout, int64_t push_number = 0);
  absl::StatusOr<int64_t> TableDim(const std::string& table) const;
  // The index of `table` in placement_.embeddings; NotFound naming it.
  absl::StatusOr<int> TableIndex(const std::string& table) const;
  // Embedding ids grouped by owning PS, with their positions in `ids`.
  struct RowsByPs {
    std::vector<std::vector<int64_t>> ids_on;
    std::vector<std::vector<size_t>> pos_on;
    std::vector<int> targets;  // PS with at least one id
  };
  RowsByPs GroupRows(absl::Span<const int64_t> ids) const;
  // Each table's ids grouped by PS, their dims, and the PS any of them
  // reaches; `status` names an unknown table.
  struct TablesByPs {
    absl::Status status;
    std::vector<RowsByPs> rows;
    std::vector<int> index;  // in placement_.embeddings
    std::vector<int64_t> dims;
    std::vector<char> sync;
    std::vector<int> targets;
    // Whether table t has a ref in the frame to `ps`: it has ids there, or
    // it is sync (every PS).
    bool Sends(size_t t, int ps) const { return sync[t] || !rows[t].ids_on[ps].empty(); }
  };
  TablesByPs GroupTables(absl::Span<const TableRows> tables) const;
  // The refs of `tables` (grouped as `by`) in a request to `ps`.
  std::vector<TableRef> TableRefsOn(int ps, const TablesByPs& by,
                                    absl::Span<const TableRows> tables) const;
  // The rows of `push` and of `pull` (either may be empty) in one exchange
  // with every PS either involves.
  absl::Status RowsRound(absl::Span<const TableRows> push, absl::Span<const TableRows> pull);

  const PsClientOptions options_;
  const Placement placement_;
  std::unique_ptr<GrpcControlChannel> control_;
  // Per PS, its lanes' streams: stream (ps, lane) at ps * lanes_ + lane.
  const int lanes_;
  std::vector<std::unique_ptr<PsStream>> streams_;
  // Per embedding table (placement order), per PS: its version in the
  // last pull of its rows there (what a sync push of its rows is for).
  std::vector<std::vector<int64_t>> table_versions_;
  std::function<absl::Status()> abort_check_;  // see SetAbortCheck
  // Per PS: its slices (placement order) and the version of each last pulled.
  std::vector<std::vector<SliceDef>> slices_on_;
  std::vector<std::vector<int>> slice_variable_;  // index into placement.variables
  std::vector<std::vector<int64_t>> versions_;
  // AllGroups' cache, and the lanes per PS it was made for.
  std::vector<Group> groups_;
  std::vector<int> groups_lanes_;
  std::map<std::string, int> variable_index_;
  std::atomic<int64_t> dropped_{0};
  // Bytes on the wire of `float_bytes` of float32 tensor values: half of
  // them as bfloat16 (options.bfloat16_wire).
  int64_t WireBytes(int64_t float_bytes) const {
    return options_.bfloat16_wire ? float_bytes / 2 : float_bytes;
  }
  // Buffers of the bfloat16 gradients pushed (options.bfloat16_wire).
  const std::shared_ptr<BufferPool> wire_pool_ = BufferPool::Create(int64_t{64} << 20);
  int64_t stop_step_ = 0;
  int64_t restored_step_ = 0;
  std::atomic<int64_t> generation_{0};
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_PS_CLIENT_H_
