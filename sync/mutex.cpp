// The mutexes' slow paths (see tessera/mutex.h for the box office and the policy).
//
// Both fast paths are a single atomic read-modify-write on the word even while
// others queue: under contention the owner runs at the uncontended rate while
// the queued sleep.
//
// Admission policy: barging with eventual fairness (Go's sync.Mutex starvation
// mode, WebKit's and parking_lot's fair unlock). Normally unlock releases the
// word and wakes the oldest waiter, which then competes with newcomers: no
// convoy when callers outnumber cores. But once the oldest waiter has waited
// longer than `handoff_after` (1 ms), unlock hands the lock to it directly
// (LOCKED never clears) — at most once per `handoff_after` when the waiter is
// an OS thread, so hand-offs to sleeping threads cannot turn into a convoy, and
// at most once per 40 µs (detail::kFiberHandoffInterval) when it is a fiber,
// whose hand-off is a user-space switch. The queue is FIFO and a woken waiter
// that loses the race goes back to its place at the front, so a waiter k places
// back gets the lock within about (k + 1) ms as a thread, about 1 + k/10 ms as
// a fiber.
// The wait is timed from lock()'s first look when others already queue, and
// otherwise from the first race the waiter loses: a waiter first in line has
// been passed by nobody until then. So the plain hand-off — one caller
// queued, woken by the unlock, taking the lock — reads no clock at either
// end; two TSC reads were a fifth of that round trip (docs/benchmarks.md).
// Go's sync.Mutex, too, judges starvation only in a waiter that lost a race.
// (A fiber that never parks holds its worker regardless: scheduling is
// cooperative.)
//
// Lost races: a woken OS thread that finds the lock taken again keeps WOKEN
// and re-parks with a timeout of `kRetryAfter` (200 us) instead of waiting to be
// woken by the next unlock. The owner's unlocks meanwhile stay on the fast path,
// so a hot lock costs no futex_wake per burst and the waiter's retries do not
// steal the owner's cache line every few microseconds (docs/benchmarks.md,
// "Constants"). The price, bounded: if the owner then unlocks and leaves, the lock
// can stay free for up to kRetryAfter (plus the kernel's timer slack) before
// that waiter notices. The 1 ms fair hand-off still reaches the sleeper (unlock
// wakes it directly), and a thread that gives up (try_lock_for's deadline)
// clears WOKEN only while the lock is held, so the next unlock wakes the next
// waiter: nothing is lost.
// The whole box office — barging, queue, hand-off, timeouts, WOKEN and its
// retry timer — is model-checked with SPIN in tests/model/mutex.pml.
//
#include "tessera/mutex.h"

#include <string>
#include <system_error>

namespace tessera::detail {

using steady = std::chrono::steady_clock;

/// One parked caller. `woken`: 0 queued, 1 woken to compete, 2 the lock was
/// handed to it. `since`: when the fairness timer started (tick_clock), 0 if
/// it has not (see lock_slow).
struct mutex_core::node : park_node {
  tick_clock::rep since;
};

mutex_core::~mutex_core() {
#if TESSERA_CHECKS
  if ((state_.load() & kLocked) != 0 || !queue_.empty()) {
    misuse_abort((std::string(type_) + " destroyed while locked or with waiters").c_str());
  }
#endif
}

#if TESSERA_CHECKS
void mutex_core::check_owner(const char* type) noexcept {
  if ((state_.load(std::memory_order_relaxed) & kLocked) == 0 ||
      owner_.load(std::memory_order_relaxed) != self()) {
    misuse_abort((std::string(type) + "::unlock: the caller does not own the mutex").c_str());
  }
  owner_.store(nullptr, std::memory_order_relaxed);
}
#endif

bool mutex_core::lock_slow(detail::deadline deadline) {
  waiter* const me = self();
  // The fairness timer's start, also the wait record's stamp: read now if
  // others already queue (our turn comes after theirs: the timer bounds the
  // whole wait), else at our first lost race (until then we are first in
  // line and nobody passes us: the owner's critical section is no unfairness).
  // So a plain hand-off between two callers reads no clock. (| 1: never 0.)
  tick_clock::rep began =
      (state_.load(std::memory_order_relaxed) & kQueued) != 0 ? tick_clock::now() | 1 : 0;
  const wait_scope scope(me, began, "mutex", this, -1, &holder_);
  // An OS thread that was woken holds the WOKEN token. If it loses the race to
  // a barging owner it keeps the token and sleeps at most kRetryAfter before it
  // retries, so the owner's unlocks meanwhile take the fast path instead of
  // waking it again (see "Lost races" in mutex.h). Fibers hand the token back at
  // once: waking a fiber costs no system call.
  const bool os_thread = me->ops->is_os_thread;  // spins before queueing, and defers
  bool token = false;                    // we hold WOKEN: clear it when we leave or get the lock
  auto barge = [&] {
    if (locked() || !try_lock()) return false;
    if (token) state_.fetch_and(~kWoken, std::memory_order_relaxed);
    return true;
  };
  const acquire_result got =
      barge_or_queue(deadline, os_thread ? kSpinBudget : 0, barge, [&](bool requeue) {
        if (requeue && began == 0) began = tick_clock::now() | 1;
        node n;
        n.who = me;
        n.since = began;
        // With the token, wake up by kRetryAfter at the latest to retry.
        bool retry_first = false;
        detail::deadline until = deadline;
        if (token) {
          const steady::time_point retry = steady::now() + kRetryAfter;
          retry_first = !deadline.has_value() || retry < *deadline;
          if (retry_first) until = retry;
        }
        const park_mark given =
            queue_while_held(state_, kLocked, kQueued, queue_lock_, queue_, n, requeue, until);
        if (given == park_mark::woken) {
          if (os_thread) {
            token = true;
            return park_mark::woken;
          }
          // A fiber gives the token back at once (let unlock wake the next),
          // and if the lock is free takes it in the same CAS.
          std::uint32_t s = state_.load(std::memory_order_relaxed);
          for (;;) {
            const bool free = (s & kLocked) == 0;
            const std::uint32_t next = free ? (s | kLocked) & ~kWoken : s & ~kWoken;
            if (state_.compare_exchange_weak(s, next, std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
              return free ? park_mark::handed : park_mark::woken;
            }
          }
        }
        // A waiter woken just as it timed out takes what it was given.
        if (given == park_mark::handed || given == park_mark::not_queued) {
          if (given == park_mark::handed && token) {
            state_.fetch_and(~kWoken, std::memory_order_relaxed);
          }
          return given;
        }
        // park_mark::none: our own retry timer, or the caller's deadline.
        if (retry_first && !deadline.passed(steady::now())) {
          return park_mark::woken;
        }
        return park_mark::none;
      });
  if (got == acquire_result::handed)
    note_owner();  // handed off: LOCKED is ours (a barge noted itself)
  if (got == acquire_result::timed_out && token) return give_up_token();
  return got != acquire_result::timed_out;
}

bool mutex_core::give_up_token() noexcept {
  // Leave only while someone holds the lock: its unlock then sees WOKEN clear
  // and wakes the next waiter. If the lock is free, take it instead.
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    if ((s & kLocked) == 0) {
      if (state_.compare_exchange_weak(s, (s | kLocked) & ~kWoken, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        note_owner();  // the deadline passed, but the lock was free: take it
        return true;
      }
    } else if (state_.compare_exchange_weak(s, s & ~kWoken, std::memory_order_relaxed)) {
      return false;
    }
  }
}

void mutex_core::unlock_slow() {
  woken_unlocks_ = 0;
  lock_queue();
  auto* n = static_cast<node*>(queue_.front());
  if (n == nullptr) {  // QUEUED without anyone queued (a timed-out waiter left)
    state_.fetch_and(~(kLocked | kQueued), std::memory_order_release);
    unlock_queue();
    return;
  }
  // We are about to wake someone (a futex wake for a thread): a clock read is
  // cheap next to that. Fair unlocks are rate-limited (parking_lot's "be fair"
  // timer): at most one hand-off per `handoff_after` to a thread, so a hand-off
  // to a sleeping thread — while nobody holds the lock yet nobody may take it —
  // costs little throughput (fibers: per kFiberHandoffInterval, park_list.h).
  // A waiter whose timer has not started is not due: a hand-off between two
  // callers reads no clock.
  const bool handoff = n->since != 0 && fair_handoff_due(*n, n->since, next_fair_, handoff_after);
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  if (!handoff) {
    // One wake-up in flight is enough. A CAS, not a load and a fetch_and: a
    // thread giving WOKEN up (give_up_token) in between would leave the queue
    // with nobody to wake it (tests/model/mutex.pml, RELEASE_ON_STALE_WOKEN).
    while ((s & kWoken) != 0) {
      if (state_.compare_exchange_weak(s, s & ~kLocked, std::memory_order_release,
                                       std::memory_order_relaxed)) {
        unlock_queue();
        return;
      }
    }
  }
  queue_.unlink(*n);
  std::uint32_t next;
  do {
    next = handoff ? s : ((s & ~kLocked) | kWoken);  // hand-off: LOCKED stays set
    next = queue_.empty() ? (next & ~kQueued) : (next | kQueued);
  } while (
      !state_.compare_exchange_weak(s, next, std::memory_order_release, std::memory_order_relaxed));
  // Dequeue and mark under the queue lock, so a timed-out waiter that finds
  // woken == 0 under the lock knows it is still queued.
  waiter* who = park_list::mark(*n, handoff ? park_mark::handed : park_mark::woken);
  unlock_queue();
  unpark(who);
}

[[noreturn]] void recursion_overflow(const char* type) {
  throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                          std::string(type) + "::lock: recursion depth exceeds 2^32-1");
}

}  // namespace tessera::detail

namespace tessera {

void recursive_mutex::unlock() {
  if (!rec_.owned_by_caller()) {
    detail::misuse_abort("tessera::recursive_mutex::unlock: the caller does not own the mutex");
  }
  if (rec_.leave()) core_.unlock("tessera::recursive_mutex");
}

void recursive_timed_mutex::unlock() {
  if (!rec_.owned_by_caller()) {
    detail::misuse_abort(
        "tessera::recursive_timed_mutex::unlock: the caller does not own the mutex");
  }
  if (rec_.leave()) core_.unlock("tessera::recursive_timed_mutex");
}

}  // namespace tessera
