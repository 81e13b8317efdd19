// tessera/latch.h — latch: a single-use downward counter (std::latch's interface).
//
// State: one counter, expected -> 0, once. count_down(n) subtracts; the caller
// that reaches 0 notifies every waiter through the wait chains (atomic_wait /
// atomic_notify_all on the counter) — Preshing's box office: an atomic decides,
// the wait chains hold whoever must wait.
//
// Contract
// - Who may call: any fiber or OS thread, mixed.
// - Memory ordering: everything before a count_down happens-before the return
//   of every wait it releases (acq_rel on the counter; the notify is release and
//   the wait's re-check acquire).
// - Spurious wake-ups: none visible (wait loops on the counter).
// - Lifetime: as std::latch, the latch may be destroyed once every wait has
//   returned; a thread still inside count_down's notify only touches the wait
//   chain table, not the latch.
// - Misuse: a count outside [0, max()] throws std::invalid_argument (nothing
//   changed); counting below zero aborts with a message naming the latch (the
//   counter has already gone wrong).
// - Initialisation: the constructor is constexpr (constinit globals work).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "tessera/atomic_wait.h"
#include "tessera/detail/cpu.h"
#include "tessera/detail/expected_count.h"

namespace tessera {

class latch {
 public:
  static constexpr std::ptrdiff_t max() noexcept {
    return std::numeric_limits<std::int32_t>::max();
  }

  /// Precondition: 0 <= expected <= max(); otherwise throws std::invalid_argument.
  /// constexpr, so a `constinit` global latch needs no dynamic initialisation.
  constexpr explicit latch(std::ptrdiff_t expected)
      : count_(detail::checked_expected("tessera::latch", expected)) {}
  latch(const latch&) = delete;
  latch& operator=(const latch&) = delete;

  void count_down(std::ptrdiff_t n = 1) {
    if (n < 0) throw std::invalid_argument("tessera::latch::count_down: n must not be negative");
    const auto before = count_.fetch_sub(static_cast<std::int32_t>(n), std::memory_order_acq_rel);
    if (before < n) detail::misuse_abort("tessera::latch::count_down: counted below zero");
    if (before == n) atomic_notify_all(&count_);
  }
  bool try_wait() const noexcept { return count_.load(std::memory_order_acquire) == 0; }
  void wait() const {
    std::int32_t c = count_.load(std::memory_order_acquire);
    if (c == 0) return;
    const wait_scope scope("latch", this);
    for (; c != 0; c = count_.load(std::memory_order_acquire)) atomic_wait(&count_, c);
  }
  void arrive_and_wait(std::ptrdiff_t n = 1) {
    count_down(n);
    wait();
  }

 private:
  std::atomic<std::int32_t> count_;
};

}  // namespace tessera
