// tessera/detail/park_list.h — the intrusive FIFO of parked callers that every
// queue-based bouncer shares (mutexes, reader-writer lock, condition variables,
// channels, the hand-off semaphore), the park-until-taken loop with timed
// withdrawal and its polling form, and the barge-spin-queue loop of the
// barging locks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "tessera/detail/cpu.h"
#include "tessera/detail/deadline.h"
#include "tessera/detail/poll_before_park.h"
#include "tessera/detail/tick_clock.h"
#include "tessera/park.h"

namespace tessera::detail {

/// What a parked caller was given when it was taken off its list (the mark
/// park_list::mark stores in park_node::mark), and what await_taken reports.
enum class park_mark : int {
  none = 0,         ///< not taken: still queued, or (await_taken) left the list at the deadline
  woken = 1,        ///< woken to compete again (a barging lock), notified, or admitted
  handed = 2,       ///< given what it waited for: the lock, a permit, a channel value
  closed = 3,       ///< the channel closed under it: nothing happened
  not_queued = -1,  ///< queue_while only: the wait condition cleared before it could queue
};

/// One parked caller, on its own stack. `mark` is park_mark::none while the
/// node is on a list; whoever takes it off stores what it was given.
/// Owners derive from it to carry their own fields.
struct park_node {
  waiter* who = nullptr;
  park_node* next = nullptr;
  park_node* prev = nullptr;
  std::atomic<park_mark> mark{park_mark::none};
  /// Guarded by the owner's lock: an OS thread still polling `mark`
  /// (poll_then_await), which whoever takes the node need not unpark.
  bool polling = false;
};

/// A doubly linked FIFO of park_nodes. Not synchronized: the owner guards it
/// with its own lock, and takes nodes off and marks them under that lock, so a
/// waiter that finds its node unmarked under the lock knows it is still queued.
class park_list {
 public:
  /// Racy outside the lock (a hint); exact under it.
  bool empty() const noexcept { return head_.load(std::memory_order_relaxed) == nullptr; }
  park_node* front() const noexcept { return head_.load(std::memory_order_relaxed); }
  /// Nodes on the list: a walk, under the owner's lock (for snapshots).
  std::size_t size() const noexcept {
    std::size_t k = 0;
    for (const park_node* n = front(); n != nullptr; n = n->next) ++k;
    return k;
  }

  void push_back(park_node& n) noexcept {
    n.next = nullptr;
    n.prev = tail_;
    if (tail_ != nullptr) {
      tail_->next = &n;
    } else {
      head_.store(&n, std::memory_order_relaxed);
    }
    tail_ = &n;
  }
  /// push_back() for a caller that will wait in poll_then_await(): an OS
  /// thread's node is marked as polling first, so a taker will not unpark it.
  void push_back_polling(park_node& n) noexcept {
    n.polling = n.who->ops->is_os_thread;
    push_back(n);
  }
  void push_front(park_node& n) noexcept {
    n.prev = nullptr;
    n.next = front();
    if (n.next != nullptr) {
      n.next->prev = &n;
    } else {
      tail_ = &n;
    }
    head_.store(&n, std::memory_order_relaxed);
  }
  /// Links `n` just before `pos` (a node on this list), or at the back if null.
  void insert_before(park_node* pos, park_node& n) noexcept {
    if (pos == nullptr) {
      push_back(n);
    } else if (pos->prev == nullptr) {
      push_front(n);
    } else {
      n.prev = pos->prev;
      n.next = pos;
      pos->prev->next = &n;
      pos->prev = &n;
    }
  }
  void unlink(park_node& n) noexcept {
    if (n.prev != nullptr) {
      n.prev->next = n.next;
    } else {
      head_.store(n.next, std::memory_order_relaxed);
    }
    if (n.next != nullptr) {
      n.next->prev = n.prev;
    } else {
      tail_ = n.prev;
    }
  }

  /// Marks an unlinked node with `how` (not park_mark::none) and returns whom
  /// to unpark: null while its owner still polls (it sees the mark without
  /// one). The node may die as soon as the store lands: read everything else
  /// first.
  static waiter* mark(park_node& n, park_mark how) noexcept {
    waiter* who = n.polling ? nullptr : n.who;
    n.mark.store(how, std::memory_order_release);
    return who;
  }
  /// unlink + mark.
  waiter* take(park_node& n, park_mark how) noexcept {
    unlink(n);
    return mark(n, how);
  }

 private:
  std::atomic<park_node*> head_{nullptr};  // atomic only for the lock-free empty() hint
  park_node* tail_ = nullptr;
};

/// await_taken's default: never leave before the deadline.
struct never_give_up {
  bool operator()() const noexcept { return false; }
};

/// Parks until `n` is taken and returns the value it was marked with. With a
/// deadline, once it passes — or as soon as `give_up()` holds (checked before
/// every park; whoever makes it true must unpark the waiter) — under `lock`, if
/// `n` is still on `list` it leaves it, runs `on_left()` (still under the lock)
/// and park_mark::none is returned; a node taken just as it left returns what
/// it was given.
template <class Lock, class OnLeft, class GiveUp = never_give_up>
park_mark await_taken(park_node& n, detail::deadline deadline, Lock& lock, park_list& list,
                      OnLeft&& on_left, GiveUp give_up = {}) {
  for (;;) {
    if (const park_mark v = n.mark.load(std::memory_order_acquire); v != park_mark::none) return v;
    if (!give_up()) {
      if (!deadline.has_value()) {
        park();
        continue;
      }
      if (park_until(*deadline)) continue;
    }
    lock.lock();
    const park_mark v = n.mark.load(std::memory_order_acquire);
    if (v == park_mark::none) {
      list.unlink(n);
      on_left();
    }
    lock.unlock();
    return v;
  }
}

/// await_taken() for a caller that queued `n` under `lock` with
/// push_back_polling(): an OS thread polls the mark for about `poll_ns` first
/// (poll_for; `n.polling` already says it is a thread), and whoever takes the
/// node meanwhile marks it without an unpark (park_list::mark). Before it
/// parks it clears `polling` under the lock and looks once more, so a taker
/// after that unparks it. A fiber awaits at once.
template <class Lock>
park_mark poll_then_await(park_node& n, detail::deadline deadline, Lock& lock, park_list& list,
                          unsigned poll_ns = kThreadPollNanos) {
  if (n.polling) {
    park_mark given = park_mark::none;
    auto taken = [&] {
      given = n.mark.load(std::memory_order_acquire);
      return given != park_mark::none;
    };
    if (poll_for(taken, poll_ns)) return given;
    lock.lock();
    n.polling = false;
    lock.unlock();
    if (taken()) return given;
  }
  return await_taken(n, deadline, lock, list, [] {});
}

/// The queueing step of the barging primitives (mutex_core, shared_timed_mutex,
/// the barging semaphore). Under `lock`: if `blocked(state)` still holds, sets
/// `queued` (only while `blocked` holds, so whoever unblocks is sure to see it)
/// and links `n` with `link(list, n)`, then parks until `n` is taken
/// (await_taken; a waiter that leaves on timeout clears `queued` once the list
/// is empty). Returns the mark, park_mark::none after a timeout, or
/// park_mark::not_queued at once if `blocked` stopped holding before `n` could
/// be queued (the caller tries again).
template <class Word, class Blocked, class Link, class Lock>
park_mark queue_while(std::atomic<Word>& state, Blocked&& blocked, Word queued, Lock& lock,
                      park_list& list, park_node& n, Link&& link, detail::deadline deadline) {
  lock.lock();
  Word s = state.load(std::memory_order_relaxed);
  bool ok = false;
  while (blocked(s)) {
    if ((s & queued) != 0 ||
        state.compare_exchange_weak(s, s | queued, std::memory_order_relaxed)) {
      ok = true;
      break;
    }
  }
  if (!ok) {
    lock.unlock();
    return park_mark::not_queued;
  }
  link(list, n);
  lock.unlock();
  return await_taken(n, deadline, lock, list, [&] {
    if (list.empty()) state.fetch_and(static_cast<Word>(~queued), std::memory_order_relaxed);
  });
}

/// queue_while() for the locks: blocked while the `held` bits are set; a
/// re-queued waiter goes back to the front, where it was woken from.
template <class Word, class Lock>
park_mark queue_while_held(std::atomic<Word>& state, Word held, Word queued, Lock& lock,
                           park_list& list, park_node& n, bool requeue, detail::deadline deadline) {
  return queue_while(
      state, [held](Word s) { return (s & held) != 0; }, queued, lock, list, n,
      [requeue](park_list& l, park_node& m) { requeue ? l.push_front(m) : l.push_back(m); },
      deadline);
}

/// After a hand-off to a fiber, the next may come this soon: a fiber handed
/// the lock runs after a user-space switch, not a futex wake, so hand-offs may
/// come more often than to threads. The longest wait against throughput at
/// 1 ms, 100 µs, 40 µs and 20 µs is measured in docs/benchmarks.md
/// ("Constants").
inline constexpr std::chrono::microseconds kFiberHandoffInterval{40};

/// How often fairness may override throughput for `who`: `thread_interval` for
/// an OS thread (each override costs a futex wake), kFiberHandoffInterval for a
/// fiber (a user-space switch). The barging locks' hand-offs and the semaphore
/// lobby's forced entries both follow it.
inline std::chrono::microseconds fairness_interval(const waiter& who,
                                                   std::chrono::microseconds thread_interval) {
  return who.ops->is_os_thread ? thread_interval : kFiberHandoffInterval;
}

/// What the barging primitives' rate-limited fairness (parking_lot's "be fair"
/// timer) says about a queue's oldest waiter: not yet due; hand it the lock or
/// permit now; or due, but held back because the last hand-off is too recent.
enum class fairness { not_due, hand_off, held_back };

/// `head`, queued since `since`, is due once it has waited at least `after`;
/// it is handed off only if the caller `can_hand_off` and `next_fair`
/// (guarded, like the queue, by the caller's queue lock) has passed, which it
/// then moves on: by `after` when `head` is an OS thread (a hand-off to a
/// sleeping thread keeps the lock idle through its wake-up, so at most one per
/// `after`), by kFiberHandoffInterval when a fiber.
/// Times are tick_clock readings: the timer is read on every wake-up.
inline fairness fair_handoff(const park_node& head, tick_clock::rep since,
                             tick_clock::rep& next_fair, std::chrono::microseconds after,
                             bool can_hand_off = true) {
  const tick_clock::rep now = tick_clock::now();
  if (now - since < tick_clock::ticks(after)) return fairness::not_due;
  if (!can_hand_off || now - next_fair < 0) return fairness::held_back;
  next_fair = now + tick_clock::ticks(fairness_interval(*head.who, after));
  return fairness::hand_off;
}

/// fair_handoff() == fairness::hand_off.
inline bool fair_handoff_due(const park_node& head, tick_clock::rep since,
                             tick_clock::rep& next_fair, std::chrono::microseconds after) {
  return fair_handoff(head, since, next_fair, after) == fairness::hand_off;
}

/// How the barging loop ended.
enum class acquire_result : std::uint8_t {
  timed_out,  ///< the deadline passed
  barged,     ///< the caller took it itself
  handed,     ///< a releaser handed it over (fairness)
};

/// The waiting loop of the barging locks: `try_barge()`; else poll
/// `spin_budget` times (OS threads; 0 for fibers); else `queue(requeue)`,
/// which queues and parks (a queue_while_held call) and returns its park_mark.
/// A waiter woken to compete (park_mark::woken) retries with a fresh spin
/// budget and, losing, re-queues at the front (`requeue`); its node keeps
/// the time the caller's wait began (the fairness timer's measure, one
/// tick_clock::now() reading the caller's wait_scope stamps too).
/// park_mark::not_queued retries as it is. The deadline is checked only after
/// a failed barge, so a woken waiter always retries before it gives up.
template <class TryBarge, class Queue>
acquire_result barge_or_queue(detail::deadline deadline, unsigned spin_budget, TryBarge&& try_barge,
                              Queue&& queue) {
  unsigned spins = spin_budget;
  bool requeue = false;
  for (;;) {
    if (try_barge()) return acquire_result::barged;
    if (spins > 0) {
      --spins;
      cpu_relax();
      continue;
    }
    if (deadline.passed()) return acquire_result::timed_out;
    const park_mark got = queue(requeue);
    if (got == park_mark::none) return acquire_result::timed_out;
    if (got == park_mark::handed) return acquire_result::handed;
    if (got == park_mark::woken) {
      requeue = true;
      spins = spin_budget;
    }
  }
}

}  // namespace tessera::detail
