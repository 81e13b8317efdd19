// The contended path of detail::spin_lock.
#include "tessera/detail/spin_lock.h"

#include "tessera/detail/cpu.h"
#include "tessera/park.h"

namespace tessera::detail {

void spin_lock::lock_contended() noexcept {
  for (unsigned spins = 0;;) {
    while (held_.load(std::memory_order_relaxed)) {
      if (++spins < 64) {
        cpu_relax();
      } else {
        yield_now();  // the holder was preempted: it holds the lock for a few instructions
      }
    }
    if (!held_.exchange(true, std::memory_order_acquire)) return;
  }
}

}  // namespace tessera::detail
