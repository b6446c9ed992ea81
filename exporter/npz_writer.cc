#include "exporter/npz_writer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace {

// CRC-32 (ISO-HDLC, reflected 0xEDB88320), as ZIP stores it.
uint32_t Crc32(const std::string& bytes) {
  static const auto* table = [] {
    auto* t = new uint32_t[256];
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

void Put16(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v & 0xFF));
  out->push_back(static_cast<char>((v >> 8) & 0xFF));
}

void Put32(std::string* out, uint32_t v) {
  Put16(out, v & 0xFFFF);
  Put16(out, v >> 16);
}

}  // namespace

std::string NpyBytes(const NpzArray& a) {
  std::vector<std::string> dims;
  for (int64_t d : a.shape) dims.push_back(absl::StrCat(d));
  const std::string shape = a.shape.size() == 1 ? absl::StrCat("(", dims[0], ",)")
                                                : absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
  std::string header =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': ", shape, ", }");
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a
  // multiple of 64 and ended by a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  Put16(&out, static_cast<uint32_t>(header.size()));
  out += header;
  // x86-64 is little-endian: the floats as they are.
  out.append(reinterpret_cast<const char*>(a.values.data()), a.values.size() * sizeof(float));
  return out;
}

absl::StatusOr<std::string> NpzBytes(const std::vector<NpzArray>& arrays) {
  std::string zip, central;
  for (const NpzArray& a : arrays) {
    int64_t n = 1;
    for (int64_t d : a.shape) n *= d;
    if (n != static_cast<int64_t>(a.values.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(a.name, ": ", a.values.size(), " values for a shape of ", n));
    }
    const std::string name = a.name + ".npy";
    const std::string data = NpyBytes(a);
    if (zip.size() + data.size() + name.size() + 30 > 0xFFFFFFFFull) {
      return absl::InvalidArgumentError("the model passes 4 GiB, more than an .npz without ZIP64");
    }
    const uint32_t crc = Crc32(data);
    const uint32_t offset = static_cast<uint32_t>(zip.size());
    // Local file header, then the data, stored.
    Put32(&zip, 0x04034b50);
    Put16(&zip, 20);    // version needed: 2.0
    Put16(&zip, 0);     // flags
    Put16(&zip, 0);     // method: stored
    Put16(&zip, 0);     // time
    Put16(&zip, 0x21);  // date: 1980-01-01
    Put32(&zip, crc);
    Put32(&zip, static_cast<uint32_t>(data.size()));
    Put32(&zip, static_cast<uint32_t>(data.size()));
    Put16(&zip, static_cast<uint32_t>(name.size()));
    Put16(&zip, 0);  // extra
    zip += name;
    zip += data;
    // Its central directory entry.
    Put32(&central, 0x02014b50);
    Put16(&central, 20);  // made by
    Put16(&central, 20);  // needed
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0x21);
    Put32(&central, crc);
    Put32(&central, static_cast<uint32_t>(data.size()));
    Put32(&central, static_cast<uint32_t>(data.size()));
    Put16(&central, static_cast<uint32_t>(name.size()));
    Put16(&central, 0);  // extra
    Put16(&central, 0);  // comment
    Put16(&central, 0);  // disk
    Put16(&central, 0);  // internal attributes
    Put32(&central, 0);  // external attributes
    Put32(&central, offset);
    central += name;
  }
  const uint32_t central_at = static_cast<uint32_t>(zip.size());
  zip += central;
  Put32(&zip, 0x06054b50);
  Put16(&zip, 0);
  Put16(&zip, 0);
  Put16(&zip, static_cast<uint32_t>(arrays.size()));
  Put16(&zip, static_cast<uint32_t>(arrays.size()));
  Put32(&zip, static_cast<uint32_t>(central.size()));
  Put32(&zip, central_at);
  Put16(&zip, 0);  // comment
  return zip;
}

}  // namespace pstrain
