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

/// How a contended basic_spin_lock waits: cpu_relax() `steps` between two
/// polls of the lock word, for `polls` polls; after those it calls its
/// `Yield` between polls, in case the holder was preempted.
struct spin_backoff {
  unsigned steps;
  unsigned polls;
};

/// Poll at every step, 64 of them: for waiters whose next wait is expensive
/// (an OS thread that may park in the kernel next), which lose more by
/// polling late than the lock's line costs in transfers.
inline spin_backoff tight_backoff() noexcept {
  return {1, 64};
}

/// Poll about every 750 ns, four times: for waiters that park cheaply (a
/// fiber). A holder that takes the lock again within the interval keeps it and
/// its cache line, so operations run in batches on one core instead of moving
/// the line between cores for every one (docs/design.md, "Spin-lock backoff").
inline spin_backoff batching_backoff() noexcept {
  return {relax_steps_for(750), 4};
}

/// Test-and-test-and-set lock for critical sections of a few instructions that
/// never park: uncontended, one exchange to lock and one store to unlock.
/// Contended, it waits as `Backoff()` says (asked once per contended lock()),
/// then calls `Yield` between polls. Not recursive, not fair.
/// Memory ordering: unlock() (release) synchronizes-with the next lock() (acquire).
template <void (*Yield)(), spin_backoff (*Backoff)() = &tight_backoff>
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
    const spin_backoff b = Backoff();
    for (unsigned polls = 0;;) {
      while (held_.load(std::memory_order_relaxed)) {
        if (++polls <= b.polls) {
          for (unsigned i = 0; i < b.steps; ++i) cpu_relax();
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
