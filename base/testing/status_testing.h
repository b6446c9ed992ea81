// GoogleTest helpers for absl::Status, which Abseil 20220623 lacks. testonly.
#ifndef PSTRAIN_BASE_TESTING_STATUS_TESTING_H_
#define PSTRAIN_BASE_TESTING_STATUS_TESTING_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace pstrain::testing_internal {
inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace pstrain::testing_internal

#define EXPECT_OK(expr) \
  EXPECT_TRUE(::pstrain::testing_internal::GetStatus(expr).ok()) \
      << ::pstrain::testing_internal::GetStatus(expr)
#define ASSERT_OK(expr) \
  ASSERT_TRUE(::pstrain::testing_internal::GetStatus(expr).ok()) \
      << ::pstrain::testing_internal::GetStatus(expr)

#define PSTRAIN_TESTING_CONCAT_INNER_(a, b) a##b
#define PSTRAIN_TESTING_CONCAT_(a, b) PSTRAIN_TESTING_CONCAT_INNER_(a, b)
// ASSERT_OK_AND_ASSIGN(auto x, StatusOrExpr());
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                   \
  auto PSTRAIN_TESTING_CONCAT_(statusor_, __LINE__) = (rexpr);             \
  ASSERT_TRUE(PSTRAIN_TESTING_CONCAT_(statusor_, __LINE__).ok())           \
      << PSTRAIN_TESTING_CONCAT_(statusor_, __LINE__).status();            \
  lhs = std::move(PSTRAIN_TESTING_CONCAT_(statusor_, __LINE__)).value()

#endif  // PSTRAIN_BASE_TESTING_STATUS_TESTING_H_
