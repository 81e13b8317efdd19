// Condition variables: the out-of-line parts (see tessera/condition_variable.h).
#include "tessera/condition_variable.h"

namespace tessera::detail {

cv_core::~cv_core() {
#if TESSERA_CHECKS
  if (!queue_.empty())
    misuse_abort("tessera::condition_variable destroyed while callers wait on it");
#endif
}

}  // namespace tessera::detail
