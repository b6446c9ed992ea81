// How a replica's requests on the Exchange stream name and carry dense
// slices and table rows, and how it reads the PS's answers
// (proto/ps_service.proto: FrameHeader's push and pull refs, the payload).
// Apart from the calls that send them (client/ps_client.h), as TensorFlow
// keeps tensor coding apart from call logic. Stateless: the versions a push
// sends and the versions an answer brings back are the caller's to keep.
//
// A request's payload is, in order: the ids of every table ref that sends
// them (push refs, then pull refs; TensorRef.id_count), then each pushed
// tensor's gradient bytes. Gradients go from the caller's memory without a
// copy where they lie in few runs, else gathered into pooled buffers; on a
// bfloat16 wire they are narrowed into pooled buffers (base/bfloat16.h).
// Memory named in a request (gradients) must stay unchanged until the
// request has been written; answers land in the caller's arrays.
#ifndef PSTRAIN_CLIENT_FRAME_CODING_H_
#define PSTRAIN_CLIENT_FRAME_CODING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "client/ps_stream.h"
#include "transport/wire_frame.h"
#include "proto/ps_service.pb.h"

namespace pstrain::client {

// One dense slice in a request to its PS.
struct DenseSlice {
  std::string key;               // SliceDef::key()
  int64_t bytes = 0;             // float32 bytes of its values
  int64_t version = 0;           // push: the version its gradient came from
  const float* grads = nullptr;  // its gradient; null: not pushed
  float* values = nullptr;       // where its pulled values go; null: not pulled
};

// One table's rows in a request to one PS.
struct TableRef {
  std::string table;
  int64_t dim = 0;                  // floats per row
  absl::Span<const int64_t> ids;    // the rows this PS owns
  // Where row k of `ids` lies in the caller's array (rows of dim floats):
  // at positions[k]; empty: at k.
  absl::Span<const size_t> positions;
  int64_t version = 0;              // push: the version the rows came from
  const float* grads = nullptr;     // push: the gradient rows
  float* out = nullptr;             // pull: where the rows go
};

// Adds `slices` to request `h`: a push ref (key, bytes on the wire,
// version) and the gradient's bytes for each slice with grads, a pull ref
// for each with values and, in `reply_into`, where each pulled slice's
// bytes go (client/ps_stream.h). With `bfloat16`, gradients are narrowed
// into `pool`'s buffers and values travel as bfloat16 (into the first half
// of their floats; DecodeDense widens them).
void EncodeDense(absl::Span<const DenseSlice> slices, bool bfloat16, BufferPool& pool,
                 v1::FrameHeader* h, std::vector<grpc::Slice>* payload, ReplyInto* reply_into);

// Reads answer `f` to a request EncodeDense built from `slices`: each
// pulled slice's values into place (widened from bfloat16) and its version
// into `versions` (by slice index; left as they are for slices not
// pulled). Internal naming `ps` and the slice when the answer does not
// match the request.
absl::Status DecodeDense(const DecodedFrame& f, absl::Span<const DenseSlice> slices,
                         bool bfloat16, absl::string_view ps, std::vector<int64_t>* versions);

// Adds the table refs of a request to one PS: `push` (their ids, versions
// and gradient rows) and `pull` (their ids), ids first as the layout
// above says. Returns the bytes the pulled rows take as float32.
int64_t EncodeRows(absl::Span<const TableRef> push, absl::Span<const TableRef> pull,
                   bool bfloat16, BufferPool& pool, v1::FrameHeader* h,
                   std::vector<grpc::Slice>* payload);

// Reads answer `f` to a request whose pulled refs were `pull`: each
// table's rows into place and its version into `versions` (by index into
// `pull`). Internal naming `ps` when the answer's bytes do not match.
absl::Status DecodeRows(const DecodedFrame& f, absl::Span<const TableRef> pull, bool bfloat16,
                        absl::string_view ps, std::vector<int64_t>* versions);

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_FRAME_CODING_H_
