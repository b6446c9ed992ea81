#include "client/parameter_store.h"

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

}  // namespace pstrain::client
