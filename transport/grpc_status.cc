#include "transport/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s, absl::string_view peer,
                            absl::string_view method) {
  if (s.ok()) return absl::OkStatus();
  std::string msg;
  if (!peer.empty()) absl::StrAppend(&msg, peer, ": ");
  if (!method.empty()) absl::StrAppend(&msg, method, ": ");
  absl::StrAppend(&msg, s.error_message());
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), msg);
}

}  // namespace pstrain
