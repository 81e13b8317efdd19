// tessera/detail/waiter_queue.h — a FIFO of parked callers (on-stack nodes),
// guarded by a small spinlock: the bouncer of the condition variables.
#pragma once

#include <atomic>
#include <chrono>
#include <stop_token>

#include "tessera/detail/deadline.h"
#include "tessera/detail/park_list.h"
#include "tessera/detail/spin_lock.h"
#include "tessera/park.h"

namespace tessera::detail {

/// A park_node that says what its caller waits for (condition_variable_atomic's
/// address; null for the other condition variables).
struct keyed_park_node : park_node {
  const void* key = nullptr;
};

/// A queue of parked callers. Each waiter pushes a node from its own stack,
/// parks until the node is marked, and leaves by itself on timeout. Marking and
/// dequeuing happen together under the lock, so a waiter that finds its node
/// unmarked under the lock knows it is still queued.
///
/// Ordering: everything a notifier did before wake_*() happens-before the woken
/// waiter's return (the lock, then release/acquire on `mark`); a waiter that
/// pushes, then re-checks its condition, cannot miss a notifier that changes the
/// condition before calling wake_*() (both sides go through the lock).
class waiter_queue {
 public:
  waiter_queue() noexcept = default;
  waiter_queue(const waiter_queue&) = delete;
  waiter_queue& operator=(const waiter_queue&) = delete;

  void push(keyed_park_node& n) noexcept;
  /// Takes `n` out if it is still queued; false if a wake_*() got it first.
  bool remove(keyed_park_node& n) noexcept;
  /// Wakes the oldest waiter (with `key`, unless key is null). True if one was woken.
  bool wake_one(const void* key = nullptr) noexcept;
  /// Wakes every waiter (with `key`, unless key is null). Returns how many.
  int wake_all(const void* key = nullptr) noexcept;
  bool empty() const noexcept { return list_.empty(); }

  /// Parks until `n` is woken or `deadline` passes (null: no deadline). Returns
  /// false only on a timeout that removed `n` from the queue.
  bool await(keyed_park_node& n, detail::deadline deadline);
  /// await() that also ends once a stop is requested on `stop`, leaving the
  /// queue. The caller must have registered a stop_callback that unparks it
  /// (and does nothing else: a callback that could yield would let this fiber's
  /// worker run us past the callback's end; see cv_core). Returns true if woken
  /// (also when a wake took `n` just as we left), false after a stop request
  /// or a timeout removed `n`.
  bool await(keyed_park_node& n, detail::deadline deadline, const std::stop_token& stop);

 private:
  void lock() noexcept { lock_.lock(); }
  void unlock() noexcept { lock_.unlock(); }

  spin_lock lock_;
  park_list list_;  // guarded by lock_
};

}  // namespace tessera::detail
