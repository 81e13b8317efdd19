// tessera/condition_variable.h — condition_variable, condition_variable_any,
// condition_variable_atomic (P0514R2 §33.5.5).
//
// Box office / bouncer (Preshing, "Semaphores are Surprisingly Versatile"): the box office is the
// caller's own condition (guarded by its lock, or an atomic<T>); the bouncer is a FIFO of parked
// callers (detail/waiter_queue.h). No state word of our own: a notification with nobody waiting
// does nothing, as the standard says.
//
//   queue state        wait()                           notify_one()        notify_all()
//   empty              push node, unlock, park           nothing             nothing
//   w1 .. wn           push behind wn, unlock, park      wake w1 (oldest)    wake w1 .. wn
//
// Contract
// - notify_one wakes exactly one waiter (the oldest), never all of them;
//   notify_all wakes every waiter queued at the time of the call.
// - No notification is lost: a waiter is queued before it unlocks, so a notify
//   issued after the waiter's unlock finds it. A waiter that times out just as it
//   is notified reports no_timeout and keeps the notification.
// - Spurious wake-ups: none. wait() returns after a notify_one/notify_all that
//   chose this waiter, or (timed forms) at the deadline. Use the predicate forms
//   anyway: another caller may change the condition between notify and return.
// - wait_for/wait_until: durations in any std::chrono unit; never time out
//   before the deadline; other clocks are converted to steady_clock at the call.
// - condition_variable_any's stop_token forms (C++20's interruptible waits)
//   also return once a stop is requested; the request wakes the waiter.
// - Who may call: any fiber or OS thread, mixed on one condition variable.
//   Precondition of every wait: the caller holds `lock`; it holds it again on
//   return (also on timeout).
// - Misuse, checked with TESSERA_CHECKS: destroying a condition variable that
//   still has waiters aborts with a message.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>  // std::cv_status
#include <mutex>
#include <stop_token>

#include "tessera/detail/deadline.h"
#include "tessera/detail/waiter_queue.h"
#include "tessera/mutex.h"
#include "tessera/park.h"

namespace tessera {

using std::cv_status;

namespace detail {
/// The waiting logic shared by the three condition variables.
class cv_core {
 public:
  constexpr cv_core() noexcept = default;
  ~cv_core();
  cv_core(const cv_core&) = delete;
  cv_core& operator=(const cv_core&) = delete;

  template <class Lock>
  cv_status wait(Lock& lock, detail::deadline deadline) {
    keyed_park_node n;
    n.who = self();
    queue_.push(n);
    lock.unlock();
    bool woken;
    {
      const wait_scope scope(n.who, "condition_variable", this);
      woken = queue_.await(n, deadline);
    }
    relock(lock);
    return woken ? cv_status::no_timeout : cv_status::timeout;
  }
  void notify_one() noexcept {
    detail::simulation_point();
    queue_.wake_one();
  }
  void notify_all() noexcept {
    detail::simulation_point();
    queue_.wake_all();
  }
  waiter_queue& queue() noexcept { return queue_; }

  /// Re-takes the caller's lock after a wait. The standard
  /// ([thread.condvarany.wait]) calls std::terminate when that throws: a
  /// waiter cannot return, or unwind, without the lock it came in with. The
  /// noexcept boundary does exactly that.
  template <class Lock>
  static void relock(Lock& lock) noexcept {
    lock.lock();
  }

  /// One wait that a stop request on `stop` also ends. Returns true if notified.
  /// The stop_callback only unparks us, by identity (type-stable: harmless once
  /// we are gone). It must not touch the queue: the queue's spin lock may yield
  /// a fiber, and libstdc++'s ~stop_callback does not wait for a callback
  /// running on its own OS thread, so a fiber on our worker running the
  /// callback could yield to us, and we would return while it still used our
  /// node. We leave the queue ourselves once we see the request.
  template <class Lock>
  bool wait(Lock& lock, const std::stop_token& stop, detail::deadline deadline) {
    keyed_park_node n;
    n.who = self();
    queue_.push(n);
    bool woken;
    {
      std::stop_callback wake_on_stop(stop, [who = n.who]() noexcept { unpark(who); });
      lock.unlock();
      const wait_scope scope(n.who, "condition_variable", this);
      woken = queue_.await(n, deadline, stop);
    }
    relock(lock);
    return woken;
  }
  /// [thread.condvarany.intwait]'s loop: until pred() holds, a stop is
  /// requested or the deadline (if any) passes; returns pred().
  template <class Lock, class Predicate>
  bool wait_until(Lock& lock, const std::stop_token& stop, detail::deadline deadline,
                  Predicate& pred) {
    while (!stop.stop_requested()) {
      if (pred()) return true;
      if (!stop.stop_possible()) {
        if (wait(lock, deadline) == cv_status::timeout) return pred();
      } else if (!wait(lock, stop, deadline) && deadline.passed()) {
        return pred();
      }
    }
    return pred();
  }

  /// The predicate form of wait_until/wait_for shared by both condition variables.
  template <class Lock, class Predicate>
  bool wait_until(Lock& lock, detail::deadline deadline, Predicate& pred) {
    while (!pred()) {
      if (wait(lock, deadline) == cv_status::timeout) return pred();
    }
    return true;
  }

 private:
  waiter_queue queue_;
};
}  // namespace detail

/// A condition variable for std::unique_lock<tessera::mutex>.
class condition_variable {
 public:
  constexpr condition_variable() noexcept = default;
  condition_variable(const condition_variable&) = delete;
  condition_variable& operator=(const condition_variable&) = delete;

  void notify_one() noexcept { core_.notify_one(); }
  void notify_all() noexcept { core_.notify_all(); }

  void wait(std::unique_lock<mutex>& lock) { core_.wait(lock, {}); }
  template <class Predicate>
  void wait(std::unique_lock<mutex>& lock, Predicate pred) {
    while (!pred()) wait(lock);
  }
  template <class Clock, class Duration>
  cv_status wait_until(std::unique_lock<mutex>& lock,
                       const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::deadline::at(t);
    return core_.wait(lock, deadline);
  }
  template <class Clock, class Duration, class Predicate>
  bool wait_until(std::unique_lock<mutex>& lock, const std::chrono::time_point<Clock, Duration>& t,
                  Predicate pred) {
    return core_.wait_until(lock, detail::deadline::at(t), pred);
  }
  template <class Rep, class Period>
  cv_status wait_for(std::unique_lock<mutex>& lock, const std::chrono::duration<Rep, Period>& d) {
    const auto deadline = detail::deadline::after(d);
    return core_.wait(lock, deadline);
  }
  template <class Rep, class Period, class Predicate>
  bool wait_for(std::unique_lock<mutex>& lock, const std::chrono::duration<Rep, Period>& d,
                Predicate pred) {
    return core_.wait_until(lock, detail::deadline::after(d), pred);
  }

 private:
  detail::cv_core core_;
};

/// A condition variable for any BasicLockable (std::mutex, tessera::mutex,
/// std::unique_lock<...>, ...).
class condition_variable_any {
 public:
  constexpr condition_variable_any() noexcept = default;
  condition_variable_any(const condition_variable_any&) = delete;
  condition_variable_any& operator=(const condition_variable_any&) = delete;

  void notify_one() noexcept { core_.notify_one(); }
  void notify_all() noexcept { core_.notify_all(); }

  template <class Lock>
  void wait(Lock& lock) {
    core_.wait(lock, {});
  }
  template <class Lock, class Predicate>
  void wait(Lock& lock, Predicate pred) {
    while (!pred()) wait(lock);
  }
  template <class Lock, class Clock, class Duration>
  cv_status wait_until(Lock& lock, const std::chrono::time_point<Clock, Duration>& t) {
    const auto deadline = detail::deadline::at(t);
    return core_.wait(lock, deadline);
  }
  template <class Lock, class Clock, class Duration, class Predicate>
  bool wait_until(Lock& lock, const std::chrono::time_point<Clock, Duration>& t, Predicate pred) {
    return core_.wait_until(lock, detail::deadline::at(t), pred);
  }
  template <class Lock, class Rep, class Period>
  cv_status wait_for(Lock& lock, const std::chrono::duration<Rep, Period>& d) {
    const auto deadline = detail::deadline::after(d);
    return core_.wait(lock, deadline);
  }
  template <class Lock, class Rep, class Period, class Predicate>
  bool wait_for(Lock& lock, const std::chrono::duration<Rep, Period>& d, Predicate pred) {
    return core_.wait_until(lock, detail::deadline::after(d), pred);
  }

  // Interruptible waits (C++20 [thread.condvarany.intwait]): as the predicate
  // forms above, but they also return, with pred()'s value, once a stop is
  // requested on `stoken` — at once if it already was. A request made while
  // the caller is parked wakes exactly that caller (a std::stop_callback
  // unparks it; request_stop() does not wait for it to run). A waiter that
  // returns because of a stop request after notify_one() chose it has
  // consumed that notification, as with the standard's own definition of
  // these waits. A token with no stop_source costs nothing extra.
  template <class Lock, class Predicate>
  bool wait(Lock& lock, std::stop_token stoken, Predicate pred) {
    return core_.wait_until(lock, stoken, {}, pred);
  }
  template <class Lock, class Clock, class Duration, class Predicate>
  bool wait_until(Lock& lock, std::stop_token stoken,
                  const std::chrono::time_point<Clock, Duration>& t, Predicate pred) {
    const auto deadline = detail::deadline::at(t);
    return core_.wait_until(lock, stoken, deadline, pred);
  }
  template <class Lock, class Rep, class Period, class Predicate>
  bool wait_for(Lock& lock, std::stop_token stoken, const std::chrono::duration<Rep, Period>& d,
                Predicate pred) {
    const auto deadline = detail::deadline::after(d);
    return core_.wait_until(lock, stoken, deadline, pred);
  }

 private:
  detail::cv_core core_;
};

/// P0514R2's condition_variable_atomic: waits on a predicate over one
/// std::atomic<T>, without a lock. notify_one/notify_all(object) wake the callers
/// waiting on *this for that object. Timed forms return false on timeout.
class condition_variable_atomic {
 public:
  constexpr condition_variable_atomic() noexcept = default;
  condition_variable_atomic(const condition_variable_atomic&) = delete;
  condition_variable_atomic& operator=(const condition_variable_atomic&) = delete;

  template <class T>
  void notify_one(const std::atomic<T>& object) noexcept {
    core_.queue().wake_one(&object);
  }
  template <class T>
  void notify_all(const std::atomic<T>& object) noexcept {
    core_.queue().wake_all(&object);
  }

  /// Returns once object.load(order) != old.
  template <class T>
  void wait(const std::atomic<T>& object, typename std::atomic<T>::value_type old,
            std::memory_order order = std::memory_order_seq_cst) {
    wait(
        object, old, [old](T v) { return v != old; }, order);
  }
  /// Returns once pred(object.load(order)) holds. (`old` is kept for P0514's
  /// signature; the predicate alone decides.)
  template <class T, class Predicate>
  void wait(const std::atomic<T>& object, typename std::atomic<T>::value_type /*old*/,
            Predicate pred, std::memory_order order = std::memory_order_seq_cst) {
    while (!wait_step(object, pred, order, {})) {
    }
  }
  template <class T, class Clock, class Duration>
  bool wait_until(const std::atomic<T>& object, typename std::atomic<T>::value_type old,
                  const std::chrono::time_point<Clock, Duration>& t,
                  std::memory_order order = std::memory_order_seq_cst) {
    return wait_until(
        object, old, t, [old](T v) { return v != old; }, order);
  }
  template <class T, class Clock, class Duration, class Predicate>
  bool wait_until(const std::atomic<T>& object, typename std::atomic<T>::value_type /*old*/,
                  const std::chrono::time_point<Clock, Duration>& t, Predicate pred,
                  std::memory_order order = std::memory_order_seq_cst) {
    const auto deadline = detail::deadline::at(t);
    for (;;) {
      if (wait_step(object, pred, order, deadline)) return true;
      if (deadline.passed()) return pred(object.load(order));
    }
  }
  template <class T, class Rep, class Period>
  bool wait_for(const std::atomic<T>& object, typename std::atomic<T>::value_type old,
                const std::chrono::duration<Rep, Period>& d,
                std::memory_order order = std::memory_order_seq_cst) {
    return wait_until(object, old, *detail::deadline::after(d), order);
  }
  template <class T, class Rep, class Period, class Predicate>
  bool wait_for(const std::atomic<T>& object, typename std::atomic<T>::value_type old,
                const std::chrono::duration<Rep, Period>& d, Predicate pred,
                std::memory_order order = std::memory_order_seq_cst) {
    return wait_until(object, old, *detail::deadline::after(d), std::move(pred), order);
  }

 private:
  // One round: true if the predicate holds; else queue, re-check (through the
  // queue lock, against a notifier that changed the value before notifying),
  // and park until notified or the deadline.
  template <class T, class Predicate>
  bool wait_step(const std::atomic<T>& object, Predicate& pred, std::memory_order order,
                 detail::deadline deadline) {
    if (pred(object.load(order))) return true;
    detail::keyed_park_node n;
    n.who = self();
    n.key = &object;
    core_.queue().push(n);
    if (pred(object.load(std::memory_order_seq_cst))) {
      // A notify_one may have chosen us meanwhile: we do not need it, pass it on.
      if (!core_.queue().remove(n)) core_.queue().wake_one(&object);
      return true;
    }
    const wait_scope scope("condition_variable_atomic", this);
    core_.queue().await(n, deadline);
    return false;
  }

  detail::cv_core core_;
};

}  // namespace tessera
