// tessera/barrier.h — barrier<Completion>: a reusable phase barrier with a
// completion step (std::barrier's interface).
//
// State: arrivals left in this phase, the expected count of the next phase and
// a phase number. The last arriver runs the completion exactly once, resets the
// counter for the next phase (minus those who arrived_and_dropped) and bumps the
// phase, which releases the waiters (atomic_wait / atomic_notify_all on it).
//
// Contract
// - Who may call: any fiber or OS thread, mixed.
// - Memory ordering: every arrive of a phase happens-before the completion, and
//   the completion happens-before the return of every wait of that phase.
// - Spurious wake-ups: none visible (wait loops on the phase).
// - Misuse: a count outside [0, max()] or arrive(n <= 0) throws
//   std::invalid_argument; more arrivals than expected abort with a message.
// - Initialisation: the constructor is constexpr when Completion's is.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>

#include "tessera/atomic_wait.h"
#include "tessera/detail/cpu.h"
#include "tessera/detail/expected_count.h"

namespace tessera {

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

  static constexpr std::ptrdiff_t max() noexcept {
    return std::numeric_limits<std::int32_t>::max();
  }

  /// Precondition: 0 <= expected <= max(); otherwise throws std::invalid_argument.
  constexpr explicit barrier(std::ptrdiff_t expected, Completion completion = Completion())
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
    if (phase_.load(std::memory_order_acquire) != token.phase_) return;
    const wait_scope scope("barrier", this);
    while (phase_.load(std::memory_order_acquire) == token.phase_)
      atomic_wait(&phase_, token.phase_);
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

}  // namespace tessera
