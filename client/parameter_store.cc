#include "client/parameter_store.h"

#include <algorithm>
#include <utility>

namespace pstrain::client {

absl::StatusOr<int64_t> ParameterStore::PullAll(float* params) {
  return Wait(StartDense({}, nullptr, params));
}

absl::Status ParameterStore::PushAll(const float* grads) {
  return Wait(StartDense({}, grads, nullptr)).status();
}

absl::StatusOr<int64_t> ParameterStore::PushPullAll(const float* grads, float* params) {
  return Wait(StartDense({}, grads, params));
}

absl::StatusOr<int64_t> ParameterStore::PushPullVariables(absl::Span<const int> variables,
                                                          const float* grads, float* params) {
  return Wait(StartDense(variables, grads, params));
}

absl::Status ParameterStore::PullRows(absl::Span<const TableRows> tables) {
  return Wait(StartRows({}, tables)).status();
}

absl::Status ParameterStore::PushRows(absl::Span<const TableRows> tables) {
  return Wait(StartRows(tables, {})).status();
}

absl::Status ParameterStore::PushPullRows(absl::Span<const TableRows> push,
                                          absl::Span<const TableRows> pull) {
  return Wait(StartRows(push, pull)).status();
}

ParameterStore::Ticket EndedQueues::Start(Queue queue) {
  return {queue, ++queues_[static_cast<int>(queue)].started};
}

void EndedQueues::End(Ticket ticket, const absl::StatusOr<int64_t>& result) {
  State& q = queues_[static_cast<int>(ticket.queue)];
  if (!result.ok() && q.error.ok()) q.error = result.status();
  if (result.ok()) q.max_step = std::max(q.max_step, *result);
  q.ended = ticket.number;
}

ParameterStore::Ticket EndedQueues::Record(Queue queue, const absl::StatusOr<int64_t>& result) {
  const Ticket ticket = Start(queue);
  End(ticket, result);
  return ticket;
}

bool EndedQueues::all_ended() const {
  return queues_[0].ended >= queues_[0].started && queues_[1].ended >= queues_[1].started;
}

absl::StatusOr<int64_t> EndedQueues::Wait(Ticket ticket) const {
  const State& q = queues_[static_cast<int>(ticket.queue)];
  if (!q.error.ok()) return q.error;
  return q.max_step;
}

absl::Status EndedQueues::Clear() {
  absl::Status rows = std::exchange(queues_[1].error, absl::OkStatus());
  absl::Status dense = std::exchange(queues_[0].error, absl::OkStatus());
  return dense.ok() ? rows : dense;
}

}  // namespace pstrain::client
