// IDX files, plain or gzip.
#include <cstdint>

#include "data/idx_reader.h"
#include "fuzz/temp_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto idx = pstrain::data::ReadIdxFile(pstrain::fuzz::WriteTemp(data, size));
  if (idx.ok()) {
    size_t total = 1;
    for (int64_t d : idx->dims) total *= static_cast<size_t>(d);
    if (total != idx->values.size()) __builtin_trap();
  }
  return 0;
}
