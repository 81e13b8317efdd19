// The TWA semaphore's slow paths: waiting, waking, cancellation (the contract
// is in tessera/semaphore.h).
//
// The fast path (Dice & Kogan, Listings 1-2): a 64-bit ticket and grant, one
// fetch_add plus one load; waiters within LongTermThreshold of the grant spin
// briefly, the rest park on the wait chain of TWAHash(semaphore, ticket)
// (Listings 3/4), so that, absent hash collisions, a release wakes exactly the
// waiter it admits. Ticket and grant are seq_cst: the release shortcut "RMW
// grant; LD ticket" and the acquire "RMW ticket; LD grant" form a Dekker pair.
//
// Timed acquisition (the part a ticket semaphore makes hard)
//   A waiter holds a ticket t before it waits. If it times out, ticket t stays in
//   the queue: some later release will grant it. The waiter therefore *cancels*
//   t: under the semaphore's small cancellation lock it increments `cancelled_`,
//   then re-reads the grant.
//     - grant > t already: the permit arrived in time; the waiter withdraws the
//       cancellation and returns true (it acquired — at the deadline).
//     - else it records t in the cancelled list and returns false.
//   Every release, after advancing the grant, loads `cancelled_` (seq_cst: a
//   Dekker pair with the canceller's increment-then-load). If non-zero it takes
//   the cancellation lock, removes every recorded ticket the grant has passed,
//   and forwards their permits: grant += k (waking the tickets this admits, and
//   repeating while the new grant passes more cancelled tickets). So each permit
//   granted to a cancelled ticket goes to the next ticket in line — exactly one
//   permit in, one permit out; nothing lost or duplicated, nobody behind a
//   cancelled ticket stuck. The uncontended fast paths never take the lock.
//
// Concurrency restriction (admission::restricted, the default)
//   Strict FIFO collapses when threads outnumber cores: every hand-off goes to
//   the oldest ticket, whose thread is usually parked or preempted, so each one
//   costs a wake-up and a context switch (on 2 cores, some 150 times slower at 32
//   threads than at 4). Following Dice's Malthusian locks (EuroSys 2017),
//   the restricted semaphore keeps the queue short instead:
//   - An acquirer that finds `admission_window` (default 1) or more tickets
//     queued beyond the grant takes no ticket: it waits, parked, in the lobby,
//     a FIFO of waiting callers. Acquirers that find room take a ticket at once,
//     so a small active set circulates through the semaphore at full speed and
//     the surplus sleeps.
//   - Whenever a permit is free while the lobby is occupied, the lobby's oldest
//     member is woken to take a ticket (checked by every release, by whoever
//     joins the lobby, and by whoever leaves it: no wake-up is lost).
//   - Long-term fairness: the lobby's oldest member takes a ticket anyway once
//     it has been oldest for a fairness interval (admission_lobby::kThreadFairness, 1 ms,
//     for a thread; kFiberHandoffInterval, 40 µs, for a fiber) while the
//     grant moved, so a circulating set cannot shut it out. A lobby of L callers is therefore left
//     within about L such intervals of progress. (While the grant stands still it stays: nobody
//     passes it; nor while older members called in for free permits have yet to take their
//     tickets.) A forced member takes its ticket under the lobby lock, so no
//     later member can take an earlier one.
//   So admission is FIFO among tickets and FIFO within the lobby (members called
//   in while several permits are free may take their tickets in either order),
//   but an acquirer that finds room in the queue passes the lobby. try_acquire
//   never waits in the lobby. A timed acquirer whose deadline passes in the
//   lobby holds no ticket, so it leaves without cancelling anything; it still
//   takes a permit that is free at that moment. admission::fifo turns
//   restriction off per semaphore.
//
#include "tessera/semaphore.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "semaphore_errors.h"

namespace tessera {
namespace detail {

twa_tuning& twa_config() noexcept {
  static twa_tuning tuning;
  return tuning;
}

namespace {
std::string count_text(std::ptrdiff_t max) {
  return max == std::numeric_limits<std::ptrdiff_t>::max() ? std::string("PTRDIFF_MAX")
                                                           : std::to_string(max);
}
}  // namespace

[[noreturn]] void throw_bad_initial(std::ptrdiff_t desired, std::ptrdiff_t max, const char* why) {
  throw std::invalid_argument("tessera::counting_semaphore<" + count_text(max) +
                              ">: initial count " + std::to_string(desired) +
                              " is outside [0, max()]" + why);
}
#if TESSERA_CHECKS
[[noreturn]] void destroyed_with_waiters() noexcept {
  misuse_abort("tessera::counting_semaphore destroyed while threads or fibers wait on it");
}
#endif
[[noreturn]] void throw_bad_update(std::ptrdiff_t update, std::ptrdiff_t max) {
  throw std::invalid_argument("tessera::counting_semaphore<" + count_text(max) +
                              ">::release: update " + std::to_string(update) +
                              " is outside [0, max()]");
}
[[noreturn]] void throw_past_max(std::uint64_t n, std::int64_t count, std::ptrdiff_t max,
                                 const char* why) {
  throw std::invalid_argument("tessera::counting_semaphore<" + count_text(max) +
                              ">::release: releasing " + std::to_string(n) + " with count " +
                              std::to_string(count) + " would exceed max()" + why);
}

namespace {

// Outcome of the short-term spin.
enum class spin_result { admitted, exhausted, timed_out };

}  // namespace

twa_semaphore::~twa_semaphore() {
#if TESSERA_CHECKS
  const auto queued = static_cast<std::int64_t>(ticket_.load() - grant_.load());
  if (queued > static_cast<std::int64_t>(cancelled_.load()) || lobby_.size() != 0) {
    destroyed_with_waiters();
  }
#endif
}

void twa_semaphore::bad_update(std::ptrdiff_t update, std::ptrdiff_t max) const {
  throw_bad_update(update, max);
}

void twa_semaphore::check_headroom(std::uint64_t n, std::ptrdiff_t max) const {
  // Racy by nature (another release may land in between); conservative: the
  // count it sees never exceeds the true count, so it never throws wrongly.
  const auto count = static_cast<std::int64_t>(grant_.load(std::memory_order_relaxed) -
                                               ticket_.load(std::memory_order_relaxed));
  if (count + static_cast<std::int64_t>(n) > max) throw_past_max(n, count, max, "");
}

bool twa_semaphore::wait(std::uint64_t t, detail::deadline deadline) {
  waiter* const me = self();
  const wait_scope scope(me, "counting_semaphore", this);
  wait_chain& chain = chain_at(twa_hash(t));
  auto is_admitted = [this, t] { return admitted(t); };
  // Fibers do not spin: their park is a user-space switch, and spinning would
  // hold the worker the grant's holder may be waiting for (should_spin()).
  if (!me->ops->is_os_thread) {
    // A fiber: no spinning, no long-term phase. It waits on its ticket's chain
    // for admission itself; only the release that admits it wakes it.
    if (chain_wait(chain, is_admitted, deadline, me)) return true;
    return cancel(t);
  }
  auto& cfg = twa_config();
  const auto threshold =
      static_cast<std::int64_t>(cfg.long_term_threshold.load(std::memory_order_relaxed));
  const std::uint32_t spins = cfg.spin_iterations.load(std::memory_order_relaxed);
  const std::uint32_t yields = cfg.yield_iterations.load(std::memory_order_relaxed);

  for (;;) {
    const auto dx = static_cast<std::int64_t>(grant_.load(std::memory_order_seq_cst) - t);
    if (dx > 0) return true;
    if (dx + threshold > 0) {
      // Short-term: next in line. Spin on the grant (global spinning, Listing 2)
      // for a bounded budget, then park on our ticket's chain until admitted.
      spin_result r = spin_result::exhausted;
      for (std::uint32_t i = 0; i < spins; ++i) {
        if (admitted(t)) return true;
        cpu_relax();
        if ((i & 255) == 255 && deadline.passed()) {
          r = spin_result::timed_out;
          break;
        }
      }
      if (r == spin_result::timed_out) return cancel(t);
      for (std::uint32_t i = 0; i < yields; ++i) {
        yield_now();
        if (admitted(t)) return true;
        if (deadline.passed()) return cancel(t);
      }
      if (chain_wait(chain, is_admitted, deadline, me)) return true;
      return cancel(t);
    }
    // Long-term: park on the "near" chain of ticket t until we come within the
    // threshold; the release that brings us there pokes exactly that chain.
    auto is_near = [this, t, threshold] {
      return static_cast<std::int64_t>(grant_.load(std::memory_order_seq_cst) - t) + threshold > 0;
    };
    // Dekker pair with wake(): "RMW long_term_; LD grant" (in chain_wait's
    // predicate) here against "RMW grant; LD long_term_" there, all seq_cst. A
    // release that reads 0 and skips our near chain is seen by our predicate.
    long_term_.fetch_add(1, std::memory_order_seq_cst);
    const bool near = chain_wait(chain_at(twa_hash_near(t)), is_near, deadline, me);
    long_term_.fetch_sub(1, std::memory_order_release);
    if (!near) return cancel(t);
  }
}

bool twa_semaphore::cancel(std::uint64_t t) {
  lock_cancellations();
  // Dekker pair with after_release(): "RMW cancelled_; LD grant" here against
  // "RMW grant; LD cancelled_" there, all seq_cst.
  cancelled_.fetch_add(1, std::memory_order_seq_cst);
  if (admitted(t)) {
    // The permit reached us before we could leave: keep it.
    cancelled_.fetch_sub(1, std::memory_order_relaxed);
    unlock_cancellations();
    return true;
  }
  try {
    cancelled_list_.push_back(t);
  } catch (...) {
    // Out of memory: we cannot leave the queue, so stay and take the permit
    // when it comes (an untimed wait) rather than lose it.
    cancelled_.fetch_sub(1, std::memory_order_relaxed);
    unlock_cancellations();
    wait(t, {});
    return true;
  }
  unlock_cancellations();
  return false;
}

void twa_semaphore::wake(std::uint64_t old_grant, std::uint64_t n, std::uint64_t tickets) noexcept {
  // Admitted tickets [g, g+n): they may have parked after spinning.
  const std::uint64_t admit_end = std::min(old_grant + n, tickets);
  // Our caller advanced the grant with a seq_cst RMW: the other half of the
  // Dekker pair in wait()'s long-term phase. Nobody long-term: no near chains.
  const bool long_term = long_term_.load(std::memory_order_seq_cst) != 0;
  for (std::uint64_t k = old_grant; k < admit_end; ++k) {
    signal_chain_polite(chain_at(twa_hash(k)));
    // A long-term waiter that a release(n) admits outright is still on its near chain.
    if (long_term) signal_chain_polite(chain_at(twa_hash_near(k)));
  }
  if (!long_term) return;
  const auto threshold =
      static_cast<std::uint64_t>(twa_config().long_term_threshold.load(std::memory_order_relaxed));
  // Successor(s)-of-successor: tickets that just came within the threshold
  // [max(g+n, g+L), g+n+L) move from long-term to short-term waiting.
  const std::uint64_t near_begin = std::max(old_grant + n, old_grant + threshold);
  const std::uint64_t near_end = std::min(old_grant + n + threshold, tickets);
  for (std::uint64_t k = near_begin; k < near_end; ++k) {
    signal_chain_polite(chain_at(twa_hash_near(k)));
  }
}

void twa_semaphore::after_release(std::uint64_t old_grant, std::uint64_t n, std::uint64_t tickets,
                                  std::ptrdiff_t max) {
#if TESSERA_CHECKS
  if (max != std::numeric_limits<std::ptrdiff_t>::max() &&
      static_cast<std::int64_t>(old_grant + n - tickets) > max) {
    misuse_abort("tessera::counting_semaphore::release: count exceeded max() (racing releases)");
  }
#else
  (void)max;
#endif
  wake(old_grant, n, tickets);
  if (cancelled_.load(std::memory_order_seq_cst) != 0) forward_cancelled();
  // release(n) admitted fewer tickets than n, or forwarded permits past
  // cancelled tickets to nobody: the rest are free, call the lobby in.
  if (lobby_.size() != 0) admit_from_lobby();
}

twa_semaphore::lobby_leave twa_semaphore::lobby_wait(detail::deadline deadline) {
  // Dekker pair with release(): "RMW lobby count; LD grant" (the grant is read
  // in admit) here against "RMW grant; LD lobby count" there, all seq_cst. A
  // release that read 0 and skipped the lobby left a permit admit sees.
  std::uint64_t t = 0;
  const admission_lobby::exit how = lobby_.wait(
      deadline, "counting_semaphore", this, [this] { return free_permits(); },
      [this] { return grant_.load(std::memory_order_relaxed); },
      // A forced member takes its ticket before the lobby's lock is let go:
      // once it is off the list, a release may call the next member in, and
      // that one must find this ticket already taken (lobby order; CI caught
      // admission order 0,1,3,2 when the ticket was taken after the unlock).
      [this, &t] { t = ticket_.fetch_add(1, std::memory_order_seq_cst); });
  return {how, t};
}

bool twa_semaphore::enter_from_lobby(lobby_leave left, detail::deadline deadline) {
  // A forced member took its ticket in lobby_wait(), under the lobby lock.
  const std::uint64_t t = left.how == admission_lobby::exit::forced
                              ? left.ticket
                              : ticket_.fetch_add(1, std::memory_order_seq_cst);
  // An admitted member's permit is now counted by its ticket, no longer as
  // "entering" (a forced entry was never counted).
  lobby_.entered(left.how, [this] { return free_permits(); });
  if (admitted(t)) return true;
  return wait(t, deadline);
}

std::int64_t twa_semaphore::free_permits() const noexcept {
  return static_cast<std::int64_t>(grant_.load(std::memory_order_seq_cst) -
                                   ticket_.load(std::memory_order_seq_cst));
}

void twa_semaphore::admit_from_lobby() noexcept {
  // Members admitted before (by any call) count until they take a ticket, so
  // lobby order is kept (a later member never takes an earlier's permit).
  lobby_.admit([this] { return free_permits(); });
}

void twa_semaphore::forward_cancelled() {
  lock_cancellations();
  for (;;) {
    const std::uint64_t g = grant_.load(std::memory_order_seq_cst);
    const auto passed = [g](std::uint64_t c) { return static_cast<std::int64_t>(g - c) > 0; };
    const auto it = std::remove_if(cancelled_list_.begin(), cancelled_list_.end(), passed);
    const auto k = static_cast<std::uint64_t>(cancelled_list_.end() - it);
    if (k == 0) break;
    cancelled_list_.erase(it, cancelled_list_.end());
    cancelled_.fetch_sub(static_cast<std::uint32_t>(k), std::memory_order_seq_cst);
    // Each cancelled ticket the grant passed received a permit nobody will take:
    // hand those permits on to the next tickets in line.
    const std::uint64_t g0 = grant_.fetch_add(k, std::memory_order_seq_cst);
    wake(g0, k, ticket_.load(std::memory_order_seq_cst));
  }
  unlock_cancellations();
}

}  // namespace detail
}  // namespace tessera
