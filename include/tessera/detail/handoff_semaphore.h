// tessera/detail/handoff_semaphore.h — the core behind counting_semaphore's
// admission::handoff (contract in tessera/semaphore.h).
//
// Passing the baton: the count and a FIFO of parked callers under one small
// spin lock. A release that finds callers queued gives its permits straight to
// the oldest of them (they never appear in the count); otherwise it adds them
// to the count. An acquirer takes a free permit under the lock, or queues and
// parks until it is handed one. Invariant (under the lock): count > 0 only
// while nobody is queued, so a newcomer never passes a waiter.
//
//   state              acquire()                     release(n)
//   count > 0          count - 1                     count + n
//   count 0, nobody    queue, park until handed      count + n
//   w1 .. wk queued    queue behind wk, park         hand to w1 .. wmin(n,k), rest to count
//
// One lock acquisition on each side and one park/unpark pair: the cheapest
// hand-off between two fibers Tessera has. OS threads poll their node for
// about kPollNanos before they park; a release hands a polling thread its
// permit without an unpark (the thread says, under the lock, when it stops
// polling). The price is the hand-off convoy of any strict-FIFO lock: among
// more threads than cores, a permit handed to a descheduled thread idles
// until it runs; and between two running threads a hand-off moves the lock's
// line and the waiter's node, one line more than the TWA semaphore's grant
// (docs/design.md, "admission::handoff").
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "tessera/detail/barging_semaphore.h"  // checked_initial
#include "tessera/detail/deadline.h"
#include "tessera/detail/park_list.h"
#include "tessera/detail/spin_lock.h"

namespace tessera::detail {

class handoff_semaphore {
 public:
  /// How long an OS thread polls its node before it parks, in ns: about the
  /// TWA semaphore's short-term spin (1,024 PAUSEs), longer than the
  /// channels' kThreadPollNanos (docs/benchmarks.md, "Constants").
  static constexpr unsigned kPollNanos = 20000;

  /// Throws std::invalid_argument unless 0 <= desired <= max.
  constexpr handoff_semaphore(std::ptrdiff_t desired, std::ptrdiff_t max)
      : count_(static_cast<std::int64_t>(checked_initial(desired, max, max, ""))) {}
  ~handoff_semaphore();
  handoff_semaphore(const handoff_semaphore&) = delete;
  handoff_semaphore& operator=(const handoff_semaphore&) = delete;

  void acquire() {
    lock_.lock();
    if (take_locked()) {
      lock_.unlock();
      return;
    }
    (void)queue_and_wait({});
  }
  /// Takes a free permit (there is one only while nobody waits). Never waits.
  bool try_acquire() noexcept {
    // A release that happened-before us is seen by this load (coherence): a
    // count of 0 here is not a spurious failure.
    if (count_.load(std::memory_order_relaxed) == 0) return false;
    lock_.lock();
    const bool got = take_locked();
    lock_.unlock();
    return got;
  }
  bool try_acquire_until(std::chrono::steady_clock::time_point deadline) {
    lock_.lock();
    if (take_locked()) {
      lock_.unlock();
      return true;
    }
    return queue_and_wait(deadline);
  }
  void release(std::ptrdiff_t update, std::ptrdiff_t max) {
    if (update < 0 || update > max) [[unlikely]]
      bad_update(update, max);
    lock_.lock();
    const std::int64_t count = count_.load(std::memory_order_relaxed);
    if (count > max - update) [[unlikely]]
      past_max(update, count, max);  // unlocks
    if (queue_.empty()) [[likely]] {
      count_.store(count + update, std::memory_order_relaxed);
      lock_.unlock();
      return;
    }
    if (update == 1) {
      waiter* const who = take_oldest();
      lock_.unlock();
      unpark(who);  // null: it polls, nothing to wake
      return;
    }
    hand_off(update, max);  // unlocks
  }

  std::ptrdiff_t available() const noexcept {
    return static_cast<std::ptrdiff_t>(count_.load(std::memory_order_relaxed));
  }
  /// Callers queued (parked or polling): a walk under the lock, for tests and monitoring.
  std::ptrdiff_t waiting() const noexcept;

 private:
  /// Under the lock, callers queued: hands a permit to the oldest and
  /// returns whom to unpark (null while it polls: park_list::mark).
  waiter* take_oldest() noexcept { return queue_.take(*queue_.front(), park_mark::handed); }
  /// Under the lock: takes a free permit if there is one.
  bool take_locked() noexcept {
    const std::int64_t c = count_.load(std::memory_order_relaxed);
    if (c == 0) return false;
    count_.store(c - 1, std::memory_order_relaxed);
    return true;
  }
  /// Entered under the lock with no permit free: unless the deadline has
  /// passed, queues the caller, unlocks and waits to be handed a permit.
  /// False only after the deadline.
  bool queue_and_wait(detail::deadline deadline);
  /// Entered under the lock with callers queued: hands `update` permits to the
  /// oldest of them, the rest to the count; unlocks.
  void hand_off(std::ptrdiff_t update, std::ptrdiff_t max) noexcept;
  [[noreturn]] void bad_update(std::ptrdiff_t update, std::ptrdiff_t max) const;
  [[noreturn]] void past_max(std::ptrdiff_t update, std::int64_t count, std::ptrdiff_t max);

  // Written under lock_ only; atomic so that available() and try_acquire's
  // early-out may read it without the lock.
  std::atomic<std::int64_t> count_;
  mutable spin_lock lock_;
  park_list queue_;  // guarded by lock_; oldest first
};

}  // namespace tessera::detail
