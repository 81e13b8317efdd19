// tessera/detail/barging_semaphore.h — the box office behind
// counting_semaphore's admission::barging (contract in tessera/semaphore.h).
//
// Box office / bouncer (Preshing, "Semaphores are Surprisingly Versatile") as in tessera/mutex.h,
// with a count where the mutex has a LOCKED bit. One 64-bit word, `state_`:
//
//   bits 2..63  count   free permits (at most kMaxCount = 2^62 - 1)
//   bit 1       WOKEN   queued waiters were woken to compete and at least one
//                       has not yet run: releases wake no more (one wake-up in
//                       flight suffices, the mutex's WOKEN)
//   bit 0       QUEUED  the waiter queue may be non-empty
//
//   state                      acquire()                   release(n)
//   count > 0                  CAS count-1: barges, even   CAS count+n
//                              past queued waiters
//   count 0                    threads poll 16x, then      QUEUED clear, or WOKEN set:
//                              queue (under the queue      CAS count+n (fast path);
//                              lock, only while count is   else slow path: wake up to
//                              0) and park; fibers queue   count waiters, oldest first,
//                              at once                     or hand one permit over
//
// Waking: a release that finds waiters queued and none woken adds its permits,
// sets WOKEN and wakes as many of the oldest waiters as there are free permits
// (up to kWakeBatch at once). A woken waiter clears WOKEN as soon as it runs and
// competes for a permit like any newcomer; if it loses, it re-queues in its
// place by age (the queue stays oldest first). A waiter that wins while permits remain, waiters
// are queued and none is woken wakes the next ones (so release(n) reaches n
// waiters however many newcomers barge meanwhile). Invariant: while count > 0
// and the queue is non-empty, some woken waiter is on its way or a release is
// about to wake one; no wake-up is lost.
//
// Fairness: as the mutexes (park_list.h fair_handoff): a release whose oldest
// waiter has waited handoff_after (1 ms) hands it one permit directly (the
// count never shows it), at most once per 1 ms when that waiter is an OS thread
// and once per 40 µs when a fiber. A due waiter held back by that rate limit
// stays queued at the front and the next ones are woken instead: woken, it
// would be away from the queue whenever a hand-off came round. Releases while a
// wake-up is in flight take the fast path, except every 256th, which looks at
// the fairness timer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "tessera/detail/deadline.h"
#include "tessera/detail/park_list.h"
#include "tessera/detail/spin_lock.h"

namespace tessera::detail {

/// Throws std::invalid_argument: a counting_semaphore<max>'s initial count
/// `desired` is outside [0, max()]; `why` is appended (empty, or the core's own
/// tighter cap). Shared word for word by both cores (sync/semaphore.cpp).
[[noreturn]] void throw_bad_initial(std::ptrdiff_t desired, std::ptrdiff_t max, const char* why);

/// `desired` as a count when 0 <= desired <= limit; otherwise throws (above).
/// constexpr: valid counts initialise constinit semaphores.
constexpr std::uint64_t checked_initial(std::ptrdiff_t desired, std::ptrdiff_t limit,
                                        std::ptrdiff_t max, const char* why) {
  if (desired < 0 || desired > limit) throw_bad_initial(desired, max, why);
  return static_cast<std::uint64_t>(desired);
}

/// Why a count the semaphore type allows is refused by the barging core.
inline constexpr const char* kBargingCap = " (barging admission holds at most 2^62-1)";

class barging_semaphore {
 public:
  static constexpr std::uint64_t kQueued = 1;
  static constexpr std::uint64_t kWoken = 2;
  static constexpr std::uint64_t kOne = 4;  // one permit in state_
  /// The largest count the word holds.
  static constexpr std::ptrdiff_t kMaxCount = static_cast<std::ptrdiff_t>(UINT64_MAX >> 2);
  /// How many times an OS thread polls (with a PAUSE) before queueing (as mutex_core).
  static constexpr unsigned kSpinBudget = 16;
  /// A waiter older than this is handed a permit directly (rate-limited).
  static constexpr std::chrono::microseconds handoff_after{1000};

  /// Throws std::invalid_argument unless 0 <= desired <= min(max, kMaxCount).
  /// constexpr: a constinit semaphore needs no dynamic initialisation.
  constexpr barging_semaphore(std::ptrdiff_t desired, std::ptrdiff_t max)
      : state_(checked_initial(desired, limit(max), max, desired > kMaxCount ? kBargingCap : "") *
               kOne) {}
  ~barging_semaphore();
  barging_semaphore(const barging_semaphore&) = delete;
  barging_semaphore& operator=(const barging_semaphore&) = delete;

  /// Takes a free permit, queued waiters or not (barging). Never waits.
  bool try_acquire() noexcept {
    std::uint64_t left;
    return take(left);
  }
  void acquire() {
    if (!try_acquire()) acquire_slow({});
  }
  bool try_acquire_until(std::chrono::steady_clock::time_point deadline) {
    if (try_acquire()) return true;
    return acquire_slow(deadline);
  }

  void release(std::ptrdiff_t update, std::ptrdiff_t max) {
    if (update < 0 || update > max) [[unlikely]]
      bad_update(update, max);
    const auto n = static_cast<std::uint64_t>(update);
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    for (;;) {
      if (static_cast<std::ptrdiff_t>(s >> 2) > limit(max) - update) [[unlikely]]
        exceeds_max(n, s >> 2, max);
      // Waiters queued and none woken: wake some. A wake-up in flight: every
      // 256th release still looks, for the fairness timer.
      if ((s & kQueued) != 0 && ((s & kWoken) == 0 || busy_releases())) break;
      if (state_.compare_exchange_weak(s, s + n * kOne, std::memory_order_release,
                                       std::memory_order_relaxed)) {
        return;
      }
    }
    settle(n, max, true);
  }

  std::ptrdiff_t available() const noexcept {
    return static_cast<std::ptrdiff_t>(state_.load(std::memory_order_relaxed) >> 2);
  }
  /// Callers parked in the queue (woken ones on their way excluded). Walks the
  /// queue under its lock: O(waiters); for tests and monitoring.
  std::ptrdiff_t waiting() const noexcept;

 private:
  struct node;
  static constexpr unsigned kWakeBatch = 8;
  static constexpr std::ptrdiff_t limit(std::ptrdiff_t max) noexcept {
    return max < kMaxCount ? max : kMaxCount;
  }
  bool busy_releases() noexcept {
    // Racy on purpose (relaxed load and store, no RMW): a lost count only
    // shifts which release looks.
    const std::uint32_t k = woken_releases_.load(std::memory_order_relaxed) + 1;
    woken_releases_.store(k, std::memory_order_relaxed);
    return (k & 255) == 0;
  }
  /// One CAS taking a free permit; `left` is the word it left behind.
  bool take(std::uint64_t& left) noexcept {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    while (s >= kOne) {
      if (state_.compare_exchange_weak(s, s - kOne, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        left = s - kOne;
        return true;
      }
    }
    return false;
  }
  bool acquire_slow(detail::deadline deadline);
  bool barge() noexcept;
  /// Under the queue lock: adds `n` permits (less one handed to the oldest
  /// waiter when `may_hand_off` and the fairness timer says so) and, unless a
  /// wake-up is in flight, wakes as many of the oldest waiters as permits are free.
  void settle(std::uint64_t n, std::ptrdiff_t max, bool may_hand_off);
  [[noreturn]] void bad_update(std::ptrdiff_t update, std::ptrdiff_t max) const;
  [[noreturn]] void exceeds_max(std::uint64_t n, std::uint64_t count, std::ptrdiff_t max) const;

  std::atomic<std::uint64_t> state_;
  std::atomic<std::uint32_t> woken_releases_{0};
  mutable spin_lock queue_lock_;
  park_list queue_;                                    // guarded by queue_lock_
  detail::tick_clock::rep next_fair_ = 0;              // guarded by queue_lock_ (tick_clock)
};

}  // namespace tessera::detail
