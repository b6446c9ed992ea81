// Copying large blocks into memory the copying thread will not read again
// soon, with stores that bypass the cache (x86-64 non-temporal stores).
//
// A plain copy into cold memory reads every destination line from memory
// before overwriting it (read-for-ownership) and writes it back later, and
// it pushes out of the cache data still to be used (a message about to be
// sent, the next tensor). Streaming stores write the destination straight
// to memory instead: 11-13% less time than memcpy for
// 4 MiB on this project's 2-core test machine (bench/copy_bench.cc,
// docs/benchmarks/history.md).
//
// Use for MiB-sized copies whose destination is not read right after;
// small or cache-hot copies are faster with memcpy.
#ifndef PSTRAIN_BASE_STREAM_COPY_H_
#define PSTRAIN_BASE_STREAM_COPY_H_

#include <cstddef>

namespace pstrain {

// Copies n bytes from src to dst (any alignment; the ranges must not
// overlap), as memcpy does. On return the bytes are visible to other threads
// under the usual synchronisation (the streaming stores are fenced). Falls
// back to memcpy where the CPU has no streaming stores.
void StreamCopy(void* dst, const void* src, size_t n);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_STREAM_COPY_H_
