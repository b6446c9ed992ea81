// glibc malloc settings for processes that move multi-MiB messages.
//
// gRPC allocates a fresh buffer for every message it receives. With glibc's
// defaults, blocks of 128 KiB and more are mmap'ed and unmapped again, and
// freed heap memory is handed back to the kernel, so every MiB-sized message
// page-faults its buffer in anew (the kernel then zeroes each page). Keeping
// such blocks on the heap, and a bounded amount of freed memory around,
// makes the steady state allocate nothing from the kernel.
#ifndef PSTRAIN_BASE_MALLOC_TUNING_H_
#define PSTRAIN_BASE_MALLOC_TUNING_H_

namespace pstrain {

// Blocks below 8 MiB (gRPC's read buffers, 4 MiB frames) come from the
// heap; up to 64 MiB of freed memory is kept per arena, in at most two
// arenas, rather than returned. Measured with ps_bench: 4 MiB push-then-pull
// about 1.5x faster than glibc's defaults; 64 MiB rather than 16 MiB kept
// halved again 2 PS x 2 clients' time per call (four connections' messages
// in flight outgrew 16 MiB and were faulted in anew: 412 minor faults per
// call, now 104), while a 1 GiB Adam model's PS stays within 1.15x of its
// bytes. Call once, early in main, before other threads start.
void TuneMallocForLargeMessages();

}  // namespace pstrain

#endif  // PSTRAIN_BASE_MALLOC_TUNING_H_
