// tessera/blocking_pool.h — blocking_pool<T, Order>: a pool of elements whose
// take() waits while the pool is empty, for fibers and OS threads; the pool of
// Koval, Khalanskiy & Alistarh, "CQS: A Formally-Verified Framework for Fair
// and Abortable Synchronization" (PLDI 2023), on the segment queue
// synchronizer. blocking_stack<T> (tessera/blocking_stack.h) is its LIFO form
// under a stack's names. The example to copy is a connection pool: put()
// returns a connection, take() borrows one.
//
// Contract
// - Elements: `Order` says which stored element take() gets — pool_order::fifo
//   the oldest put, pool_order::lifo the newest (warm caches; a stack).
// - Waiters: strict FIFO. A put() that finds takers waiting hands its element
//   to the one that has waited longest, directly (never through the storage,
//   so no later take() can get it first); otherwise it stores it. No taker
//   barges past a waiting one: try_take() succeeds only while nobody waits.
//   (A taker whose thread is preempted between counting itself and reaching
//   its cell may find the cell broken by a put that could not wait for it;
//   it then queues again, behind those who came meanwhile.)
// - Nothing is lost or duplicated: every element put is taken exactly once or
//   still in the pool (size() counts it). A take that times out or is stopped
//   takes nothing and leaves nothing behind; one that was handed an element
//   just as its deadline passed returns it.
// - Blocking: take() parks the caller (a fiber switches, a thread sleeps on
//   its futex). No spurious wake-ups are visible. Timed forms never fail
//   before the deadline (steady_clock; durations in any std::chrono unit);
//   a zero or negative duration is try_take(). A std::stop_token form returns
//   nullopt once a stop is requested (checked before it waits, and it wakes
//   the waiter).
// - Memory ordering: a put() happens-before the take() that gets its element.
// - Who may call: any fiber or OS thread, mixed, any number of each.
// - Progress: the count and the stored elements (a std::deque) change under a
//   few-instruction spin lock; waiting takers wait in the segment queue
//   synchronizer's cells, holding no lock, and are handed elements there.
// - Requirements on T: nothrow move constructible and destructible.
// - Misuse: destroying a pool while callers wait in take() is undefined; debug
//   builds (TESSERA_CHECKS) abort with a message saying so. put() may throw
//   std::bad_alloc from the storage, and then the pool is unchanged; an
//   allocation of a hand-over box that fails terminates.
//
//   size_   stored elements minus takers that found none (waiting, or timed
//           out and not yet paid back): elements free when positive
//
//   put(x):  under the lock, size_ += 1; if it was >= 0, store x: done. Else a
//            taker is owed one: resume() the next cell with x (outside the
//            lock), synchronously. A cancelled cell fails the resume and the
//            put goes round again: its increment paid the timed-out taker's
//            decrement back (simple cancellation, as the fetch-and-add
//            semaphore). So does a cell whose taker had not arrived within
//            the resume's short wait: the resume breaks it.
//   take():  under the lock, size_ -= 1; if it was > 0, take from the storage.
//            Else suspend() in the next cell and get what it is handed; a
//            broken cell (its put gave up on us and paid our decrement
//            back) sends the take round again.
//
// Why synchronous resumption (CQS's SYNC mode). Asynchronously, a put() whose
// taker is slow to reach its cell would leave the element there and return;
// a try_take() after it would find the pool empty, and a later taker can
// overtake the slow one to that cell. The element would be in the pool and
// in nobody's view. Synchronously, put() returns only once a taker holds the
// element, or it stored it: the pool stays linearizable as a plain queue or
// stack (tests/linearizability_test.cpp checks the stack so).
//
// Why the count shares the storage's lock. With the count changed by
// fetch-and-add outside it, a taker that counted an element and a put that
// stored a newer one race to the storage, and a stack hands the taker the
// newer element while a try_take() in between saw the pool empty: not
// linearizable (tests/linearizability_test.cpp found it). Under one lock the
// count and the storage change together; waiting stays in the synchronizer's
// cells, where the lock is not held.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "tessera/detail/cpu.h"
#include "tessera/detail/deadline.h"
#include "tessera/detail/segment_queue.h"
#include "tessera/detail/spin_lock.h"

namespace tessera {

/// Which stored element take() gets.
enum class pool_order {
  fifo,  ///< the oldest put (a queue)
  lifo,  ///< the newest put (a stack)
};

template <class T, pool_order Order = pool_order::fifo>
class blocking_pool {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "tessera::blocking_pool<T>: T must be nothrow move constructible");

 public:
  using value_type = T;

  blocking_pool() = default;
  ~blocking_pool() {
#if TESSERA_CHECKS
    if (q_.parked() != 0) {
      detail::misuse_abort("tessera::blocking_pool destroyed while takers wait on it");
    }
#endif
  }
  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  /// Adds `v`: hands it to the longest-waiting taker, or stores it.
  void put(T v) {
    for (;;) {
      {
        std::lock_guard lock(lock_);
        if (size_.load(std::memory_order_relaxed) >= 0) {
          items_.push_back(std::move(v));  // may throw: nothing changed yet
          size_.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        size_.fetch_add(1, std::memory_order_relaxed);
      }
      // A taker is owed an element: hand it to the next cell.
      T* box = make_box(std::move(v));
      if (q_.resume(detail::segment_queue::element(box),
                    detail::segment_queue::resume_mode::sync)) {
        return;  // the taker owns it now
      }
      // That taker gave up, or had not come and its cell is broken; either
      // way our increment paid its decrement back.
      std::destroy_at(&v);
      ::new (static_cast<void*>(&v)) T(std::move(*box));
      delete box;
    }
  }

  /// Takes an element, waiting while there is none.
  T take() {
    return *take_until({}, nullptr);
  }
  /// Takes an element if one is free and nobody waits; never waits.
  std::optional<T> try_take() {
    return take_stored(false);
  }
  /// take() with a deadline: nullopt if none came in `rel_time`.
  template <class Rep, class Period>
  std::optional<T> try_take_for(const std::chrono::duration<Rep, Period>& rel_time) {
    if (rel_time <= rel_time.zero()) return try_take();
    return take_until(detail::deadline::after(rel_time), nullptr);
  }
  template <class Clock, class Duration>
  std::optional<T> try_take_until(const std::chrono::time_point<Clock, Duration>& abs_time) {
    return take_until(detail::deadline::at(abs_time), nullptr);
  }
  /// take() until `stop` is requested: nullopt then.
  std::optional<T> take(std::stop_token stop) {
    if (stop.stop_requested()) return try_take();
    return take_until({}, &stop);
  }

  /// Elements stored now (a snapshot; 0 while takers wait).
  std::size_t size() const noexcept {
    const std::int64_t n = size_.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }
  /// Takers parked now (a snapshot).
  std::size_t waiting() const noexcept {
    return static_cast<std::size_t>(q_.parked());
  }

 private:
  static constexpr const char* kKind =
      Order == pool_order::fifo ? "blocking_pool" : "blocking_stack";

  std::optional<T> take_until(detail::deadline d, const std::stop_token* stop) {
    for (;;) {
      if (auto v = take_stored(true)) return v;
      const std::uintptr_t got = q_.suspend(d, kKind, this, stop);
      if (got == 0) return std::nullopt;
      if (got != detail::segment_queue::kBroken) return unbox(got);
      // The put for our cell gave up on us and paid our decrement back.
    }
  }
  /// Under the lock: a stored element if one is free. Else nullopt, and with
  /// `queue` the caller is counted as a taker owed one (it must suspend()).
  std::optional<T> take_stored(bool queue) {
    std::lock_guard lock(lock_);
    const std::int64_t n = size_.load(std::memory_order_relaxed);
    if (n <= 0) {
      if (queue) size_.store(n - 1, std::memory_order_relaxed);
      return std::nullopt;
    }
    size_.store(n - 1, std::memory_order_relaxed);
    T* slot = Order == pool_order::fifo ? &items_.front() : &items_.back();
    std::optional<T> v(std::move(*slot));
    if constexpr (Order == pool_order::fifo) {
      items_.pop_front();
    } else {
      items_.pop_back();
    }
    return v;
  }
  static std::optional<T> unbox(std::uintptr_t got) noexcept {
    std::unique_ptr<T> box(detail::segment_queue::element_of<T>(got));
    return std::optional<T>(std::move(*box));
  }
  // Once put() has counted its element, it cannot fail half-way: the box is
  // allocated under noexcept (an allocation failure terminates).
  static T* make_box(T&& v) noexcept {
    return new T(std::move(v));
  }

  detail::spin_lock lock_;
  std::atomic<std::int64_t> size_{0};  // written under lock_; read racily by size()
  std::deque<T> items_;                // guarded by lock_
  detail::segment_queue q_;
};

}  // namespace tessera
