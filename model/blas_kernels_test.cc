#include "model/blas_kernels.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

TEST(BlasKernelsTest, KernelLevelsByName) {
  EXPECT_EQ(KernelLevel("Prescott"), VectorLevel::kBelowAvx2);
  EXPECT_EQ(KernelLevel("Sandybridge"), VectorLevel::kBelowAvx2);
  EXPECT_EQ(KernelLevel("Haswell"), VectorLevel::kAvx2);
  EXPECT_EQ(KernelLevel("Zen"), VectorLevel::kAvx2);
  EXPECT_EQ(KernelLevel("SkylakeX"), VectorLevel::kAvx512);
  EXPECT_EQ(KernelLevel("Cooperlake"), VectorLevel::kAvx512);
  EXPECT_EQ(KernelLevel("SapphireRapids"), VectorLevel::kAvx512);
}

TEST(BlasKernelsTest, AsksForWiderKernelsOnlyWhenThePickIsNarrowerThanTheCpu) {
  // An AVX-512 CPU OpenBLAS 0.3.21 does not know (Emerald Rapids).
  EXPECT_EQ(BetterKernels("Prescott", VectorLevel::kAvx512, true), "Cooperlake");
  EXPECT_EQ(BetterKernels("Prescott", VectorLevel::kAvx512, false), "SkylakeX");
  // Zen 4 (AVX-512) picked as Zen.
  EXPECT_EQ(BetterKernels("Zen", VectorLevel::kAvx512, true), "Cooperlake");
  EXPECT_EQ(BetterKernels("Core2", VectorLevel::kAvx2, false), "Haswell");
  // Picks as wide as the CPU, or CPUs below AVX2: left alone.
  EXPECT_EQ(BetterKernels("SkylakeX", VectorLevel::kAvx512, false), "");
  EXPECT_EQ(BetterKernels("SapphireRapids", VectorLevel::kAvx512, true), "");
  EXPECT_EQ(BetterKernels("Haswell", VectorLevel::kAvx2, false), "");
  EXPECT_EQ(BetterKernels("Prescott", VectorLevel::kBelowAvx2, false), "");
  // A CPU narrower than the pick (OPENBLAS_CORETYPE set by hand): no change.
  EXPECT_EQ(BetterKernels("SkylakeX", VectorLevel::kAvx2, false), "");
}

TEST(BlasKernelsTest, DescribesTheLibraryAndItsKernels) {
  EXPECT_THAT(DescribeBlas(),
              ::testing::MatchesRegex("blas: OpenBLAS [^\n]+, [A-Za-z0-9]+ kernels.*"));
}

}  // namespace
}  // namespace pstrain::model
