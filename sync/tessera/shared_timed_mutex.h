// tessera/shared_timed_mutex.h — shared_mutex and shared_timed_mutex: reader-
// writer locks (the timed one's shared and exclusive acquisitions can time out).
//
// Box office: `state_` (64 bits) plus a FIFO queue of parked callers (readers
// and writers, on-stack nodes) under a spin lock. Where shared_mutex's Preshing
// box office cannot tell which waiter a count belongs to, the queue can: a
// timed-out caller takes its own node out, which is what makes timeouts exact.
//
//   bit 63  WRITER   held exclusively
//   bit 62  QUEUED   the queue is not empty: no fast path for anyone
//   0..61   readers  holding it shared
//
//   lock_shared fast path   CAS +1 reader  if neither WRITER nor QUEUED
//   lock fast path          CAS 0 -> WRITER
//   otherwise               queue (FIFO), park until granted
//   unlock / last unlock_shared with QUEUED set: dispatch — grant the head of the
//   queue: a writer alone once nobody holds the lock, or every reader up to the
//   next queued writer, as one batch.
//
// Preference: FIFO with reader batching. Once anyone queues, new readers queue
// behind it, so a writer is never starved by a stream of readers, and readers
// queued behind a writer all enter together when it leaves (phase-fair).
// Why not Preshing's box office (seed 002; preshing_shared_mutex.h)? Its
// semaphore bouncers hand over FIFO, so under oversubscription each write stalls
// every reader behind parked threads: read-mostly (1 write per 100 reads) with 8
// threads on 2 cores took ~700 ns per operation there, ~20 ns here.
//
// Contract: std::shared_timed_mutex's interface (shared_mutex: the untimed part), for fibers and OS threads
// mixed; try_lock_for/until and try_lock_shared_for/until never return false
// before the deadline, and a caller that times out leaves nothing behind (if it
// was granted the lock as it timed out, it keeps it and returns true). unlock()
// and unlock_shared() synchronize-with the acquisitions they admit. Misuse
// (TESSERA_CHECKS): unlocking what is not held, destroying it locked or with
// waiters, abort with a message. Spurious wake-ups: none.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tessera/detail/park_list.h"
#include "tessera/detail/spin_lock.h"
#include "tessera/mutex.h"  // detail::to_steady, detail::deadline_after

namespace tessera {

class shared_timed_mutex {
 public:
  shared_timed_mutex() noexcept = default;
  ~shared_timed_mutex();
  shared_timed_mutex(const shared_timed_mutex&) = delete;
  shared_timed_mutex& operator=(const shared_timed_mutex&) = delete;

  void lock() { (void)acquire(false, nullptr); }
  bool try_lock() noexcept {
    std::uint64_t expected = 0;
    return state_.compare_exchange_strong(expected, kWriter, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    const auto deadline = detail::deadline_after(d);
    return try_lock() || acquire(false, &deadline);
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::to_steady(t);
    return try_lock() || acquire(false, &deadline);
  }
  void unlock();

  void lock_shared() {
    if (!try_lock_shared()) (void)acquire(true, nullptr);
  }
  bool try_lock_shared() noexcept {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    while ((s & (kWriter | kQueued)) == 0) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    const auto deadline = detail::deadline_after(d);
    return try_lock_shared() || acquire(true, &deadline);
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::to_steady(t);
    return try_lock_shared() || acquire(true, &deadline);
  }
  void unlock_shared();

 protected:
  /// For shared_mutex: names the type in misuse messages.
  explicit shared_timed_mutex(const char* type) noexcept : type_(type) {}

 private:
  static constexpr std::uint64_t kWriter = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kQueued = std::uint64_t{1} << 62;
  static constexpr std::uint64_t kReaders = kQueued - 1;
  struct node;

  bool acquire(bool shared, const std::chrono::steady_clock::time_point* deadline);
  void dispatch() noexcept;  // under lock_
  bool try_grant_locked(bool shared) noexcept;

  std::atomic<std::uint64_t> state_{0};
  detail::spin_lock lock_;
  detail::park_list queue_;  // guarded by lock_
  const char* type_ = "tessera::shared_timed_mutex";
};

/// The reader-writer lock: std::shared_mutex's interface, the box office above.
class shared_mutex : private shared_timed_mutex {
 public:
  shared_mutex() noexcept : shared_timed_mutex("tessera::shared_mutex") {}
  using shared_timed_mutex::lock;
  using shared_timed_mutex::lock_shared;
  using shared_timed_mutex::try_lock;
  using shared_timed_mutex::try_lock_shared;
  using shared_timed_mutex::unlock;
  using shared_timed_mutex::unlock_shared;
};

}  // namespace tessera
