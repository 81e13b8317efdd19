// tessera/detail/spin_lock.h — the tiny lock that guards the primitives' short
// bookkeeping (a mutex's waiter queue, a condition variable's queue, a
// semaphore's cancelled tickets).
#pragma once

#include <atomic>

namespace tessera::detail {

/// Test-and-test-and-set lock for critical sections of a few instructions that
/// never park. Contended, it spins politely, then yields (yield_now(): the OS
/// thread or the fiber), in case the holder was preempted. Not recursive.
class spin_lock {
 public:
  void lock() noexcept {
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  void lock_contended() noexcept;
  std::atomic<bool> held_{false};
};

}  // namespace tessera::detail
