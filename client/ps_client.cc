#include "client/ps_client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <limits>
#include <optional>

#include "cluster/global_step.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/bfloat16.h"
#include "cluster/checkpoint_layout.h"
#include "base/finite.h"
#include "transport/grpc_status.h"
#include "base/logging.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace pstrain::client {
namespace {

constexpr int64_t kParallelCopyBytes = 1 << 20;

// Each further lane of a round costs both ends a frame's fixed work (its
// syscalls, wake-ups and hand-offs between threads) and pays only as the
// bytes it takes off the others. On the development machine (2 cores, a 1
// PS + 1 worker job over TCP), the guide MLP's rounds, 1.07 MB each way
// on two lanes, trained 1.12x as fast as on one; the same rounds in
// bfloat16, 0.54 MB, 0.84x as fast; so a PS's round takes a lane per this
// many bytes on the wire.
constexpr int64_t kMinLaneBytes = 384 << 10;

// The shared memory one stream offers its PS: room for a few frames in
// flight at once (ExchangeEach sends two per stream, and pulls and pushes of
// consecutive steps overlap), each pushing and pulling the PS's dense bytes
// up to max_frame_bytes, plus 1 MiB for table rows; at most 256 MiB. A
// frame that finds no room travels inline.
int64_t SharedBytes(const std::vector<SliceDef>& slices, int64_t max_frame_bytes) {
  int64_t total = 0, largest = 0;
  for (const SliceDef& s : slices) {
    total += s.bytes();
    largest = std::max(largest, s.bytes());
  }
  const int64_t frame = std::min(total, std::max(max_frame_bytes, largest));
  return std::min<int64_t>(8 * frame + (int64_t{1} << 20), int64_t{256} << 20);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const PsClientOptions& options,
                                                           const Placement& placement) {
  if (options.ps_addresses.empty()) {
    return absl::InvalidArgumentError("PsClient needs at least one ps address");
  }
  if (placement.num_ps != static_cast<int>(options.ps_addresses.size())) {
    return absl::InvalidArgumentError(absl::StrCat("placement is for ", placement.num_ps,
                                                   " ps but the cluster has ",
                                                   options.ps_addresses.size()));
  }
  if (options.lanes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a PS client needs at least 1 lane per ps, got ", options.lanes));
  }
  // Frames over TCP go inside TLS when the job has it.
  std::shared_ptr<const FrameTls> tls;
  if (options.tcp_frames && options.security != nullptr && options.security->tls()) {
    PSTRAIN_ASSIGN_OR_RETURN(tls, FrameTls::Make(*options.security, FrameTls::Side::kClient));
  }
  return std::unique_ptr<PsClient>(new PsClient(options, placement, std::move(tls)));
}

PsClient::PsClient(const PsClientOptions& options, const Placement& placement,
                   std::shared_ptr<const FrameTls> tls)
    : options_(options), placement_(placement), lanes_(options.lanes) {
  const grpc::ChannelArguments args =
      GrpcControlChannel::Arguments(options.max_message_bytes, options.own_connection);
  const int n = static_cast<int>(options.ps_addresses.size());
  for (size_t v = 0; v < placement.variables.size(); ++v) {
    variable_index_[placement.variables[v].name] = static_cast<int>(v);
  }
  slices_on_.resize(n);
  slice_variable_.resize(n);
  versions_.resize(n);
  const Security& security = options.security == nullptr ? *Security::None() : *options.security;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n; ++i) {
    channels.push_back(security.CreateChannel(options.ps_addresses[i].ToString(), args));
  }
  control_ = std::make_unique<GrpcControlChannel>(channels, options.ps_addresses, options.security);
  for (int i = 0; i < n; ++i) {
    slices_on_[i] = placement.SlicesOn(i);
    std::optional<TcpRoute> tcp;
    if (options.tcp_frames) {
      tcp.emplace();
      tcp->host = options.ps_addresses[i].host;
      tcp->token = security.token();
      tcp->tls = tls;
      tcp->port = [this, i]() -> absl::StatusOr<int> {
        auto health = Health(i, absl::Seconds(2), /*wait_for_connection=*/false);
        if (!health.ok()) return health.status();
        return health->frame_port();
      };
    }
    for (int lane = 0; lane < lanes_; ++lane) {
      streams_.push_back(std::make_unique<PsStream>(
          channels[i], PsName(i), "/pstrain.v1.PsService/Exchange",
          options.shared_memory && lane == 0 ? SharedBytes(slices_on_[i], options.max_frame_bytes)
                                             : 0,
          tcp));
    }
    for (const SliceDef& s : slices_on_[i]) {
      slice_variable_[i].push_back(variable_index_.at(s.variable));
    }
    versions_[i].assign(slices_on_[i].size(), 0);
  }
  table_versions_.assign(placement.embeddings.size(), std::vector<int64_t>(n, 0));
}

std::vector<PsClient::Group> PsClient::MakeGroups(const std::vector<char>& wanted,
                                                  const std::vector<int>& laned) const {
  std::vector<Group> groups;
  for (int i = 0; i < num_ps(); ++i) {
    // Each wanted slice to the lane with the fewest bytes so far, largest
    // slices first (ties: the earlier slice, the lower lane).
    std::vector<int> order;
    for (size_t k = 0; k < slices_on_[i].size(); ++k) {
      if (wanted.empty() || wanted[slice_variable_[i][k]]) order.push_back(static_cast<int>(k));
    }
    // A lane per kMinLaneBytes of the PS's bytes on the wire, up to laned[i].
    int64_t wire = 0;
    for (int k : order) wire += WireBytes(slices_on_[i][k].bytes());
    const int lanes = static_cast<int>(
        std::clamp<int64_t>(wire / kMinLaneBytes, 1, static_cast<int64_t>(laned[i])));
    std::vector<std::vector<int>> on_lane(lanes);
    if (lanes == 1) {
      on_lane[0] = order;
    } else {
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return slices_on_[i][a].bytes() > slices_on_[i][b].bytes();
      });
      std::vector<int64_t> load(lanes, 0);
      for (int k : order) {
        const int lane =
            static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
        on_lane[lane].push_back(k);
        load[lane] += slices_on_[i][k].bytes();
      }
    }
    for (int lane = 0; lane < lanes; ++lane) {
      // In placement order within the lane, a frame per max_frame_bytes.
      std::sort(on_lane[lane].begin(), on_lane[lane].end());
      Group g{i, lane, {}};
      int64_t bytes = 0;
      for (int k : on_lane[lane]) {
        const SliceDef& s = slices_on_[i][k];
        if (!g.slices.empty() && bytes + s.bytes() > options_.max_frame_bytes) {
          groups.push_back(std::move(g));
          g = Group{i, lane, {}};
          bytes = 0;
        }
        g.slices.push_back(k);
        bytes += s.bytes();
      }
      if (!g.slices.empty()) groups.push_back(std::move(g));
    }
  }
  return groups;
}

std::vector<int> PsClient::LanesNow() const {
  std::vector<int> laned(num_ps(), lanes_);
  for (int i = 0; i < num_ps(); ++i) {
    if (Stream(i, 0).shares_memory()) laned[i] = 1;
  }
  return laned;
}

const std::vector<PsClient::Group>& PsClient::AllGroups() {
  std::vector<int> laned = LanesNow();
  if (laned != groups_lanes_) {
    groups_ = MakeGroups({}, laned);
    groups_lanes_ = std::move(laned);
  }
  return groups_;
}

PsClient::~PsClient() = default;

std::string PsClient::PsName(int ps) const { return control_->PsName(ps); }

absl::StatusOr<v1::HealthResponse> PsClient::Health(int ps, absl::Duration timeout,
                                                    bool wait_for_connection) {
  return control_->Health(ps, absl::Now() + timeout, wait_for_connection);
}

absl::Status PsClient::WaitUntilReady(absl::Duration timeout, bool require_initialized) {
  PSTRAIN_ASSIGN_OR_RETURN(PsReady ready,
                           WaitForPs(*control_, timeout, require_initialized, abort_check_));
  if (require_initialized) {
    generation_.store(ready.generation, std::memory_order_release);
    restored_step_ = ready.restored_step;
  }
  return absl::OkStatus();
}

absl::Status PsClient::ExchangeEach(
    const std::vector<int>& stream_of, absl::Duration timeout,
    const std::function<void(int, v1::FrameHeader*, std::vector<grpc::Slice>*, ReplyInto*)>& build,
    const std::function<absl::Status(int, const DecodedFrame&)>& on_response) {
  if (stream_of.empty()) return absl::OkStatus();
  // Each request ends by counting itself off `remaining` as its very last
  // act; the last one fires `all_done`, after which this frame may go.
  std::atomic<size_t> remaining{stream_of.size()};
  absl::Notification all_done;
  auto count_off = [&](size_t n) {
    if (n > 0 && remaining.fetch_sub(n) == n) all_done.Notify();
  };
  absl::Mutex mu;
  // Of several errors, the one of the lowest request (so the lowest PS)
  // is returned, whichever came first.
  absl::Status first_error;
  size_t first_error_at = stream_of.size();
  std::vector<char> answered(stream_of.size(), 0);
  // Frames on each stream go out at most kMaxInFlight at a time: enough to
  // keep the connection busy, few enough that a large model never sits
  // whole in the PS's receive buffers.
  constexpr size_t kMaxInFlight = 2;
  std::vector<std::deque<int>> queued(streams_.size());
  for (size_t i = 0; i < stream_of.size(); ++i) queued[stream_of[i]].push_back(static_cast<int>(i));
  std::function<void(int)> send_one;  // sends request i
  // The next queued request for stream `at`, or -1.
  auto pop = [&](size_t at) {
    absl::MutexLock lock(&mu);
    if (queued[at].empty()) return -1;
    const int i = queued[at].front();
    queued[at].pop_front();
    return i;
  };
  send_one = [&](int i) {
    const int at = stream_of[i];
    v1::FrameHeader h;
    h.set_replica(options_.replica);
    h.set_generation(generation_.load(std::memory_order_acquire));
    h.set_stop_step(stop_step_);
    if (options_.bfloat16_wire) h.set_wire_dtype(v1::BFLOAT16);
    std::vector<grpc::Slice> payload;
    ReplyInto reply_into;
    build(i, &h, &payload, &reply_into);
    streams_[at]->Send(
        std::move(h), std::move(payload),
        [&, i, at](const absl::Status& st, const DecodedFrame* frame) {
          absl::Status s = st.ok() ? on_response(i, *frame) : st;
          int next = -1;
          size_t dropped = 0;
          {
            absl::MutexLock lock(&mu);
            answered[i] = 1;
            if (!s.ok() && static_cast<size_t>(i) < first_error_at) {
              first_error = s;
              first_error_at = i;
            }
            if (!s.ok()) {  // the rest on this stream would fail alike
              dropped = queued[at].size();
              queued[at].clear();
            } else if (!queued[at].empty()) {
              next = queued[at].front();
              queued[at].pop_front();
            }
          }
          if (next >= 0) send_one(next);
          count_off(dropped + 1);
        },
        std::move(reply_into));
  };
  for (size_t at = 0; at < streams_.size(); ++at) {
    for (size_t k = 0; k < kMaxInFlight; ++k) {
      const int i = pop(at);
      if (i >= 0) send_one(i);
    }
  }
  if (!all_done.WaitForNotificationWithTimeout(timeout)) {
    std::vector<std::string> silent;
    size_t never_sent = 0;
    {
      absl::MutexLock lock(&mu);
      for (size_t i = 0; i < stream_of.size(); ++i) {
        const std::string name = PsName(stream_of[i] / lanes_);
        if (!answered[i] && std::find(silent.begin(), silent.end(), name) == silent.end()) {
          silent.push_back(name);
        }
      }
      for (auto& q : queued) {
        never_sent += q.size();
        q.clear();
      }
    }
    count_off(never_sent);
    for (const auto& stream : streams_) stream->Cancel();
    all_done.WaitForNotification();
    return absl::DeadlineExceededError(absl::StrCat(absl::StrJoin(silent, ", "),
                                                    ": Exchange: no answer within ",
                                                    absl::FormatDuration(timeout)));
  }
  absl::MutexLock lock(&mu);
  return first_error;
}

std::vector<DenseSlice> PsClient::DenseSlicesOf(const Group& g, const float* grads, float* params,
                                                const std::vector<int64_t>& offsets) const {
  std::vector<DenseSlice> out;
  for (int i : g.slices) {
    const SliceDef& sl = slices_on_[g.ps][i];
    const int64_t at = offsets[slice_variable_[g.ps][i]] + sl.element_offset();
    DenseSlice& d = out.emplace_back();
    d.key = sl.key();
    d.bytes = sl.bytes();
    d.version = versions_[g.ps][i];
    d.grads = grads == nullptr ? nullptr : grads + at;
    d.values = params == nullptr ? nullptr : params + at;
  }
  return out;
}

void PsClient::CountDropped(const DecodedFrame& f) {
  for (bool applied : f.header().applied()) {
    if (!applied) dropped_.fetch_add(1, std::memory_order_relaxed);
  }
}

absl::Status PsClient::CheckFinite(const std::vector<Group>& groups, const float* grads,
                                   const std::vector<int64_t>& offsets) const {
  for (const Group& group : groups) {
    const int ps = group.ps;
    for (int i : group.slices) {
      const SliceDef& sl = slices_on_[ps][i];
      const float* g = grads + offsets[slice_variable_[ps][i]] + sl.element_offset();
      // In shares across cores for large slices; the earliest hit wins.
      absl::Mutex mu;
      int64_t bad = -1;
      ParallelFor(sl.elements(), kParallelCopyBytes / 4, [&](int64_t b, int64_t e) {
        const int64_t at = FindNonFinite(g + b, e - b);
        if (at < 0) return;
        absl::MutexLock lock(&mu);
        if (bad < 0 || b + at < bad) bad = b + at;
      });
      if (bad >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("gradient for ", sl.key(), " has a non-finite value (", g[bad],
                         ") at element ", bad, "; nothing was pushed"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsClient::DenseRound(const std::vector<Group>& groups, const float* grads,
                                             float* params, const std::vector<int64_t>& offsets,
                                             absl::Duration timeout, int64_t push_number) {
  // A push spanning several frames (and PS) is applied frame by frame; a bad
  // gradient is refused here so that no frame of it is. A single frame is
  // checked whole by its PS before anything is applied.
  if (grads != nullptr && groups.size() > 1) {
    PSTRAIN_RETURN_IF_ERROR(CheckFinite(groups, grads, offsets));
  }
  std::vector<int> stream_of;
  std::vector<std::vector<DenseSlice>> dense;
  for (const Group& g : groups) {
    stream_of.push_back(g.ps * lanes_ + g.lane);
    dense.push_back(DenseSlicesOf(g, grads, params, offsets));
  }
  std::vector<int64_t> steps(groups.size(), 0);
  PSTRAIN_RETURN_IF_ERROR(ExchangeEach(
      stream_of, timeout,
      [&](int i, v1::FrameHeader* h, std::vector<grpc::Slice>* payload, ReplyInto* reply_into) {
        EncodeDense(dense[i], options_.bfloat16_wire, *wire_pool_, h, payload, reply_into);
        // Room for the pulled values as floats: the PS narrows them in
        // place. The hint is for the first stream's shared memory; other
        // lanes have none.
        if (options_.shared_memory && groups[i].lane == 0 && params != nullptr) {
          int64_t pulled_bytes = 0;
          for (const DenseSlice& d : dense[i]) pulled_bytes += d.bytes;
          h->set_shm_reply_capacity(pulled_bytes);
        }
        if (grads != nullptr && options_.consistency.has_value()) {
          h->set_consistency(options_.consistency->ToString());
        }
        if (grads != nullptr) h->set_push_number(push_number);
      },
      [&](int i, const DecodedFrame& f) -> absl::Status {
        steps[i] = f.header().global_step();
        CountDropped(f);
        if (params == nullptr) return absl::OkStatus();
        std::vector<int64_t> versions;
        PSTRAIN_RETURN_IF_ERROR(DecodeDense(f, dense[i], options_.bfloat16_wire,
                                            PsName(groups[i].ps), &versions));
        for (size_t k = 0; k < groups[i].slices.size(); ++k) {
          versions_[groups[i].ps][groups[i].slices[k]] = versions[k];
        }
        return absl::OkStatus();
      }));
  // A PS's global step is its slowest tensor's; each answer reads it when
  // that frame is done, and a frame answered before another to the same PS
  // (another lane, or a later group) may see that PS's other tensors not
  // yet at the step. So the latest reading of each PS (the largest: it
  // never goes back within a round), and the slowest PS.
  std::vector<int64_t> latest(num_ps(), -1);
  for (size_t i = 0; i < groups.size(); ++i) {
    latest[groups[i].ps] = std::max(latest[groups[i].ps], steps[i]);
  }
  int64_t step = kNoStep;
  for (int64_t s : latest) step = SlowerStep(step, s);
  return std::max<int64_t>(step, 0);
}

absl::StatusOr<int64_t> PsClient::PullAll(float* params, const std::vector<int64_t>& offsets) {
  return DenseRound(AllGroups(), nullptr, params, offsets, options_.wait_deadline);
}

absl::Status PsClient::PushAll(const float* grads, const std::vector<int64_t>& offsets) {
  return DenseRound(AllGroups(), grads, nullptr, offsets, options_.rpc_deadline).status();
}

absl::StatusOr<int64_t> PsClient::PushPullAll(const float* grads, float* params,
                                              const std::vector<int64_t>& offsets) {
  return DenseRound(AllGroups(), grads, params, offsets, options_.wait_deadline);
}

absl::StatusOr<int64_t> PsClient::PushPullVariables(const std::vector<int>& variables,
                                                    const float* grads, float* params,
                                                    const std::vector<int64_t>& offsets) {
  return ExchangeDense(variables, grads, params, offsets);
}

absl::StatusOr<int64_t> PsClient::ExchangeDense(absl::Span<const int> variables,
                                                const float* grads, float* params,
                                                const std::vector<int64_t>& offsets,
                                                int64_t push_number) {
  // A pull may wait on the PS for other replicas (sync, ssp).
  const absl::Duration timeout =
      params != nullptr ? options_.wait_deadline : options_.rpc_deadline;
  if (variables.empty()) {
    return DenseRound(AllGroups(), grads, params, offsets, timeout, push_number);
  }
  std::vector<char> wanted(placement_.variables.size(), 0);
  for (int v : variables) {
    if (v < 0 || v >= static_cast<int>(wanted.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable index ", v, " is out of range: the model has ", wanted.size(), " variables"));
    }
    wanted[v] = 1;
  }
  return DenseRound(MakeGroups(wanted, LanesNow()), grads, params, offsets, timeout, push_number);
}

absl::StatusOr<int64_t> PsClient::TableDim(const std::string& table) const {
  PSTRAIN_ASSIGN_OR_RETURN(const int index, TableIndex(table));
  return placement_.embeddings[index].row_elements();
}

absl::StatusOr<int> PsClient::TableIndex(const std::string& table) const {
  for (size_t i = 0; i < placement_.embeddings.size(); ++i) {
    if (placement_.embeddings[i].name == table) return static_cast<int>(i);
  }
  return absl::NotFoundError(absl::StrCat("the model has no embedding table \"", table, "\""));
}

PsClient::RowsByPs PsClient::GroupRows(absl::Span<const int64_t> ids) const {
  RowsByPs by;
  by.ids_on.resize(num_ps());
  by.pos_on.resize(num_ps());
  for (size_t i = 0; i < ids.size(); ++i) {
    // A negative id goes to ps:0, which names it in its error.
    const int ps = ids[i] >= 0 ? EmbeddingOwner(ids[i], num_ps()) : 0;
    by.ids_on[ps].push_back(ids[i]);
    by.pos_on[ps].push_back(i);
  }
  for (int ps = 0; ps < num_ps(); ++ps) {
    if (!by.ids_on[ps].empty()) by.targets.push_back(ps);
  }
  return by;
}

absl::Status PsClient::PullRows(const std::string& table, absl::Span<const int64_t> ids,
                                float* out) {
  const TableRows rows[] = {{table, ids, out, nullptr}};
  return PullRows(rows);
}

absl::Status PsClient::PushRows(const std::string& table, absl::Span<const int64_t> ids,
                                const float* grads) {
  const TableRows rows[] = {{table, ids, nullptr, grads}};
  return PushRows(rows);
}

PsClient::TablesByPs PsClient::GroupTables(absl::Span<const TableRows> tables) const {
  TablesByPs by;
  std::vector<bool> involved(num_ps(), false);
  for (size_t t = 0; t < tables.size(); ++t) {
    absl::StatusOr<int> index = TableIndex(tables[t].table);
    if (!index.ok()) {
      by.status = index.status();
      return by;
    }
    const VariableDef& def = placement_.embeddings[*index];
    const std::optional<Consistency>& mode =
        def.consistency.has_value() ? def.consistency : options_.consistency;
    by.index.push_back(*index);
    by.dims.push_back(def.row_elements());
    by.sync.push_back(mode.has_value() && mode->mode == Consistency::Mode::kSync);
    by.rows.push_back(GroupRows(tables[t].ids));
    for (int ps = 0; ps < num_ps(); ++ps) {
      if (by.Sends(t, ps)) involved[ps] = true;
    }
  }
  for (int ps = 0; ps < num_ps(); ++ps) {
    if (involved[ps]) by.targets.push_back(ps);
  }
  return by;
}

absl::Status PsClient::PullRows(absl::Span<const TableRows> tables) {
  return RowsRound({}, tables);
}

absl::Status PsClient::PushRows(absl::Span<const TableRows> tables) {
  return RowsRound(tables, {});
}

absl::Status PsClient::PushPullRows(absl::Span<const TableRows> push,
                                    absl::Span<const TableRows> pull) {
  return RowsRound(push, pull);
}

std::vector<TableRef> PsClient::TableRefsOn(int ps, const TablesByPs& by,
                                            absl::Span<const TableRows> tables) const {
  std::vector<TableRef> refs;
  for (size_t t = 0; t < tables.size(); ++t) {
    if (!by.Sends(t, ps)) continue;
    TableRef& r = refs.emplace_back();
    r.table = tables[t].table;
    r.dim = by.dims[t];
    r.ids = by.rows[t].ids_on[ps];
    r.positions = by.rows[t].pos_on[ps];
    r.version = table_versions_[by.index[t]][ps];
    r.grads = tables[t].grads;
    r.out = tables[t].out;
  }
  return refs;
}

absl::Status PsClient::RowsRound(absl::Span<const TableRows> push,
                                 absl::Span<const TableRows> pull) {
  const TablesByPs pushed = GroupTables(push);
  PSTRAIN_RETURN_IF_ERROR(pushed.status);
  const TablesByPs pulled = GroupTables(pull);
  PSTRAIN_RETURN_IF_ERROR(pulled.status);
  std::vector<int> targets;
  std::set_union(pushed.targets.begin(), pushed.targets.end(), pulled.targets.begin(),
                 pulled.targets.end(), std::back_inserter(targets));
  // Rows go on each PS's first stream.
  std::vector<int> first_streams;
  std::vector<std::vector<TableRef>> push_refs, pull_refs;
  // For each PS's pull refs, the tables (indices into placement_.embeddings)
  // whose versions their answers bring.
  std::vector<std::vector<int>> pulled_tables(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const int ps = targets[i];
    first_streams.push_back(ps * lanes_);
    push_refs.push_back(TableRefsOn(ps, pushed, push));
    pull_refs.push_back(TableRefsOn(ps, pulled, pull));
    for (size_t t = 0; t < pull.size(); ++t) {
      if (pulled.Sends(t, ps)) pulled_tables[i].push_back(pulled.index[t]);
    }
  }
  return ExchangeEach(
      first_streams, pull.empty() ? options_.rpc_deadline : options_.wait_deadline,
      [&](int i, v1::FrameHeader* h, std::vector<grpc::Slice>* payload, ReplyInto*) {
        if (!push.empty() && options_.consistency.has_value()) {
          h->set_consistency(options_.consistency->ToString());
        }
        const int64_t pull_bytes = EncodeRows(push_refs[i], pull_refs[i], options_.bfloat16_wire,
                                              *wire_pool_, h, payload);
        if (options_.shared_memory && !pull.empty()) h->set_shm_reply_capacity(pull_bytes);
      },
      [&](int i, const DecodedFrame& f) -> absl::Status {
        const int ps = targets[i];
        if (!push.empty()) CountDropped(f);
        std::vector<int64_t> versions;
        PSTRAIN_RETURN_IF_ERROR(
            DecodeRows(f, pull_refs[i], options_.bfloat16_wire, PsName(ps), &versions));
        for (size_t r = 0; r < pulled_tables[i].size(); ++r) {
          if (static_cast<int>(r) < f.header().pull_size()) {
            table_versions_[pulled_tables[i][r]][ps] = versions[r];
          }
        }
        return absl::OkStatus();
      });
}

int64_t PsClient::SharedMemoryFrames() const {
  int64_t n = 0;
  for (const auto& s : streams_) n += s->shared_frames();
  return n;
}

absl::StatusOr<std::vector<v1::StatsResponse>> PsClient::Stats() {
  std::vector<v1::StatsResponse> resps;
  for (int ps = 0; ps < num_ps(); ++ps) {
    PSTRAIN_ASSIGN_OR_RETURN(v1::StatsResponse r,
                             control_->Stats(ps, absl::Now() + options_.rpc_deadline));
    resps.push_back(std::move(r));
  }
  return resps;
}

absl::StatusOr<int64_t> PsClient::ReplicaPushes(int replica) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<v1::StatsResponse> stats, Stats());
  return ReplicaPushesIn(stats, placement_, replica, *control_);
}

}  // namespace pstrain::client
