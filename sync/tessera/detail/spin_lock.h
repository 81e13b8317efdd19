// tessera/detail/spin_lock.h — the tiny lock that guards the primitives' short
// bookkeeping (a mutex's waiter queue, a condition variable's queue, a
// semaphore's cancelled tickets) and the scheduler's global FIFO.
#pragma once

#include <atomic>

#include "tessera/detail/cpu.h"
#include "tessera/park.h"

namespace tessera::detail {

/// Test-and-test-and-set lock for critical sections of a few instructions that
/// never park: uncontended, one exchange to lock and one store to unlock.
/// Contended, it spins politely (PAUSE) 64 times, then calls `Yield` between
/// polls, in case the holder was preempted. Not recursive.
template <void (*Yield)()>
class basic_spin_lock {
 public:
  void lock() noexcept {
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  [[gnu::noinline]] void lock_contended() noexcept {
    for (unsigned spins = 0;;) {
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
          cpu_relax();
        } else {
          Yield();
        }
      }
      if (!held_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  std::atomic<bool> held_{false};
};

/// The primitives' lock: yields with yield_now() (the OS thread, or the fiber).
using spin_lock = basic_spin_lock<&yield_now>;

}  // namespace tessera::detail
