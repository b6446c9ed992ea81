// The per-test scratch directory Bazel provides ($TEST_TMPDIR), or /tmp
// outside Bazel. testonly.
#ifndef PSTRAIN_BASE_TESTING_TEMP_DIR_H_
#define PSTRAIN_BASE_TESTING_TEMP_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace pstrain::testing {

inline std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// TempDir()/name, emptied (or made) first.
inline std::string FreshTempDir(const std::string& name) {
  const std::string dir = TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace pstrain::testing

#endif  // PSTRAIN_BASE_TESTING_TEMP_DIR_H_
