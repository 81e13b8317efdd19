// tessera/detail/faa_semaphore.h — the core behind counting_semaphore's
// admission::faa (contract in tessera/semaphore.h): Koval & Elizarov's
// semaphore by fetch-and-add ("Dual Data Structures. Fast Semaphore."; the
// algorithm of kotlinx.coroutines' Semaphore) on the segment queue
// synchronizer (tessera/detail/segment_queue.h).
//
//   permits_  free permits when positive; minus the acquirers that found none
//             (waiting, or timed out and not yet paid back) when negative
//
//   acquire:  FAA(permits_, -1) > 0: done. Else suspend() in the next cell.
//   release:  FAA(permits_, +1) >= 0: a free permit, done. Else resume() the
//             next cell; a cancelled cell (a waiter that timed out) fails the
//             resume, and the release goes round again: its increment paid the
//             timed-out acquirer's decrement back.
//   try_acquire: CAS permits_ down while positive (never queues, never barges
//             past a waiter: a waiter exists only while permits_ <= 0).
//
// Admission (admission::faa): strict FIFO — the k-th acquirer that found no
// permit is the k-th one a release hands a permit to (cells in fetch-and-add
// order); no lock on any path. A timed-out acquirer leaves its cell cancelled
// and its decrement behind; the next release pays for both (simple
// cancellation; why in sync/segment_queue.cpp).
//
// admission::faa_restricted puts a lobby in front (concurrency restriction, as
// the TWA semaphore's admission::restricted): an acquirer that finds a waiter
// already counted below zero (permits_ < 0) takes no decrement; it parks in a
// FIFO lobby under a lock. The lobby's oldest is called in whenever a permit
// is free (by release, by whoever joins, by whoever enters), and forced in
// after a fairness interval as the lobby's oldest. The queue's paths take no
// lock; only lobby members do. How and why: sync/faa_semaphore.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "tessera/detail/deadline.h"
#include "tessera/detail/lobby.h"
#include "tessera/detail/segment_queue.h"

namespace tessera::detail {

class faa_semaphore {
 public:
  /// Throws std::invalid_argument unless 0 <= desired <= max. `restricted`:
  /// admission::faa_restricted (a lobby in front of the queue).
  faa_semaphore(std::ptrdiff_t desired, std::ptrdiff_t max, bool restricted = false);
  ~faa_semaphore();
  faa_semaphore(const faa_semaphore&) = delete;
  faa_semaphore& operator=(const faa_semaphore&) = delete;

  void acquire() {
    if (restricted_ && permits_.load(std::memory_order_relaxed) < 0) [[unlikely]] {
      (void)enter_via_lobby({});
      return;
    }
    if (permits_.fetch_sub(1, std::memory_order_acquire) > 0) return;
    (void)q_.suspend({}, "counting_semaphore", this);
  }
  bool try_acquire() noexcept {
    std::int64_t p = permits_.load(std::memory_order_relaxed);
    while (p > 0) {
      if (permits_.compare_exchange_weak(p, p - 1, std::memory_order_acquire)) return true;
    }
    return false;
  }
  bool try_acquire_until(std::chrono::steady_clock::time_point deadline) {
    if (restricted_ && permits_.load(std::memory_order_relaxed) < 0) [[unlikely]] {
      return enter_via_lobby(deadline);
    }
    if (permits_.fetch_sub(1, std::memory_order_acquire) > 0) return true;
    return q_.suspend(deadline, "counting_semaphore", this) != 0;
  }
  void release(std::ptrdiff_t update, std::ptrdiff_t max) {
    if (update < 0 || update > max) [[unlikely]]
      bad_update(update, max);
    if (update == 0) return;
    // The check against max() is best effort under racing releases, as the
    // other cores' (contract: "a racing overshoot" is misuse).
    const std::int64_t before = permits_.load(std::memory_order_relaxed);
    if (before > 0 && before > max - update) [[unlikely]]
      past_max(update, before, max);
    const std::int64_t p = permits_.fetch_add(update, std::memory_order_seq_cst);
    // Nobody owed a permit and (the Dekker pair with the lobby) nobody in it.
    if (p >= 0 && (!restricted_ || lobby_.size() == 0)) return;
    serve(p, update);
  }

  std::ptrdiff_t available() const noexcept {
    const std::int64_t p = permits_.load(std::memory_order_relaxed);
    return p > 0 ? static_cast<std::ptrdiff_t>(p) : 0;
  }
  std::ptrdiff_t waiting() const noexcept { return q_.parked() + lobby(); }
  std::ptrdiff_t queued() const noexcept { return q_.parked(); }
  std::ptrdiff_t lobby() const noexcept { return lobby_.size(); }
  std::size_t live_segments() const noexcept { return q_.live_segments(); }

 private:
  // release() after its increment, with `p` the count before it: resumes the
  // acquirers owed a permit, then calls the lobby in for any permit left free.
  void serve(std::int64_t p, std::ptrdiff_t update);
  [[noreturn]] void bad_update(std::ptrdiff_t update, std::ptrdiff_t max) const;
  [[noreturn]] void past_max(std::ptrdiff_t update, std::int64_t count, std::ptrdiff_t max) const;
  bool enter_via_lobby(deadline d);
  void admit_from_lobby() noexcept;

  alignas(64) std::atomic<std::int64_t> permits_;
  segment_queue q_;
  const bool restricted_;
  admission_lobby lobby_;  // faa_restricted's callers that took no decrement
};

}  // namespace tessera::detail
