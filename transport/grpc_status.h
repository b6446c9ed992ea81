// Conversions between absl::Status and grpc::Status. The only place where
// Status crosses the wire. Stateless; thread-safe.
#ifndef PSTRAIN_TRANSPORT_GRPC_STATUS_H_
#define PSTRAIN_TRANSPORT_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace pstrain {

// Same code and message. The numeric codes of the two libraries agree.
grpc::Status ToGrpcStatus(const absl::Status& s);

// Same code and message; `peer` (for example "ps:1 (127.0.0.1:4001)") and
// `method` prefix the message when non-empty so the error names who failed:
// "ps:1 (127.0.0.1:4001): Pull: <message>".
absl::Status FromGrpcStatus(const grpc::Status& s, absl::string_view peer = "",
                            absl::string_view method = "");

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_GRPC_STATUS_H_
