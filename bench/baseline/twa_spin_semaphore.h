// bench/baseline/twa_spin_semaphore.h — TWA-Semaphore with a spinning waiting array
// (Dice & Kogan, Listing 2), kept so the benchmark can compare it.
//
// Waiters within LongTermThreshold (1) of the grant spin on the grant; waiters
// further back spin on a slot of a process-wide waiting array of update
// counters (2048 slots), chosen by TWAHash(semaphore, ticket). `release` bumps
// the slot of the ticket that just came within the threshold.
// Contract
// - Admission: strict FIFO by ticket.
// - Waiting: spinning only — it never parks, so like ticket_semaphore it wastes
//   cores under oversubscription; tessera::counting_semaphore parks instead.
// - Memory ordering: a release synchronizes-with the acquire it admits.
// - Who may call: OS threads (a fiber would spin its worker).
#pragma once

#include <tessera/detail/cpu.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tessera {

namespace detail {
/// Listing 2's WaitBucket: an update counter that far waiters watch.
struct spin_bucket {
  std::atomic<std::uint64_t> update_sequence{0};
};
/// Listing 2's IndexToBucket over a 2048-slot, page-aligned array.
spin_bucket& spin_bucket_at(std::uint32_t index) noexcept;
}  // namespace detail

class twa_spin_semaphore {
 public:
  /// Listing 2's LongTermThreshold.
  static constexpr std::int64_t long_term_threshold = 1;

  /// Precondition: desired >= 0 (throws std::invalid_argument otherwise).
  explicit twa_spin_semaphore(std::ptrdiff_t desired = 0);
  twa_spin_semaphore(const twa_spin_semaphore&) = delete;
  twa_spin_semaphore& operator=(const twa_spin_semaphore&) = delete;

  /// Listing 2, SemaTake: fetch_add a ticket; spin near the grant, else on the array.
  void acquire() noexcept {
    const std::uint64_t tx = ticket_.fetch_add(1);
    if (static_cast<std::int64_t>(grant_.load() - tx) > 0) return;
    acquire_slow(tx);
  }

  /// Succeeds only if a permit is free and nobody waits; takes no ticket otherwise.
  bool try_acquire() noexcept {
    std::uint64_t t = ticket_.load(std::memory_order_relaxed);
    while (static_cast<std::int64_t>(grant_.load() - t) > 0) {
      if (ticket_.compare_exchange_weak(t, t + 1)) return true;
    }
    return false;
  }

  /// Listing 2, SemaPost, generalized to n: admit n tickets, then poke the bucket
  /// of each ticket that came within the threshold. Precondition: update >= 0.
  void release(std::ptrdiff_t update = 1);

  /// Tickets taken so far (acquirers that started waiting or got in), for tests
  /// that sequence arrivals. A snapshot: relaxed.
  std::uint64_t tickets_taken() const noexcept { return ticket_.load(std::memory_order_relaxed); }

 private:
  void acquire_slow(std::uint64_t tx) noexcept;
  std::uint32_t hash(std::uint64_t ticket) const noexcept {
    return hash_base_ + static_cast<std::uint32_t>(ticket) * 17u;  // Listing 2's TWAHash
  }

  alignas(128) std::atomic<std::uint64_t> ticket_{0};
  std::atomic<std::uint64_t> grant_{0};
  std::uint32_t hash_base_;
};

}  // namespace tessera
