// tessera/detail/basic_spin_lock.h — the test-and-test-and-set lock that guards
// short bookkeeping (a primitive's waiter queue, the scheduler's global FIFO),
// parameterised on how a contended caller yields. Base layer: includes nothing
// of Tessera's but cpu.h.
#pragma once

#include <sched.h>

#include <atomic>

#include "tessera/detail/cpu.h"

namespace tessera::detail {

/// The OS thread's yield (sched_yield): for locks held on a scheduling path,
/// which must never switch fibers.
inline void os_yield() noexcept {
  ::sched_yield();
}

/// Test-and-test-and-set lock for critical sections of a few instructions that
/// never park: uncontended, one exchange to lock and one store to unlock.
/// Contended, it spins politely (PAUSE) 64 times, then calls `Yield` between
/// polls, in case the holder was preempted. Not recursive, not fair.
/// Memory ordering: unlock() (release) synchronizes-with the next lock() (acquire).
template <void (*Yield)()>
class basic_spin_lock {
 public:
  constexpr basic_spin_lock() noexcept = default;
  basic_spin_lock(const basic_spin_lock&) = delete;
  basic_spin_lock& operator=(const basic_spin_lock&) = delete;

  void lock() noexcept {
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
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

}  // namespace tessera::detail
