#include "model/blas_kernels.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pstrain::model {
namespace {

// Set by UseTheCpusBlasKernels in the process it executes, so that the
// process can say the kernels were its choice, not the user's.
constexpr char kChosenMark[] = "PSTRAIN_CHOSE_OPENBLAS_CORETYPE";

// Whether OPENBLAS_CORETYPE names kernels (an empty value names none).
bool CoreTypeSet() {
  const char* given = std::getenv("OPENBLAS_CORETYPE");
  return given != nullptr && given[0] != '\0';
}

}  // namespace

VectorLevel KernelLevel(const std::string& corename) {
  if (corename == "SkylakeX" || corename == "Cooperlake" || corename == "SapphireRapids") {
    return VectorLevel::kAvx512;
  }
  if (corename == "Haswell" || corename == "Zen") return VectorLevel::kAvx2;
  return VectorLevel::kBelowAvx2;
}

VectorLevel CpuLevel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    return VectorLevel::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorLevel::kAvx2;
  return VectorLevel::kBelowAvx2;
}

std::string BetterKernels(const std::string& corename, VectorLevel cpu, bool bf16) {
  if (static_cast<int>(KernelLevel(corename)) >= static_cast<int>(cpu)) return "";
  switch (cpu) {
    case VectorLevel::kAvx512:
      return bf16 ? "Cooperlake" : "SkylakeX";
    case VectorLevel::kAvx2:
      return "Haswell";
    case VectorLevel::kBelowAvx2:
      break;
  }
  return "";
}

void UseTheCpusBlasKernels(char** argv) {
  if (CoreTypeSet()) return;
  __builtin_cpu_init();
  const std::string better =
      BetterKernels(openblas_get_corename(), CpuLevel(), __builtin_cpu_supports("avx512bf16"));
  if (better.empty()) return;
  ::setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  ::setenv(kChosenMark, "1", 1);
  ::execv("/proc/self/exe", argv);
  // Not executed again: go on with OpenBLAS's pick, and pass none on.
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv(kChosenMark);
}

std::string DescribeBlas() {
  const std::string corename = openblas_get_corename();
  std::string how;
  if (std::getenv(kChosenMark) != nullptr) {
    how = " (chosen by pstrain: OpenBLAS picked narrower kernels than this CPU runs)";
  } else if (CoreTypeSet()) {
    how = " (OPENBLAS_CORETYPE)";
  }
  return absl::StrCat("blas: ", openblas_get_config(), ", ", corename, " kernels", how);
}

}  // namespace pstrain::model
