#include "data/idx_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/input_error.h"

namespace pstrain::data {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// Reads exactly n bytes; returns the count read (less at end of file) or -1.
int64_t ReadFully(gzFile f, void* buf, int64_t n) {
  int64_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
    int got = gzread(f, static_cast<char*>(buf) + done, chunk);
    if (got < 0) return -1;
    if (got == 0) break;
    done += got;
  }
  return done;
}

// A bad record of an IDX file, in the input's one form
// (data/input_error.h): "PATH at byte N: why", N counted in the
// uncompressed stream.
absl::Status BadIdx(const std::string& path, int64_t at, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(path, " at byte ", at, ": ", why));
}

// Opens `path` and reads its header into out->dims; returns the file, left
// at the first data byte, and the number of data bytes in `total`.
absl::StatusOr<std::unique_ptr<gzFile_s, GzCloser>> OpenAndReadHeader(const std::string& path,
                                                                      IdxArray* out,
                                                                      int64_t* total) {
  absl::StatusOr<int> fd = OpenInputFile(path);
  if (!fd.ok()) return fd.status();
  // gzdopen reads plain files transparently.
  std::unique_ptr<gzFile_s, GzCloser> f(gzdopen(*fd, "rb"));
  if (f == nullptr) {
    ::close(*fd);
    return CannotReadInput(path, ENOMEM);
  }
  uint8_t magic[4];
  int64_t got = ReadFully(f.get(), magic, 4);
  if (got < 0) return BadIdx(path, 0, "gzip stream is corrupt");
  if (got < 4) return BadIdx(path, 0, "shorter than the 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0) {
    return BadIdx(path, 0,
                  absl::StrCat("bad magic number 0x", absl::Hex(magic[0], absl::kZeroPad2),
                               absl::Hex(magic[1], absl::kZeroPad2),
                               absl::Hex(magic[2], absl::kZeroPad2),
                               absl::Hex(magic[3], absl::kZeroPad2), " (expected 0x0000TTRR)"));
  }
  if (magic[2] != 0x08) {
    return BadIdx(path, 2,
                  absl::StrCat("data type 0x", absl::Hex(magic[2], absl::kZeroPad2),
                               " is not unsigned byte (0x08)"));
  }
  const int rank = magic[3];
  if (rank < 1 || rank > 4) return BadIdx(path, 3, absl::StrCat("rank ", rank, " is outside 1..4"));
  *total = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t at = 4 + 4 * i;
    uint8_t d[4];
    got = ReadFully(f.get(), d, 4);
    if (got < 0) return BadIdx(path, at, "gzip stream is corrupt");
    if (got < 4) return BadIdx(path, at, absl::StrCat("truncated in dimension ", i, " of the header"));
    int64_t dim = (int64_t{d[0]} << 24) | (d[1] << 16) | (d[2] << 8) | d[3];
    if (dim == 0) return BadIdx(path, at, absl::StrCat("dimension ", i, " is zero"));
    out->dims.push_back(dim);
    // Checked before multiplying: four 32-bit dimensions overflow 64 bits.
    if (dim > (int64_t{1} << 34) / *total) return BadIdx(path, at, "larger than 16 GiB");
    *total *= dim;
  }
  return f;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path) {
  IdxArray out;
  int64_t total = 0;
  auto f = OpenAndReadHeader(path, &out, &total);
  if (!f.ok()) return f.status();
  return out.dims;
}

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  IdxArray out;
  int64_t total = 0;
  auto opened = OpenAndReadHeader(path, &out, &total);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<gzFile_s, GzCloser> f = *std::move(opened);
  const int64_t data_start = 4 + 4 * static_cast<int64_t>(out.dims.size());
  int64_t got = 0;
  // The data grows as it is read, 64 MiB at a time, so a short file whose
  // header promises gigabytes costs only what it holds.
  constexpr int64_t kChunk = int64_t{64} << 20;
  int64_t have = 0;
  while (have < total) {
    const int64_t want = std::min(kChunk, total - have);
    out.values.resize(have + want);
    got = ReadFully(f.get(), out.values.data() + have, want);
    if (got < 0) return BadIdx(path, data_start + have, "gzip stream is corrupt");
    have += got;
    if (got < want) {
      return BadIdx(path, data_start + have,
                    absl::StrCat("truncated: header promises ", total, " data bytes, file has ",
                                 have));
    }
  }
  uint8_t extra;
  got = ReadFully(f.get(), &extra, 1);
  if (got != 0) {
    return BadIdx(path, data_start + total,
                  got < 0 ? "gzip stream is corrupt"
                          : "has bytes after the data its header describes");
  }
  return out;
}

absl::Status WriteIdxFile(const std::string& path, const IdxArray& array) {
  const size_t rank = array.dims.size();
  if (rank < 1 || rank > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("IDX file ", path, ": rank ", rank, " is outside 1..4"));
  }
  int64_t total = 1;
  std::string header = {0, 0, 0x08, static_cast<char>(rank)};
  for (int64_t d : array.dims) {
    if (d < 1 || d > 0xffffffffLL) {
      return absl::InvalidArgumentError(
          absl::StrCat("IDX file ", path, ": dimension ", d, " is outside 1..2^32-1"));
    }
    total *= d;
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<char>(d >> shift));
  }
  if (static_cast<int64_t>(array.values.size()) != total) {
    return absl::InvalidArgumentError(absl::StrCat("IDX file ", path, ": ", array.values.size(),
                                                   " values for dimensions of ", total));
  }
  const std::string tmp = path + ".tmp";
  const bool gz = absl::EndsWith(path, ".gz");
  // "wb6": zlib's default level; "wbT": plain, through the same calls.
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(tmp.c_str(), gz ? "wb6" : "wbT"));
  auto failed = [&](absl::string_view what) {
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot write IDX file ", path, ": ", what, ": ", std::strerror(errno)));
  };
  if (f == nullptr) return failed("open");
  if (gzwrite(f.get(), header.data(), static_cast<unsigned>(header.size())) !=
      static_cast<int>(header.size())) {
    return failed("write");
  }
  for (int64_t done = 0; done < total;) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(total - done, 1 << 30));
    if (gzwrite(f.get(), array.values.data() + done, chunk) != static_cast<int>(chunk)) {
      return failed("write");
    }
    done += chunk;
  }
  if (gzclose(f.release()) != Z_OK) return failed("close");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return failed("rename");
  return absl::OkStatus();
}

}  // namespace pstrain::data
