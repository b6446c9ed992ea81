#include "base/malloc_tuning.h"

#include <malloc.h>

namespace pstrain {

void TuneMallocForLargeMessages() {
  // Two arenas: the freed memory kept is per arena, and gRPC's many threads
  // would each get one.
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_MMAP_THRESHOLD, 8 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

}  // namespace pstrain
