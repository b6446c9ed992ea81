// The parameters as one training replica reaches them: the one interface the
// step loop (train/trainer.h) talks to, whatever keeps them. Implementations:
//   RemoteStore     the job's PS over the network (client/remote_store.h);
//   InProcessStore  ShardStores in this process (client/in_process_store.h):
//                   `train --local`, and unit tests of the trainer and the
//                   chief that need a PS's real rules without a network.
// A collective store, where the replicas average their gradients among
// themselves, is a third.
//
// The core is asynchronous, as ps-lite's worker API is: Start* begins an
// exchange and returns a ticket at once; Wait(ticket) blocks until it and
// every exchange started before it on the same queue have ended. Exchanges
// on one queue run in the order started, one after another; the two queues
// (dense slices, table rows) run beside each other, so a step's row pull
// never waits behind its dense round trip. The blocking calls below are thin
// wrappers: Start, then Wait.
//
// Dense exchanges move the model's dense variables between the store and
// flat arrays in the model's layout (variable v's values from offsets[v],
// the offsets the store was created with); table exchanges move embedding
// rows by id. Memory named in a started exchange (gradients, parameters,
// ids, rows) must stay valid and unchanged (parameters: untouched) until its
// ticket has been waited for.
//
// Thread-compatible: one thread starts and waits (the step loop's); the
// store may run exchanges on threads of its own.
#ifndef PSTRAIN_CLIENT_PARAMETER_STORE_H_
#define PSTRAIN_CLIENT_PARAMETER_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace pstrain::client {

// One embedding table's rows in an exchange: for a pull, the rows of `ids`
// go to `out`; for a push, `grads` holds theirs (ids.size() * the table's
// dim floats each; repeated ids add up).
struct TableRows {
  std::string table;
  absl::Span<const int64_t> ids;
  float* out = nullptr;
  const float* grads = nullptr;
  // The ids are distinct (the caller made them so): a store in this
  // process skips merging their rows.
  bool distinct = false;
};

class ParameterStore {
 public:
  enum class Queue { kDense = 0, kRows = 1 };
  // Names a started exchange. A default Ticket names none: waiting for it
  // returns at once.
  struct Ticket {
    Queue queue = Queue::kDense;
    int64_t number = 0;  // 1, 2, ... on its queue
  };

  virtual ~ParameterStore() = default;

  // Blocks until the store serves initialised variables, all of one
  // generation, or `timeout` passes: DeadlineExceeded naming what is still
  // missing. Remote: the PS answer and hold their variables.
  virtual absl::Status WaitUntilReady(absl::Duration timeout) = 0;
  // After WaitUntilReady: the generation served (a new one means the
  // variables were restored from a checkpoint under the replica), and the
  // step of the checkpoint restored (0: created fresh).
  virtual int64_t generation() const = 0;
  virtual int64_t restored_step() const = 0;
  // The pushes the store applied from training replica `replica` (the
  // fewest over every dense slice), kept across restores: where a replica
  // that starts again is in its own schedule. NotFound when the store does
  // not count them (a checkpoint written before the counts, a model
  // without dense variables).
  virtual absl::StatusOr<int64_t> ReplicaPushes(int replica) = 0;
  // Sync: the global step the job ends at; pulls of tensors that reached
  // it no longer wait for other replicas (0: none).
  virtual void set_stop_step(int64_t step) = 0;
  // Gradients the store dropped as stale (sync) among this replica's.
  virtual int64_t dropped_pushes() const = 0;

  // Starts a dense exchange on `queue`: pushes `grads` (null: no push) of
  // `variables` (indices into the model's variables; empty: every one), then
  // pulls their values into `params` (null: no pull). Its result, from
  // Wait: the global step after it.
  virtual Ticket StartDense(absl::Span<const int> variables, const float* grads, float* params,
                            Queue queue = Queue::kDense) = 0;
  // Starts a table exchange on `queue`: pushes the rows of `push`, then
  // pulls those of `pull` (either may be empty; a table at most once in
  // each). Its result, from Wait: 0.
  virtual Ticket StartRows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull,
                           Queue queue = Queue::kRows) = 0;
  // Blocks until `ticket` and every exchange before it on its queue ended.
  // The first error of that queue so far (after an error, exchanges that
  // had not begun are skipped), else the largest global step its exchanges
  // returned. Errors name the part of the store that failed ("ps:1
  // (127.0.0.1:4001): ...").
  virtual absl::StatusOr<int64_t> Wait(Ticket ticket) = 0;

  // Blocks until every exchange started so far has ended or been skipped,
  // then clears the queues' errors, returning the first of them: what a
  // caller does before it frees memory its exchanges name, and before it
  // starts over after an error (a PS lost and restored).
  virtual absl::Status Drain() = 0;

  // The number each dense push started from now on carries: the replica's
  // count of its own pushes once that push is in (its step, 1, 2, ...); 0,
  // the default: not numbered. A store that applies pushes in several places
  // (slices, PS) applies a numbered push at most once in each
  // (FrameHeader.push_number), so a replica that resumes from the fewest
  // count over them, or sends a push again, applies nothing twice.
  void set_push_number(int64_t number) { push_number_ = number; }

  // Blocking exchanges: Start, then Wait.
  absl::StatusOr<int64_t> PullAll(float* params);
  absl::Status PushAll(const float* grads);
  absl::StatusOr<int64_t> PushPullAll(const float* grads, float* params);
  absl::StatusOr<int64_t> PushPullVariables(absl::Span<const int> variables, const float* grads,
                                            float* params);
  absl::Status PullRows(absl::Span<const TableRows> tables);
  absl::Status PushRows(absl::Span<const TableRows> tables);
  absl::Status PushPullRows(absl::Span<const TableRows> push, absl::Span<const TableRows> pull);

 protected:
  int64_t push_number() const { return push_number_; }

 private:
  int64_t push_number_ = 0;
};

// The queues' records of a store that runs its exchanges itself, one queue's
// in the order started (InProcessStore, CollectiveStore): each queue's
// tickets, the last that ended, its first error (after which its exchanges
// are skipped, as a queue of rounds skips them) and the largest global step
// its exchanges returned. Thread-compatible: a store whose exchanges end on
// another thread guards it.
class EndedQueues {
 public:
  using Queue = ParameterStore::Queue;
  using Ticket = ParameterStore::Ticket;
  bool failed(Queue queue) const { return !queues_[static_cast<int>(queue)].error.ok(); }
  // The next ticket of `queue`, for an exchange that ends later (End).
  Ticket Start(Queue queue);
  // `ticket`'s exchange, and every earlier one of its queue, ended with
  // `result` (the last one's).
  void End(Ticket ticket, const absl::StatusOr<int64_t>& result);
  // Start and End at once: an exchange that ended as it was started.
  Ticket Record(Queue queue, const absl::StatusOr<int64_t>& result);
  bool ended(Ticket ticket) const {
    return queues_[static_cast<int>(ticket.queue)].ended >= ticket.number;
  }
  // Whether every ticket started has ended.
  bool all_ended() const;
  // What ParameterStore::Wait returns for `ticket`, once it has ended.
  absl::StatusOr<int64_t> Wait(Ticket ticket) const;
  // Clears both queues' errors, returning the first: the dense queue's,
  // else the rows'.
  absl::Status Clear();

 private:
  struct State {
    int64_t started = 0;
    int64_t ended = 0;
    absl::Status error;
    int64_t max_step = 0;
  };
  State queues_[2];
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_PARAMETER_STORE_H_
