// bench/baseline/ticket_semaphore.h — Ticket-Semaphore (Dice & Kogan, "Semaphores Augmented with
// a Waiting Array", Listing 1): the baseline.
//
// A ticket lock turned into a semaphore: `acquire` takes a ticket with one
// fetch_add and spins until the grant passes it; `release` advances the grant.
// Contract
// - Admission: strict FIFO (first-come-first-served by ticket).
// - Waiting: pure global spinning on the grant (PAUSE); it never parks. Under
//   oversubscription (more waiters than cores) throughput collapses: the next
//   ticket holder is often descheduled. That is the point of keeping it — the
//   benchmark's baseline. Use tessera::counting_semaphore in real code.
// - Memory ordering: a release synchronizes-with the acquire it admits.
// - Who may call: OS threads; a fiber would spin its worker (avoid).
// - No timed acquisition: a ticket, once taken, must be served.
#pragma once

#include <tessera/detail/cpu.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tessera {

class ticket_semaphore {
 public:
  /// Precondition: desired >= 0 (throws std::invalid_argument otherwise).
  explicit ticket_semaphore(std::ptrdiff_t desired = 0) {
    if (desired < 0) {
      throw std::invalid_argument("tessera::ticket_semaphore: initial count " +
                                  std::to_string(desired) + " is negative");
    }
    grant_.store(static_cast<std::uint64_t>(desired), std::memory_order_relaxed);
  }
  ticket_semaphore(const ticket_semaphore&) = delete;
  ticket_semaphore& operator=(const ticket_semaphore&) = delete;

  /// Takes the next ticket and spins until admitted (Listing 1, SemaTake).
  void acquire() noexcept {
    const std::uint64_t tx = ticket_.fetch_add(1, std::memory_order_relaxed);
    // acquire: pairs with release()'s fetch_add.
    while (static_cast<std::int64_t>(grant_.load(std::memory_order_acquire) - tx) <= 0) {
      detail::cpu_relax();
    }
  }

  /// Succeeds only if a permit is free and nobody waits; takes no ticket otherwise.
  bool try_acquire() noexcept {
    std::uint64_t t = ticket_.load(std::memory_order_relaxed);
    while (static_cast<std::int64_t>(grant_.load(std::memory_order_acquire) - t) > 0) {
      if (ticket_.compare_exchange_weak(t, t + 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }

  /// Admits the next `update` tickets (Listing 1, SemaPost). Precondition: update >= 0.
  void release(std::ptrdiff_t update = 1) {
    if (update < 0) {
      throw std::invalid_argument("tessera::ticket_semaphore::release: update " +
                                  std::to_string(update) + " is negative");
    }
    // release: publishes the critical section to the admitted tickets.
    grant_.fetch_add(static_cast<std::uint64_t>(update), std::memory_order_release);
  }

  /// Tickets taken so far (acquirers that started waiting or got in), for tests
  /// that sequence arrivals. A snapshot: relaxed.
  std::uint64_t tickets_taken() const noexcept { return ticket_.load(std::memory_order_relaxed); }

 private:
  alignas(128) std::atomic<std::uint64_t> ticket_{0};
  std::atomic<std::uint64_t> grant_{0};
};

}  // namespace tessera
