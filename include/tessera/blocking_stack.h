// tessera/blocking_stack.h — blocking_stack<T>: a stack whose pop() waits while
// it is empty, for fibers and OS threads (the blocking stack of Koval &
// Elizarov, "Dual Data Structures. Fast Semaphore.": `size` counts pushes
// minus pops; push resumes the next waiter when size was below zero, pop
// suspends when there was nothing to pop).
//
// Contract: blocking_pool<T, pool_order::lifo>'s (tessera/blocking_pool.h)
// under a stack's names — pop() gets the newest element; waiting poppers are
// served strictly in arrival order, each handed its element directly by the
// push() that found it waiting; timed and std::stop_token forms return
// nullopt when they give up, having taken nothing; nothing is lost or
// duplicated; a push() happens-before the pop() that gets its element; any
// fiber or OS thread may call; T nothrow move constructible.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <stop_token>
#include <utility>

#include "tessera/blocking_pool.h"

namespace tessera {

template <class T>
class blocking_stack {
 public:
  using value_type = T;

  /// Pushes `v`, or hands it to the longest-waiting pop().
  void push(T v) { pool_.put(std::move(v)); }
  /// Pops the newest element, waiting while the stack is empty.
  T pop() { return pool_.take(); }
  /// Pops if an element is there and nobody waits; never waits.
  std::optional<T> try_pop() { return pool_.try_take(); }
  /// pop() with a deadline: nullopt if nothing came in `rel_time`.
  template <class Rep, class Period>
  std::optional<T> try_pop_for(const std::chrono::duration<Rep, Period>& rel_time) {
    return pool_.try_take_for(rel_time);
  }
  template <class Clock, class Duration>
  std::optional<T> try_pop_until(const std::chrono::time_point<Clock, Duration>& abs_time) {
    return pool_.try_take_until(abs_time);
  }
  /// pop() until `stop` is requested: nullopt then.
  std::optional<T> pop(std::stop_token stop) { return pool_.take(std::move(stop)); }

  /// Elements on the stack now (a snapshot; 0 while poppers wait).
  std::size_t size() const noexcept { return pool_.size(); }
  /// Poppers parked now (a snapshot).
  std::size_t waiting() const noexcept { return pool_.waiting(); }

 private:
  blocking_pool<T, pool_order::lifo> pool_;
};

}  // namespace tessera
