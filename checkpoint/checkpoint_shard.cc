#include "checkpoint/checkpoint_shard.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/crc32c.h"
#include "base/status_macros.h"
#include "base/varint.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace pstrain::ckpt {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'C', 'K', 'P', 'T', '0', '1'};

// Appends to a file being written, keeping the CRC-32C of everything
// written.
class ShardFile {
 public:
  explicit ShardFile(WritableFile* file) : file_(file) {}
  absl::Status Write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    crc_ = Crc32c(p, n, crc_);
    bytes_ += static_cast<int64_t>(n);
    return file_->Append(absl::string_view(p, n));
  }
  // One record whose bytes are the pieces back to back.
  absl::Status Record(std::initializer_list<absl::string_view> pieces) {
    uint8_t len[8], crc[4];
    uint64_t n = 0;
    uint32_t c = 0;
    for (absl::string_view p : pieces) {
      n += p.size();
      c = Crc32c(p.data(), p.size(), c);
    }
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    c = MaskCrc32c(c);
    for (int i = 0; i < 4; ++i) crc[i] = static_cast<uint8_t>(c >> (8 * i));
    if (absl::Status s = Write(len, 8); !s.ok()) return s;
    for (absl::string_view p : pieces) {
      if (absl::Status s = Write(p.data(), p.size()); !s.ok()) return s;
    }
    return Write(crc, 4);
  }
  int64_t bytes() const { return bytes_; }
  uint32_t crc() const { return crc_; }

 private:
  WritableFile* const file_;
  uint32_t crc_ = 0;
  int64_t bytes_ = 0;
};

// Parses tensor record `body[0, n)` into `t`, at any size. protobuf parses
// at most 2 GiB, and a table's values and slots (the data field, 4) can be
// more: the fields are walked, the data field's bytes are moved out of
// `body` into `t` (which takes `body`'s buffer), and the rest is parsed as
// usual. False when the record is not a well-formed TensorCheckpoint.
bool ParseTensorRecord(std::string* body, uint64_t n, v1::TensorCheckpoint* t) {
  constexpr uint64_t kMaxParse = std::numeric_limits<int>::max();
  if (n <= kMaxParse) return t->ParseFromArray(body->data(), static_cast<int>(n));
  const absl::string_view record(body->data(), n);
  size_t at = 0;
  auto varint = [&](uint64_t* v) { return ReadVarint(record, &at, v); };
  std::string rest;  // every field but data
  uint64_t data_at = 0, data_len = 0;
  bool has_data = false;
  while (at < n) {
    const uint64_t start = at;
    uint64_t tag = 0, len = 0, skip = 0;
    if (!varint(&tag)) return false;
    switch (tag & 7) {
      case 0:  // varint
        if (!varint(&skip)) return false;
        break;
      case 1:  // 64-bit
        if (n - at < 8) return false;
        at += 8;
        break;
      case 5:  // 32-bit
        if (n - at < 4) return false;
        at += 4;
        break;
      case 2:  // length-delimited
        if (!varint(&len) || len > n - at) return false;
        if ((tag >> 3) == v1::TensorCheckpoint::kDataFieldNumber) {
          data_at = at;
          data_len = len;
          has_data = true;
          at += len;
          continue;
        }
        at += len;
        break;
      default:
        return false;
    }
    rest.append(body->data() + start, at - start);
  }
  if (rest.size() > kMaxParse || !t->ParseFromString(rest)) return false;
  if (has_data) {
    body->resize(data_at + data_len);
    body->erase(0, data_at);
    t->mutable_data()->swap(*body);
  }
  return true;
}

}  // namespace

absl::StatusOr<ShardWritten> WriteShard(const std::string& path, ShardContents shard, Env* env) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(dir));
  const std::string tmp = path + ".tmp";
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, env->NewWritableFile(tmp));
  ShardFile file(out.get());
  shard.header.set_num_tensors(static_cast<int32_t>(shard.tensors.size()));
  absl::Status s = file.Write(kMagic, sizeof(kMagic));
  if (s.ok()) s = file.Record({shard.header.SerializeAsString()});
  for (size_t i = 0; s.ok() && i < shard.tensors.size(); ++i) {
    // The tensor's other fields, then its data field (4, length-delimited)
    // written from where it lies: the same protobuf encoding without
    // copying the bytes into one serialised string.
    v1::TensorCheckpoint& t = shard.tensors[i];
    std::string data;
    data.swap(*t.mutable_data());
    std::string head = t.SerializeAsString();
    if (!data.empty()) {
      using google::protobuf::io::CodedOutputStream;
      uint8_t field[16];
      uint8_t* end = CodedOutputStream::WriteTagToArray(
          google::protobuf::internal::WireFormatLite::MakeTag(
              v1::TensorCheckpoint::kDataFieldNumber,
              google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED),
          field);
      end = CodedOutputStream::WriteVarint64ToArray(data.size(), end);
      head.append(reinterpret_cast<const char*>(field), end - field);
    }
    s = file.Record({head, data});
  }
  // Whole and on stable storage under its temporary name, then renamed
  // into place, and the rename made durable: a crash leaves no file or the
  // whole file.
  if (s.ok()) s = out->Sync();
  const absl::Status closed = out->Close();
  if (s.ok()) s = closed;
  if (s.ok()) s = env->RenameFile(tmp, path);
  if (!s.ok()) {
    env->RemoveFile(tmp).IgnoreError();
    return s;
  }
  // As for any rename: a directory that cannot be synced still holds it.
  env->SyncDir(dir).IgnoreError();
  return ShardWritten{file.bytes(), file.crc()};
}

absl::StatusOr<ShardContents> ReadShard(const std::string& path, Env* env) {
  // Record by record through one reused buffer: a GiB-sized shard is never
  // held whole beside the tensors parsed from it.
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> opened, env->NewSequentialFile(path));
  SequentialFile& in = *opened;
  const uint64_t size = in.size();
  uint64_t at = 0;
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": ", what));
  };
  // Reads exactly n bytes at the current position.
  auto read_exactly = [&](char* dst, uint64_t n) -> absl::Status {
    while (n > 0) {
      PSTRAIN_ASSIGN_OR_RETURN(const size_t got,
                               in.Read(dst, std::min<uint64_t>(n, uint64_t{1} << 30)));
      if (got == 0) return bad("cut short");
      dst += got;
      n -= got;
      at += got;
    }
    return absl::OkStatus();
  };
  char magic[sizeof(kMagic)];
  if (size < sizeof(kMagic) || !read_exactly(magic, sizeof(magic)).ok() ||
      std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return bad("not a checkpoint shard (bad magic)");
  }
  std::string body;
  // Record i: 0 is the header, i >= 1 is tensor i - 1.
  auto next = [&](int i, google::protobuf::MessageLite* out) -> absl::Status {
    const std::string what = i == 0 ? "header" : absl::StrCat("tensor ", i - 1);
    unsigned char len[8];
    if (size - at < 8) return bad(absl::StrCat(what, ": cut short"));
    PSTRAIN_RETURN_IF_ERROR(read_exactly(reinterpret_cast<char*>(len), 8));
    uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | len[k];
    if (n > size - at || size - at - n < 4) return bad(absl::StrCat(what, ": cut short"));
    body.resize(n + 4);
    PSTRAIN_RETURN_IF_ERROR(read_exactly(body.data(), n + 4));
    uint32_t crc = 0;
    for (int k = 3; k >= 0; --k) crc = (crc << 8) | static_cast<unsigned char>(body[n + k]);
    if (UnmaskCrc32c(crc) != Crc32c(body.data(), n)) {
      v1::TensorCheckpoint t;
      const bool named = i > 0 && ParseTensorRecord(&body, n, &t) && !t.key().empty();
      return bad(
          absl::StrCat(what, named ? absl::StrCat(" (", t.key(), ")") : "", ": checksum mismatch"));
    }
    const bool parsed = i == 0
                            ? n <= static_cast<uint64_t>(std::numeric_limits<int>::max()) &&
                                  out->ParseFromArray(body.data(), static_cast<int>(n))
                            : ParseTensorRecord(&body, n, static_cast<v1::TensorCheckpoint*>(out));
    if (!parsed) return bad(absl::StrCat(what, ": does not parse"));
    return absl::OkStatus();
  };
  ShardContents shard;
  PSTRAIN_RETURN_IF_ERROR(next(0, &shard.header));
  shard.tensors.resize(std::max(shard.header.num_tensors(), 0));
  for (int i = 0; i < shard.header.num_tensors(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(next(i + 1, &shard.tensors[i]));
  }
  if (at != size) {
    return bad(absl::StrCat(size - at, " bytes after the ", shard.header.num_tensors(),
                            " tensors the header announces"));
  }
  return shard;
}

absl::Status CheckTableRecord(const v1::TensorCheckpoint& t, int num_slots, int64_t dim) {
  if (t.dim() != dim) {
    return absl::FailedPreconditionError(
        absl::StrCat("table ", t.key(), " has rows of dim ", t.dim(), ", not ", dim));
  }
  if (t.row_updates_size() != t.row_ids_size()) {
    return absl::DataLossError(absl::StrCat("table ", t.key(), " has ", t.row_ids_size(),
                                            " row ids but ", t.row_updates_size(),
                                            " update counts"));
  }
  const int64_t need = int64_t{t.row_ids_size()} * dim * (1 + num_slots) * 4;
  if (static_cast<int64_t>(t.data().size()) != need) {
    return absl::DataLossError(absl::StrCat("table ", t.key(), " holds ", t.data().size(),
                                            " bytes; its ", t.row_ids_size(), " rows of dim ", dim,
                                            " with ", num_slots, " optimizer slots take ", need));
  }
  return absl::OkStatus();
}

}  // namespace pstrain::ckpt
