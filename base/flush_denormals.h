// Float arithmetic that treats denormal inputs and results as zero, for the
// update loops: Adam's and momentum's slots decay geometrically where a
// parameter's gradient is mostly zero (a pixel that is rarely on, a dead
// ReLU) and reach the denormal range within a few hundred steps, where
// each multiply costs the CPU a microcode assist (the guide MLP's Adam ran
// several times slower for it). TensorFlow runs its kernels the same way.
// Values below about 1.2e-38 become 0.
#ifndef PSTRAIN_BASE_FLUSH_DENORMALS_H_
#define PSTRAIN_BASE_FLUSH_DENORMALS_H_

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace pstrain {

// Sets flush-to-zero and denormals-are-zero on this thread for the scope's
// lifetime, then restores what was there.
class ScopedFlushDenormals {
 public:
#if defined(__x86_64__)
  ScopedFlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtz | kDaz); }
  ~ScopedFlushDenormals() { _mm_setcsr(saved_); }
#else
  ScopedFlushDenormals() {}
#endif
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
#if defined(__x86_64__)
  static constexpr unsigned kFtz = 1u << 15;  // MXCSR flush-to-zero
  static constexpr unsigned kDaz = 1u << 6;   // MXCSR denormals-are-zero
  const unsigned saved_;
#endif
};

}  // namespace pstrain

#endif  // PSTRAIN_BASE_FLUSH_DENORMALS_H_
