// counting_semaphore's admission::barging core (tessera/detail/barging_semaphore.h):
// a ticketless box office with the mutexes' rate-limited fair hand-off.
//
// Barging admission (admission::barging; tessera/detail/barging_semaphore.h)
//   The box office of tessera::mutex with a count for its LOCKED bit: one word
//   holds the free permits and two flags. acquire() takes a free permit with one
//   CAS whoever is queued (so does try_acquire: it barges); a caller that finds
//   none queues and parks (OS threads poll 16 times first). release(n) adds n
//   permits and wakes as many of the oldest waiters, who then compete with
//   newcomers; while a woken waiter is on its way, further releases wake nobody
//   (one CAS each). Fairness: a waiter that has waited 1 ms is handed a permit
//   directly, at most once per 1 ms when it is an OS thread and once per 40 µs
//   when a fiber, so a waiter k places back gets in within about (k + 1) ms (a
//   thread) or 1 + k/10 ms (a fiber). It is sem_t's and std::counting_semaphore's
//   policy, and the one that pays under contention: no hand-off convoy, the
//   holder keeps running on a warm cache (docs/benchmarks.md has the figures).
//   The price: no arrival order, and p99.9 waits longer than restricted
//   admission's. Counts are limited to 2^62-1 (two bits of the word are flags):
//   a larger initial count or release throws std::invalid_argument, saying so.
//   queued() and waiting() count the parked callers (a woken one on its way is
//   not counted); lobby() is 0.
//
#include "tessera/semaphore.h"

#include <stdexcept>
#include <string>

#include "semaphore_errors.h"

namespace tessera::detail {

struct barging_semaphore::node : park_node {
  tick_clock::rep since;  // when this acquire began to wait (tick_clock)
};

barging_semaphore::~barging_semaphore() {
#if TESSERA_CHECKS
  if (!queue_.empty()) destroyed_with_waiters();
#endif
}

void barging_semaphore::bad_update(std::ptrdiff_t update, std::ptrdiff_t max) const {
  throw_bad_update(update, max);
}

void barging_semaphore::exceeds_max(std::uint64_t n, std::uint64_t count,
                                    std::ptrdiff_t max) const {
  throw_past_max(n, static_cast<std::int64_t>(count), max, max > kMaxCount ? kBargingCap : "");
}

std::ptrdiff_t barging_semaphore::waiting() const noexcept {
  queue_lock_.lock();
  const std::size_t k = queue_.size();
  queue_lock_.unlock();
  return static_cast<std::ptrdiff_t>(k);
}

bool barging_semaphore::barge() noexcept {
  std::uint64_t left;
  if (!take(left)) return false;
  // Permits left, waiters queued, none woken (a release(n) whose first woken
  // waiter we are, or newcomers took the rest): wake the next.
  if (left >= kOne && (left & (kQueued | kWoken)) == kQueued) settle(0, kMaxCount, false);
  return true;
}

bool barging_semaphore::acquire_slow(detail::deadline deadline) {
  // One clock read: the wait record's stamp and the fairness timer's start.
  const tick_clock::rep began = tick_clock::now();
  const wait_scope scope(self(), began, "counting_semaphore", this);
  const unsigned spin_budget = should_spin() ? kSpinBudget : 0;
  const acquire_result got = barge_or_queue(
      deadline, spin_budget, [this] { return barge(); },
      [&](bool requeue) {
        node n;
        n.who = self();
        n.since = began;
        // A waiter woken to compete that lost goes back to its place by age (the
        // queue stays oldest first: settle may have woken it from behind an
        // older waiter it leaves queued for the next hand-off).
        auto link = [requeue, &n](park_list& list, park_node&) {
          if (!requeue) return list.push_back(n);
          park_node* pos = list.front();
          while (pos != nullptr && static_cast<node*>(pos)->since <= n.since) pos = pos->next;
          list.insert_before(pos, n);
        };
        const park_mark given = queue_while(
            state_, [](std::uint64_t s) { return s < kOne; }, kQueued, queue_lock_, queue_, n, link,
            deadline);
        // Woken to compete: from now on a release may wake another (if we lose,
        // we re-queue and the next release wakes the oldest again).
        if (given == park_mark::woken) state_.fetch_and(~kWoken, std::memory_order_relaxed);
        return given;
      });
  return got != acquire_result::timed_out;
}

void barging_semaphore::settle(std::uint64_t n, std::ptrdiff_t max, bool may_hand_off) {
  waiter* wake[kWakeBatch + 1];
  unsigned woken = 0;
  queue_lock_.lock();
  auto* oldest = static_cast<node*>(queue_.front());
  // Without a permit of its own to hand off (a chain wake), a due waiter is
  // held back as by the rate limit.
  const fairness fair = oldest != nullptr ? fair_handoff(*oldest, oldest->since, next_fair_,
                                                         handoff_after, may_hand_off && n > 0)
                                          : fairness::not_due;
  // One permit straight to a waiter that has waited past the fairness timer.
  const bool hand_off = fair == fairness::hand_off;
  // Due, but the last hand-off was too recent: leave it queued at the front for
  // the next one rather than wake it to compete. Woken, it would be away from
  // the queue whenever a hand-off came round, and a pair of fibers handing the
  // permit to each other on one worker kept a third from it for good
  // (Barging.EveryParticipantProgresses..., fibers1w). Wake the next instead.
  const bool oldest_stays = fair == fairness::held_back && oldest->next != nullptr;
  // The queue cannot change under its lock: those to wake start here.
  park_node* const first = hand_off || oldest_stays ? oldest->next : queue_.front();
  const std::uint64_t add = hand_off ? n - 1 : n;
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  unsigned to_wake = 0;
  for (;;) {
    const std::uint64_t count = s >> 2;
    if (static_cast<std::ptrdiff_t>(count) > limit(max) - static_cast<std::ptrdiff_t>(add)) {
      queue_lock_.unlock();
      exceeds_max(n, count, max);
    }
    // Only WOKEN and the count change meanwhile. Wake as many as permits will
    // be free, unless a wake-up is in flight.
    // `rest`: the first waiter left queued behind those woken.
    to_wake = 0;
    const park_node* rest = first;
    if ((s & kWoken) == 0) {
      for (; rest != nullptr && to_wake < kWakeBatch && to_wake < count + add; rest = rest->next) {
        ++to_wake;
      }
    }
    std::uint64_t next = s + add * kOne;
    if (to_wake > 0) next |= kWoken;
    if (rest == nullptr && !oldest_stays) next &= ~kQueued;
    if (state_.compare_exchange_weak(s, next, std::memory_order_release,
                                     std::memory_order_relaxed)) {
      break;
    }
  }
  // Take and mark under the lock, so a timed-out waiter that finds itself
  // unmarked under it knows it is still queued.
  park_node* next_up = first;
  if (hand_off) wake[woken++] = queue_.take(*oldest, park_mark::handed);
  for (unsigned i = 0; i < to_wake; ++i) {
    park_node* w = next_up;
    next_up = w->next;
    wake[woken++] = queue_.take(*w, park_mark::woken);
  }
  queue_lock_.unlock();
  for (unsigned i = 0; i < woken; ++i) unpark(wake[i]);
}

}  // namespace tessera::detail
