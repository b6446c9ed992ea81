#include "base/finite.h"

#include "base/vector_clones.h"

namespace pstrain {

PSTRAIN_VECTOR_CLONES
int64_t FindNonFinite(const void* data, int64_t n) { return FirstNonFinite(data, n); }

}  // namespace pstrain
