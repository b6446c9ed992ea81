#include "client/remote_store.h"

#include <utility>

namespace pstrain::client {

RemoteStore::RemoteStore(PsClient* client, std::vector<int64_t> offsets)
    : client_(client), offsets_(std::move(offsets)) {}

absl::Status RemoteStore::WaitUntilReady(absl::Duration timeout) {
  return client_->WaitUntilReady(timeout, /*require_initialized=*/true);
}

absl::StatusOr<int64_t> RemoteStore::ReplicaPushes(int replica) {
  return client_->ReplicaPushes(replica);
}

ParameterStore::Ticket RemoteStore::StartDense(absl::Span<const int> variables,
                                               const float* grads, float* params, Queue queue) {
  std::vector<int> wanted(variables.begin(), variables.end());
  const int64_t number = grads == nullptr ? 0 : push_number();
  return {queue,
          QueueOf(queue).Enqueue([this, wanted = std::move(wanted), grads, params, number] {
            return client_->ExchangeDense(wanted, grads, params, offsets_, number);
          })};
}

ParameterStore::Ticket RemoteStore::StartRows(absl::Span<const TableRows> push,
                                              absl::Span<const TableRows> pull, Queue queue) {
  std::vector<TableRows> pushed(push.begin(), push.end());
  std::vector<TableRows> pulled(pull.begin(), pull.end());
  return {queue, QueueOf(queue).Enqueue(
                     [this, pushed = std::move(pushed),
                      pulled = std::move(pulled)]() -> absl::StatusOr<int64_t> {
                       absl::Status s = client_->ExchangeRows(pushed, pulled);
                       if (!s.ok()) return s;
                       return int64_t{0};
                     })};
}

absl::StatusOr<int64_t> RemoteStore::Wait(Ticket ticket) {
  return QueueOf(ticket.queue).WaitFor(ticket.number);
}

absl::Status RemoteStore::Drain() {
  absl::Status rows = rows_.Drain();
  absl::Status dense = dense_.Drain();
  return dense.ok() ? rows : dense;
}

}  // namespace pstrain::client
