// PSTRAIN_VECTOR_CLONES: compiles a function's loops for AVX-512, AVX2 and
// baseline x86-64 and picks one at load time by the CPU (GCC and clang
// target_clones), for element-wise loops that vectorise. Empty elsewhere,
// and under ThreadSanitizer: the load-time resolvers would be instrumented
// and run before its runtime starts.
#ifndef PSTRAIN_BASE_VECTOR_CLONES_H_
#define PSTRAIN_BASE_VECTOR_CLONES_H_

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PSTRAIN_NO_CLONES 1
#endif
#endif
#if defined(__x86_64__) && defined(__linux__) && !defined(PSTRAIN_NO_CLONES)
#define PSTRAIN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PSTRAIN_VECTOR_CLONES
#endif

#endif  // PSTRAIN_BASE_VECTOR_CLONES_H_
