// Early-return helpers for absl::Status and absl::StatusOr, which Abseil
// 20220623 does not provide. Header-only; no state.
#ifndef PSTRAIN_BASE_STATUS_MACROS_H_
#define PSTRAIN_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status) once; returns it from the enclosing
// function if it is not OK.
#define PSTRAIN_RETURN_IF_ERROR(expr)                       \
  do {                                                      \
    ::absl::Status pstrain_status_ = (expr);                \
    if (!pstrain_status_.ok()) return pstrain_status_;      \
  } while (0)

#define PSTRAIN_STATUS_CONCAT_INNER_(a, b) a##b
#define PSTRAIN_STATUS_CONCAT_(a, b) PSTRAIN_STATUS_CONCAT_INNER_(a, b)

// Evaluates `rexpr` (an absl::StatusOr<T>) once; on error returns its status,
// otherwise moves the value into `lhs` (which may be a declaration).
#define PSTRAIN_ASSIGN_OR_RETURN(lhs, rexpr)                                  \
  PSTRAIN_ASSIGN_OR_RETURN_IMPL_(                                             \
      PSTRAIN_STATUS_CONCAT_(pstrain_statusor_, __LINE__), lhs, rexpr)

#define PSTRAIN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = std::move(statusor).value()

#endif  // PSTRAIN_BASE_STATUS_MACROS_H_
