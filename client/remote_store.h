// The parameter store of a job with PS (client/parameter_store.h): the PS
// over the network, through a PsClient's data path. Exchanges run on two
// RoundQueues (client/round_queue.h), one per queue, each a thread of its
// own: the PsClient's calls block, and the step loop computes while they
// are in flight. Thread-compatible, as ParameterStore.
#ifndef PSTRAIN_CLIENT_REMOTE_STORE_H_
#define PSTRAIN_CLIENT_REMOTE_STORE_H_

#include <memory>
#include <vector>

#include "client/parameter_store.h"
#include "client/ps_client.h"
#include "client/round_queue.h"

namespace pstrain::client {

class RemoteStore final : public ParameterStore {
 public:
  // Exchanges through `client` (which must outlive the store, and which no
  // one else uses for dense slices meanwhile), between the PS and arrays
  // laid out by `offsets` (variable v from offsets[v], in the placement's
  // variable order).
  RemoteStore(PsClient* client, std::vector<int64_t> offsets);
  // Ends (or skips, after an error) the exchanges still queued.
  ~RemoteStore() override = default;

  absl::Status WaitUntilReady(absl::Duration timeout) override;
  int64_t generation() const override { return client_->generation(); }
  int64_t restored_step() const override { return client_->restored_step(); }
  absl::StatusOr<int64_t> ReplicaPushes(int replica) override;
  void set_stop_step(int64_t step) override { client_->set_stop_step(step); }
  int64_t dropped_pushes() const override { return client_->dropped_pushes(); }

  Ticket StartDense(absl::Span<const int> variables, const float* grads, float* params,
                    Queue queue) override;
  Ticket StartRows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull,
                   Queue queue) override;
  absl::StatusOr<int64_t> Wait(Ticket ticket) override;
  absl::Status Drain() override;

 private:
  RoundQueue& QueueOf(Queue q) { return q == Queue::kDense ? dense_ : rows_; }

  PsClient* const client_;
  const std::vector<int64_t> offsets_;
  // Declared last: destroyed first, while what their rounds use is alive.
  RoundQueue rows_;
  RoundQueue dense_;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_REMOTE_STORE_H_
