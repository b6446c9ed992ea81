// Consistency modes of a job (DESIGN.md "Consistency modes"), as written in
// flags, model configs and CreateVariables: "async", "sync", "ssp:S".
// Plain data.
#ifndef PSTRAIN_CLUSTER_CONSISTENCY_H_
#define PSTRAIN_CLUSTER_CONSISTENCY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

struct Consistency {
  enum class Mode { kAsync, kSync, kSsp };
  Mode mode = Mode::kAsync;
  int64_t staleness = 0;  // ssp only: S

  static Consistency Async() { return {Mode::kAsync, 0}; }
  static Consistency Sync() { return {Mode::kSync, 0}; }
  static Consistency Ssp(int64_t staleness) { return {Mode::kSsp, staleness}; }

  bool async() const { return mode == Mode::kAsync; }
  bool sync() const { return mode == Mode::kSync; }

  // "async", "sync" or "ssp:S".
  std::string ToString() const;
  bool operator==(const Consistency& o) const {
    return mode == o.mode && staleness == o.staleness;
  }
  bool operator!=(const Consistency& o) const { return !(*this == o); }
};

// InvalidArgument naming the text for anything else (S must be an integer in
// [0, 1000000]).
absl::StatusOr<Consistency> ParseConsistency(absl::string_view text);

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_CONSISTENCY_H_
