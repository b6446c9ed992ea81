#ifndef PSTRAIN_MODEL_BLAS_KERNELS_H_
#define PSTRAIN_MODEL_BLAS_KERNELS_H_

// Which OpenBLAS kernels a process computes with.
//
// Debian 12's OpenBLAS (0.3.21, built for every x86-64 core it knows) picks
// its kernels when it is loaded, from the CPU's vendor, family and model. A
// CPU newer than the library is not in its list and falls back to the SSE3
// kernels ("Prescott"): on an Emerald Rapids Xeon (family 6, model 207), a
// single-thread sgemm runs at 18 GFLOP/s instead of 70-110 with the
// AVX-512 kernels the same CPU runs when told to. OPENBLAS_CORETYPE chooses
// them, but it is read once, as the library loads, before main().
//
// So the pstrain binary checks first thing: when OPENBLAS_CORETYPE is not
// set and the kernels OpenBLAS picked use a narrower instruction set than
// the CPU offers, it sets OPENBLAS_CORETYPE to the kernels of that set and
// executes itself again (same process, arguments and environment besides).
// Every task it starts inherits the setting. A user's own OPENBLAS_CORETYPE
// is always left as given.

#include <string>

namespace pstrain::model {

// The widest vector instruction set a kernel family uses, and the CPU's.
enum class VectorLevel { kBelowAvx2 = 0, kAvx2 = 1, kAvx512 = 2 };

// The level of OpenBLAS's kernels by their name (openblas_get_corename():
// "Haswell", "Zen" -> kAvx2; "SkylakeX", "Cooperlake", "SapphireRapids" ->
// kAvx512; any other -> kBelowAvx2).
VectorLevel KernelLevel(const std::string& corename);

// This CPU's level: AVX-512 F, BW, CD, DQ and VL; else AVX2 with FMA; else
// below (as the running OS enables them).
VectorLevel CpuLevel();

// The OPENBLAS_CORETYPE to ask for when OpenBLAS picked `corename` on a
// CPU of level `cpu` with (`bf16`) or without AVX-512 BF16: "" when the
// pick is already as wide as the CPU; else "Cooperlake" (AVX-512 with
// BF16), "SkylakeX" (AVX-512) or "Haswell" (AVX2).
std::string BetterKernels(const std::string& corename, VectorLevel cpu, bool bf16);

// The check described above. Call it before anything else in main() (it
// may replace the process). Returns when nothing needs changing or when
// executing again failed (the process then goes on with OpenBLAS's pick).
void UseTheCpusBlasKernels(char** argv);

// "blas: OpenBLAS 0.3.21 ... DYNAMIC_ARCH ... Cooperlake ..., Cooperlake
// kernels (chosen by pstrain: ...)": the library's configuration, its
// kernels and who chose them (OpenBLAS, OPENBLAS_CORETYPE or pstrain).
std::string DescribeBlas();

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_BLAS_KERNELS_H_
