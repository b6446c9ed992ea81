// CRC-32C (Castagnoli), the checksum of TFRecord files and of checkpoint
// shards, and TFRecord's "masked" form of it. Uses the SSE4.2 crc32
// instruction where the CPU has it, a table otherwise; both give the same
// values. Stateless; thread-safe.
#ifndef PSTRAIN_BASE_CRC32C_H_
#define PSTRAIN_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace pstrain {

// The CRC-32C of `n` bytes at `data`, continuing from `crc` (the value
// returned for the bytes before; 0 to start). Crc32c("123456789") is
// 0xE3069283.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// TFRecord's masking: rotate right by 15 bits and add 0xa282ead8, so that a
// CRC stored inside checksummed data does not checksum to itself.
inline uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace pstrain

#endif  // PSTRAIN_BASE_CRC32C_H_
