// tessera/latch.h — latch, barrier<Completion>, wait_group.
//
// Box office / bouncer (seed 002): an atomic counter decides; the wait chains
// (atomic_wait / atomic_notify_all on the counter or phase word) hold the waiters.
//
// latch       counter: expected -> 0, once. count_down(n) subtracts; the caller
//             that reaches 0 notifies every waiter. std::latch's interface.
// barrier     counter of arrivals left in this phase + phase number. The last
//             arriver runs the completion exactly once, resets the counter for
//             the next phase (minus those who arrived_and_dropped) and bumps the
//             phase, which releases the waiters. std::barrier's interface.
// wait_group  Go's sync.WaitGroup: add(n), done(), wait() until the counter is 0.
//             The counter may go up again after reaching 0 (a new round).
//
// Contract: any fiber or OS thread, mixed. Everything before count_down /
// arrive / done happens-before the return of the waits it releases (acq_rel on
// the counter, release/acquire on the notify). Spurious wake-ups: none (the
// waits loop on the counter). Misuse — a negative expected count, counting a
// latch below zero, arriving at a barrier more often than expected, a negative
// wait_group counter — throws std::invalid_argument when the argument is wrong
// up front, and aborts with a message naming the object when the counter has
// already gone wrong (state cannot be restored then, as in Go).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "tessera/atomic_wait.h"
#include "tessera/detail/cpu.h"

namespace tessera {
namespace detail {
/// Validates an expected count of latch/barrier: [0, INT32_MAX].
inline std::int32_t checked_expected(const char* type, std::ptrdiff_t expected) {
  if (expected < 0 || expected > std::numeric_limits<std::int32_t>::max()) {
    throw std::invalid_argument(std::string(type) + ": expected count " + std::to_string(expected) +
                                " is outside [0, max()]");
  }
  return static_cast<std::int32_t>(expected);
}
}  // namespace detail

class latch {
 public:
  static constexpr std::ptrdiff_t max() noexcept { return std::numeric_limits<std::int32_t>::max(); }

  explicit latch(std::ptrdiff_t expected)
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
    for (std::int32_t c; (c = count_.load(std::memory_order_acquire)) != 0;) atomic_wait(&count_, c);
  }
  void arrive_and_wait(std::ptrdiff_t n = 1) {
    count_down(n);
    wait();
  }

 private:
  std::atomic<std::int32_t> count_;
};

/// The default completion of barrier: does nothing.
struct barrier_no_completion {
  void operator()() noexcept {}
};

template <class Completion = barrier_no_completion>
class barrier {
 public:
  /// Token of one phase, returned by arrive() and passed to wait().
  class arrival_token {
   public:
    arrival_token() = default;

   private:
    friend class barrier;
    explicit arrival_token(std::uint32_t p) : phase_(p) {}
    std::uint32_t phase_ = 0;
  };

  static constexpr std::ptrdiff_t max() noexcept { return std::numeric_limits<std::int32_t>::max(); }

  explicit barrier(std::ptrdiff_t expected, Completion completion = Completion())
      : expected_(detail::checked_expected("tessera::barrier", expected)),
        left_(static_cast<std::int32_t>(expected)),
        completion_(std::move(completion)) {}
  barrier(const barrier&) = delete;
  barrier& operator=(const barrier&) = delete;

  [[nodiscard]] arrival_token arrive(std::ptrdiff_t n = 1) {
    if (n <= 0) throw std::invalid_argument("tessera::barrier::arrive: n must be positive");
    const std::uint32_t phase = phase_.load(std::memory_order_acquire);
    const auto before = left_.fetch_sub(static_cast<std::int32_t>(n), std::memory_order_acq_rel);
    if (before < n) detail::misuse_abort("tessera::barrier::arrive: more arrivals than expected");
    if (before == n) complete_phase();
    return arrival_token(phase);
  }
  void wait(arrival_token&& token) const {
    while (phase_.load(std::memory_order_acquire) == token.phase_) atomic_wait(&phase_, token.phase_);
  }
  void arrive_and_wait() { wait(arrive()); }
  /// Arrives, and leaves the barrier: later phases expect one participant fewer.
  void arrive_and_drop() {
    expected_.fetch_sub(1, std::memory_order_relaxed);
    (void)arrive();
  }

 private:
  // The last arriver of a phase: run the completion once, re-arm, release everyone.
  void complete_phase() {
    completion_();
    left_.store(expected_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    phase_.fetch_add(1, std::memory_order_release);
    atomic_notify_all(&phase_);
  }

  std::atomic<std::int32_t> expected_;
  std::atomic<std::int32_t> left_;
  std::atomic<std::uint32_t> phase_{0};
  Completion completion_;
};

class wait_group {
 public:
  wait_group() noexcept = default;
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
    for (std::int64_t c; (c = count_.load(std::memory_order_acquire)) != 0;) atomic_wait(&count_, c);
  }
  std::int64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> count_{0};
};

}  // namespace tessera
