// For fuzz targets of readers that take a path: the input written to a
// file of this process's own in $TMPDIR (or /tmp).
#ifndef PSTRAIN_FUZZ_TEMP_FILE_H_
#define PSTRAIN_FUZZ_TEMP_FILE_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace pstrain::fuzz {

inline std::string WriteTemp(const uint8_t* data, size_t size) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/pstrain-fuzz-" +
                           std::to_string(::getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  return path;
}

}  // namespace pstrain::fuzz

#endif  // PSTRAIN_FUZZ_TEMP_FILE_H_
