// tessera/wait_group.h — wait_group: Go's sync.WaitGroup, the counter jobs
// wait on (add(n), done(), wait() until the counter is 0).
//
// The counter may go up again after reaching 0 (a new round). wait() returns as
// soon as it sees 0; a waiter that comes after a new add() waits for that round.
//
// Contract
// - Who may call: any fiber or OS thread, mixed.
// - Memory ordering: everything before a done()/add() that brings the counter
//   to 0 happens-before the return of the waits it releases (acq_rel on the
//   counter, release/acquire on the notify).
// - Spurious wake-ups: none visible (wait loops on the counter).
// - Misuse: a counter driven below zero aborts with "tessera::wait_group:
//   negative counter", as Go panics.
// - Initialisation: constexpr (constinit globals work).
#pragma once

#include <atomic>
#include <cstdint>

#include "tessera/atomic_wait.h"
#include "tessera/detail/cpu.h"

namespace tessera {

class wait_group {
 public:
  constexpr wait_group() noexcept = default;
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;

  /// Adds `n` (may be negative) to the counter. Reaching 0 releases the waiters;
  /// going below 0 aborts ("tessera::wait_group: negative counter"), as Go panics.
  void add(std::int64_t n) {
    const auto after = count_.fetch_add(n, std::memory_order_acq_rel) + n;
    if (after < 0) detail::misuse_abort("tessera::wait_group: negative counter");
    if (after == 0 && n != 0) atomic_notify_all(&count_);
  }
  void done() { add(-1); }
  void wait() const {
    std::int64_t c = count_.load(std::memory_order_acquire);
    if (c == 0) return;
    const wait_scope scope("wait_group", this);
    for (; c != 0; c = count_.load(std::memory_order_acquire)) atomic_wait(&count_, c);
  }
  std::int64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> count_{0};
};

}  // namespace tessera
