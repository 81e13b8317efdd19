// tessera/mutex.h — mutex, timed_mutex, recursive_mutex, recursive_timed_mutex:
// std::'s interfaces, for fibers and OS threads mixed on one mutex.
//
// Contract
// - Who may call: any fiber or OS thread; unlock() only the owner (the fiber,
//   or the thread outside fibers, that locked).
// - Memory ordering: unlock() synchronizes-with the lock() that next acquires
//   (release/acquire on state_), as std::mutex.
// - Spinning: OS threads poll kSpinBudget (16) times before queueing
//   (should_spin()); fibers queue at once (their park is a user-space switch).
// - try_lock_for/until: durations in any std::chrono unit; never return false
//   before the deadline; a timed-out waiter leaves the queue and loses nothing.
// - Misuse, checked when TESSERA_CHECKS is on (Debug, ASan builds): unlock by a
//   caller that does not own the mutex, and destroying a mutex that is locked or
//   has waiters, abort with a message naming the mutex type and the rule.
//   recursive_* count up to 2^32-1 levels; past that lock() throws
//   std::system_error (resource_unavailable_try_again), as the standard allows.
// - Admission: barging with eventual fairness (Go's sync.Mutex starvation mode,
//   parking_lot's fair unlock). unlock wakes the oldest waiter, which competes
//   with newcomers; once it has waited `handoff_after` (1 ms) it is handed the
//   lock directly — at most once per 1 ms to an OS thread, once per 40 µs to a
//   fiber — so a waiter k places back gets in within about (k + 1) ms (thread)
//   or 1 + k/10 ms (fiber). A waiter that found nobody queued counts its wait
//   from the first race it loses (before that nobody passed it). A fiber that
//   never parks still holds its worker: scheduling is cooperative.
// - Spurious wake-ups: none visible.
// - Diagnostics: every acquisition notes where its holder is (one store of
//   the stack pointer, detail::holder_mark), so the deadlock report and the
//   dump name the fiber that holds a mutex another waits for, in every build.
//
// Box office: `state_` (Preshing's box office / bouncer: one atomic word
// decides, a FIFO queue of parked callers makes them wait)
//
//   bit 0  LOCKED    someone owns the mutex
//   bit 1  QUEUED    the waiter queue may be non-empty: unlock must look at it
//   bit 2  WOKEN     a waiter was woken and has not yet got the lock or gone
//                    back to an untimed sleep: unlock wakes no other
//
//   state                   lock()                       unlock()
//   LOCKED clear            fetch_or LOCKED (fast path)  misuse
//   LOCKED                  spin (threads), queue, park  CAS -> 0 (fast path)
//   LOCKED|QUEUED|WOKEN     spin (threads), queue, park  CAS clears LOCKED (fast path)
//   LOCKED|QUEUED           spin (threads), queue, park  slow path: wake or hand off
//
// Why it is built so (retry timer, hand-off rate) is told in sync/mutex.cpp;
// the box office is model-checked in tests/model/mutex.pml.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tessera/detail/cpu.h"
#include "tessera/detail/deadline.h"
#include "tessera/detail/holder_mark.h"
#include "tessera/detail/park_list.h"
#include "tessera/detail/spin_lock.h"
#include "tessera/park.h"

namespace tessera {
namespace detail {

/// The shared machinery of all four mutexes. Not for direct use.
class mutex_core {
 public:
  static constexpr std::uint32_t kLocked = 1;
  static constexpr std::uint32_t kQueued = 2;
  static constexpr std::uint32_t kWoken = 4;
  /// A waiter older than this gets the lock handed to it.
  static constexpr std::chrono::microseconds handoff_after{1000};
  /// How many times an OS thread polls (with a PAUSE) before queueing. Short on
  /// purpose: past the cores, a spinner only delays the preempted owner it waits
  /// for (semabench: 16 beats 128 by 1.6-2x at T=8..32, and ties at T=2).
  static constexpr unsigned kSpinBudget = 16;
  /// How long an OS thread that was woken and lost the race sleeps before it
  /// retries, unless an unlock hands it the lock first ("Lost races" above).
  static constexpr std::chrono::microseconds kRetryAfter{200};

  constexpr mutex_core() noexcept = default;
  mutex_core(const mutex_core&) = delete;
  mutex_core& operator=(const mutex_core&) = delete;
  ~mutex_core();

  /// One `lock bts`: takes LOCKED whatever QUEUED and WOKEN say (barging).
  bool try_lock() noexcept {
    if ((state_.fetch_or(kLocked, std::memory_order_acquire) & kLocked) != 0) return false;
    note_owner();
    return true;
  }
  void lock() {
    detail::simulation_point();
    if (!try_lock()) lock_slow({});
  }
  bool lock_until(detail::deadline deadline) {
    detail::simulation_point();
    if (try_lock()) return true;
    return lock_slow(deadline);
  }
  void unlock(const char* type) {
    detail::simulation_point();
    check_owner(type);
    // Nobody queued, or a woken waiter still on its way (it will retry; one
    // wake-up in flight is enough): just release. Every 256th such woken unlock
    // takes the slow path to look at the queue and the fairness timer (the woken
    // waiter may be a fiber stuck behind a fiber that never parks).
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    if ((s & kQueued) == 0 || ((s & kWoken) != 0 && ++woken_unlocks_ < 256)) {
      if (state_.compare_exchange_strong(s, s & ~kLocked, std::memory_order_release,
                                         std::memory_order_relaxed)) {
        return;
      }
    }
    unlock_slow();
  }
  bool locked() const noexcept { return (state_.load(std::memory_order_relaxed) & kLocked) != 0; }
  constexpr void set_type(const char* type) noexcept { type_ = type; }

 private:
  struct node;
  bool lock_slow(detail::deadline deadline);
  void unlock_slow();
  bool give_up_token() noexcept;
  void lock_queue() noexcept { queue_lock_.lock(); }
  void unlock_queue() noexcept { queue_lock_.unlock(); }
  // Every acquisition notes where its holder is (the deadlock report's "held
  // by"); with TESSERA_CHECKS, also who, for unlock's check.
  void note_owner() noexcept {
    holder_.note();
#if TESSERA_CHECKS
    owner_.store(self(), std::memory_order_relaxed);
#endif
  }
#if TESSERA_CHECKS
  void check_owner(const char* type) noexcept;
#else
  void check_owner(const char*) noexcept {}  // nothing to check: no call on the fast path
#endif

  std::atomic<std::uint32_t> state_{0};
  spin_lock queue_lock_;
  park_list queue_;                        // FIFO of parked callers, guarded by queue_lock_
  detail::tick_clock::rep next_fair_ = 0;  // guarded by queue_lock_ (tick_clock)
  std::uint32_t woken_unlocks_ = 0;        // owner only (inside unlock)
  const char* type_ = "tessera::mutex";
  holder_mark holder_;  // written by the holder only (note_owner)
#if TESSERA_CHECKS
  std::atomic<waiter*> owner_{nullptr};
#endif
};

/// Ownership bookkeeping of the recursive mutexes.
class recursion {
 public:
  template <class Acquire>
  bool enter(Acquire&& acquire, const char* type);
  bool leave() noexcept;  // true when the last level is left
  bool owned_by_caller() const noexcept { return owner_.load(std::memory_order_relaxed) == self(); }

 private:
  std::atomic<waiter*> owner_{nullptr};
  std::uint32_t depth_ = 0;
  friend class ::tessera::detail::mutex_core;
};

[[noreturn]] void recursion_overflow(const char* type);

template <class Acquire>
bool recursion::enter(Acquire&& acquire, const char* type) {
  waiter* me = self();
  if (owner_.load(std::memory_order_relaxed) == me) {
    if (depth_ == UINT32_MAX) recursion_overflow(type);
    ++depth_;
    return true;
  }
  if (!acquire()) return false;
  owner_.store(me, std::memory_order_relaxed);
  depth_ = 1;
  return true;
}

inline bool recursion::leave() noexcept {
  if (--depth_ != 0) return false;
  owner_.store(nullptr, std::memory_order_relaxed);
  return true;
}

}  // namespace detail

/// A mutex with std::mutex's interface (Lockable): works with std::lock_guard,
/// std::unique_lock, std::scoped_lock. See the header comment for the policy.
class mutex {
 public:
  constexpr mutex() noexcept = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;
  void lock() { core_.lock(); }
  bool try_lock() noexcept {
    detail::simulation_point();
    return core_.try_lock();
  }
  /// Precondition: the caller owns the mutex (checked with TESSERA_CHECKS).
  void unlock() { core_.unlock("tessera::mutex"); }

 private:
  detail::mutex_core core_;
};

/// mutex plus try_lock_for / try_lock_until (TimedLockable).
class timed_mutex {
 public:
  constexpr timed_mutex() noexcept { core_.set_type("tessera::timed_mutex"); }
  timed_mutex(const timed_mutex&) = delete;
  timed_mutex& operator=(const timed_mutex&) = delete;
  void lock() { core_.lock(); }
  bool try_lock() noexcept {
    detail::simulation_point();
    return core_.try_lock();
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return core_.lock_until(detail::deadline::after(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return core_.lock_until(detail::deadline::at(t));
  }
  void unlock() { core_.unlock("tessera::timed_mutex"); }

 private:
  detail::mutex_core core_;
};

/// A mutex its owner may lock again; unlocked when unlock() has been called as
/// many times as lock(). Ownership is per fiber (per thread, outside fibers).
class recursive_mutex {
 public:
  constexpr recursive_mutex() noexcept { core_.set_type("tessera::recursive_mutex"); }
  recursive_mutex(const recursive_mutex&) = delete;
  recursive_mutex& operator=(const recursive_mutex&) = delete;
  void lock() {
    rec_.enter(
        [this] {
          core_.lock();
          return true;
        },
        "tessera::recursive_mutex");
  }
  bool try_lock() {
    return rec_.enter([this] { return core_.try_lock(); }, "tessera::recursive_mutex");
  }
  void unlock();

 private:
  detail::mutex_core core_;
  detail::recursion rec_;
};

/// recursive_mutex plus try_lock_for / try_lock_until.
class recursive_timed_mutex {
 public:
  constexpr recursive_timed_mutex() noexcept { core_.set_type("tessera::recursive_timed_mutex"); }
  recursive_timed_mutex(const recursive_timed_mutex&) = delete;
  recursive_timed_mutex& operator=(const recursive_timed_mutex&) = delete;
  void lock() {
    rec_.enter(
        [this] {
          core_.lock();
          return true;
        },
        "tessera::recursive_timed_mutex");
  }
  bool try_lock() {
    return rec_.enter([this] { return core_.try_lock(); }, "tessera::recursive_timed_mutex");
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_until(*detail::deadline::after(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::deadline::at(t);
    return rec_.enter([&] { return core_.lock_until(deadline); }, "tessera::recursive_timed_mutex");
  }
  void unlock();

 private:
  detail::mutex_core core_;
  detail::recursion rec_;
};

}  // namespace tessera
