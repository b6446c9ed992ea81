#include "client/collective_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/float_ops.h"
#include "base/status_macros.h"

namespace pstrain::client {
namespace {

// A table's pushed rows on the wire: name length, name, row count, ids,
// gradient rows (host byte order: every replica runs this binary).
void AppendRows(const TableRows& t, int64_t dim, std::string* out) {
  const uint64_t name_bytes = t.table.size();
  const uint64_t count = t.ids.size();
  out->append(reinterpret_cast<const char*>(&name_bytes), sizeof(name_bytes));
  out->append(t.table);
  out->append(reinterpret_cast<const char*>(&count), sizeof(count));
  out->append(reinterpret_cast<const char*>(t.ids.data()), count * sizeof(int64_t));
  out->append(reinterpret_cast<const char*>(t.grads), count * dim * sizeof(float));
}

struct Reader {
  absl::string_view in;
  bool Take(void* dst, size_t n) {
    if (in.size() < n) return false;
    std::memcpy(dst, in.data(), n);
    in.remove_prefix(n);
    return true;
  }
};

}  // namespace

CollectiveStore::CollectiveStore(std::unique_ptr<ParameterStore> local, Ring* ring,
                                 const Placement& placement, std::vector<int64_t> offsets,
                                 CollectiveOptions options)
    : local_(std::move(local)),
      ring_(ring),
      options_(std::move(options)),
      variables_(placement.variables),
      tables_(placement.embeddings),
      offsets_(std::move(offsets)) {
  int64_t end = 0;
  for (size_t v = 0; v < variables_.size() && v < offsets_.size(); ++v) {
    end = std::max(end, offsets_[v] + variables_[v].elements());
  }
  averaged_.resize(end);
}

CollectiveStore::~CollectiveStore() = default;

ParameterStore::Ticket CollectiveStore::NextTicket(Queue queue) {
  absl::MutexLock lock(&mu_);
  return queues_.Start(queue);
}

void CollectiveStore::Post(Ticket last, std::function<absl::StatusOr<int64_t>()> exchange) {
  exchanges_.Run([this, last, exchange = std::move(exchange)] {
    bool skip;
    {
      absl::MutexLock lock(&mu_);
      skip = queues_.failed(last.queue);
    }
    absl::StatusOr<int64_t> result = skip ? absl::StatusOr<int64_t>(int64_t{0}) : exchange();
    absl::MutexLock lock(&mu_);
    queues_.End(last, result);
  });
}

void CollectiveStore::SendPack() {
  if (pack_.last == 0) return;
  Pack pack = std::exchange(pack_, Pack());
  Post({pack.queue, pack.last}, [this, pack = std::move(pack)] {
    return Dense(pack.variables, pack.grads, pack.params, pack.queue);
  });
}

ParameterStore::Ticket CollectiveStore::StartDense(absl::Span<const int> variables,
                                                   const float* grads, float* params,
                                                   Queue queue) {
  const Ticket ticket = NextTicket(queue);
  if (grads == nullptr) {
    SendPack();
    Post(ticket,
         [this, variables = std::vector<int>(variables.begin(), variables.end()), params, queue] {
      const Ticket t = local_->StartDense(variables, nullptr, params, queue);
      return local_->Wait(t);
    });
    return ticket;
  }
  if (pack_.last != 0 &&
      (pack_.grads != grads || pack_.params != params || pack_.queue != queue)) {
    SendPack();
  }
  bool ends_pack = variables.empty();
  if (variables.empty()) {
    // The whole model: a pack of its own.
    SendPack();
    for (size_t v = 0; v < variables_.size(); ++v) {
      pack_.variables.push_back(static_cast<int>(v));
      pack_.floats += variables_[v].elements();
    }
  }
  for (int v : variables) {
    pack_.variables.push_back(v);
    if (v >= 0 && v < static_cast<int>(variables_.size())) pack_.floats += variables_[v].elements();
    ends_pack = ends_pack || v == 0;
  }
  pack_.grads = grads;
  pack_.params = params;
  pack_.queue = queue;
  if (pack_.first == 0) pack_.first = ticket.number;
  pack_.last = ticket.number;
  if (ends_pack || pack_.floats * static_cast<int64_t>(sizeof(float)) >= options_.bytes_per_pack) {
    SendPack();
  }
  return ticket;
}

absl::StatusOr<int64_t> CollectiveStore::Dense(const std::vector<int>& variables,
                                               const float* grads, float* params, Queue queue) {
  int64_t total = 0;
  for (int v : variables) {
    if (v < 0 || v >= static_cast<int>(variables_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("variable index ", v, " is outside 0..",
                                                     variables_.size() - 1));
    }
    total += variables_[v].elements();
  }
  // One fused buffer per pack: the variables' gradients side by side, then
  // the stop vote's two numbers.
  const StopVote* vote = options_.vote.get();
  packed_.resize(total + (vote != nullptr ? 2 : 0));
  if (vote != nullptr) {
    const int mine = vote->mine.load(std::memory_order_relaxed);
    packed_[total] = static_cast<float>(mine);
    packed_[total + 1] = mine != 0 ? 1.0f : 0.0f;
  }
  int64_t at = 0;
  for (int v : variables) {
    const int64_t n = variables_[v].elements();
    std::memcpy(packed_.data() + at, grads + offsets_[v], n * sizeof(float));
    at += n;
  }
  const absl::Time start = absl::Now();
  PSTRAIN_RETURN_IF_ERROR(ring_->AllReduceSum(absl::MakeSpan(packed_), options_.bfloat16_wire));
  AddCollectiveTime(start);
  {
    absl::MutexLock lock(&mu_);
    ++dense_all_reduces_;
  }
  if (vote != nullptr) {
    // The same bits on every replica: the same answer. The signal is the
    // voters' mean (they usually share one, as a SIGTERM to every task).
    const float voters = packed_[total + 1];
    options_.vote->agreed.store(
        voters > 0 ? std::max(1, static_cast<int>(std::lround(packed_[total] / voters))) : 0,
        std::memory_order_relaxed);
  }
  const float scale = 1.0f / static_cast<float>(ring_->size());
  at = 0;
  for (int v : variables) {
    const int64_t n = variables_[v].elements();
    ScaleFloats(packed_.data() + at, n, scale, averaged_.data() + offsets_[v]);
    at += n;
  }
  const Ticket t = local_->StartDense(variables, averaged_.data(), params, queue);
  return local_->Wait(t);
}

void CollectiveStore::AddCollectiveTime(absl::Time start) {
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::MutexLock lock(&mu_);
  collective_seconds_ += seconds;
}

double CollectiveStore::collective_seconds() const {
  absl::MutexLock lock(&mu_);
  return collective_seconds_;
}

int64_t CollectiveStore::dense_all_reduces() const {
  absl::MutexLock lock(&mu_);
  return dense_all_reduces_;
}

int64_t CollectiveStore::TableDim(const std::string& table) const {
  for (const VariableDef& t : tables_) {
    if (t.name == table) return t.row_elements();
  }
  return -1;
}

ParameterStore::Ticket CollectiveStore::StartRows(absl::Span<const TableRows> push,
                                                  absl::Span<const TableRows> pull,
                                                  Queue queue) {
  const Ticket ticket = NextTicket(queue);
  SendPack();
  Post(ticket,
       [this, push = std::vector<TableRows>(push.begin(), push.end()),
        pull = std::vector<TableRows>(pull.begin(), pull.end()),
        queue]() -> absl::StatusOr<int64_t> {
         PSTRAIN_RETURN_IF_ERROR(Rows(push, pull, queue));
         return int64_t{0};
       });
  return ticket;
}

absl::Status CollectiveStore::Rows(const std::vector<TableRows>& push,
                                   const std::vector<TableRows>& pull, Queue queue) {
  if (push.empty()) {
    const Ticket t = local_->StartRows({}, pull, queue);
    return local_->Wait(t).status();
  }
  std::string mine;
  for (const TableRows& t : push) {
    const int64_t dim = TableDim(t.table);
    if (dim < 0) return absl::InvalidArgumentError(absl::StrCat("no table ", t.table));
    AppendRows(t, dim, &mine);
  }
  const absl::Time start = absl::Now();
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> all, ring_->AllGather(mine));
  AddCollectiveTime(start);
  // Per pushed table, every replica's rows in rank order, scaled by 1/n.
  const float scale = 1.0f / static_cast<float>(ring_->size());
  std::vector<std::vector<int64_t>> ids(push.size());
  std::vector<std::vector<float>> grads(push.size());
  for (size_t r = 0; r < all.size(); ++r) {
    Reader in{all[r]};
    for (size_t k = 0; k < push.size(); ++k) {
      uint64_t name_bytes = 0, count = 0;
      std::string name;
      bool ok = in.Take(&name_bytes, sizeof(name_bytes)) && name_bytes <= in.in.size();
      if (ok) {
        name = std::string(in.in.substr(0, name_bytes));
        in.in.remove_prefix(name_bytes);
        ok = name == push[k].table && in.Take(&count, sizeof(count));
      }
      const int64_t dim = TableDim(push[k].table);
      if (ok) {
        const size_t old = ids[k].size();
        ids[k].resize(old + count);
        grads[k].resize((old + count) * dim);
        ok = in.Take(ids[k].data() + old, count * sizeof(int64_t)) &&
             in.Take(grads[k].data() + old * dim, count * dim * sizeof(float));
        if (ok) {
          float* added = grads[k].data() + old * dim;
          ScaleFloats(added, count * dim, scale, added);
        }
      }
      if (!ok) {
        return absl::InternalError(absl::StrCat(
            "the rows replica ", r, " sent do not match this replica's push of table ",
            push[k].table, ": the replicas disagree on the step"));
      }
    }
  }
  std::vector<TableRows> merged(push.size());
  for (size_t k = 0; k < push.size(); ++k) {
    merged[k] = {push[k].table, ids[k], nullptr, grads[k].data(), /*distinct=*/false};
  }
  const Ticket t = local_->StartRows(merged, pull, queue);
  return local_->Wait(t).status();
}

absl::StatusOr<int64_t> CollectiveStore::Wait(Ticket ticket) {
  if (ticket.number == 0) return int64_t{0};
  // A ticket in the pack being filled: the pack goes now.
  if (pack_.last != 0 && pack_.queue == ticket.queue && ticket.number >= pack_.first) SendPack();
  absl::MutexLock lock(&mu_);
  auto ended = [this, &ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queues_.ended(ticket);
  };
  mu_.Await(absl::Condition(&ended));
  return queues_.Wait(ticket);
}

absl::Status CollectiveStore::Drain() {
  SendPack();
  absl::Status mine;
  {
    absl::MutexLock lock(&mu_);
    auto all_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queues_.all_ended(); };
    mu_.Await(absl::Condition(&all_ended));
    mine = queues_.Clear();
  }
  absl::Status local = local_->Drain();
  return mine.ok() ? local : mine;
}

}  // namespace pstrain::client
