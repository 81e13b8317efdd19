// Koval & Elizarov's fetch-and-add semaphore (tessera/detail/faa_semaphore.h).
//
// The lobby (admission::faa_restricted)
//   Strict FIFO collapses when threads outnumber cores: every permit goes to
//   the oldest waiter, whose thread is usually parked or preempted, so every
//   hand-off costs a wake-up and a context switch. The TWA semaphore's
//   restricted admission (sync/semaphore.cpp, after Dice's Malthusian locks)
//   keeps the queue short instead, and so does this one:
//   - An acquirer that finds permits_ < 0 (a waiter already counted beyond
//     the permits) takes no decrement: it parks in a FIFO lobby, a park_list
//     under lobby_lock_. So a small set circulates through the fetch-and-add
//     at full speed (one holder, one waiter next in line) and the rest sleep.
//   - Whenever a permit is free while the lobby is occupied, the lobby's
//     oldest is called in: by release() after its increment, by a joiner
//     after it joins, by an entering member after its decrement. Each pair is
//     a Dekker pair of seq_cst operations ("RMW permits_; LD lobby_" against
//     "RMW lobby_; LD permits_"), so no call-in is lost. Members called in
//     and not yet decremented count in entering_, and admit_from_lobby()
//     calls in only for permits beyond them (lobby order).
//   - Long-term fairness: the lobby's oldest takes its decrement anyway once
//     it has been oldest for a fairness interval (1 ms for a thread,
//     kFiberHandoffInterval for a fiber) in which the queue served somebody,
//     under the lobby lock so that no later member decrements before it; then
//     it waits in the queue. (While nobody is served, nobody passes it.)
//   - A member whose deadline passes in the lobby holds no decrement: it
//     leaves, taking a permit only if one is free (try_acquire).
//   The lobby's wake-ups and order are model-checked in
//   tests/model/faa_lobby.pml.
#include "tessera/detail/faa_semaphore.h"

#include <tessera/detail/barging_semaphore.h>
#include <tessera/detail/cpu.h>

#include <algorithm>

#include "semaphore_errors.h"

namespace tessera::detail {

namespace {
// How long the lobby's oldest thread waits before it takes its decrement even
// though a waiter is queued (as the TWA semaphore's lobby: each forced entry
// costs the circulating threads a futex wake).
constexpr std::chrono::microseconds kLobbyFairnessThread{1000};
}  // namespace

faa_semaphore::faa_semaphore(std::ptrdiff_t desired, std::ptrdiff_t max, bool restricted)
    : permits_(static_cast<std::int64_t>(checked_initial(desired, max, max, ""))),
      restricted_(restricted) {}

faa_semaphore::~faa_semaphore() {
#if TESSERA_CHECKS
  if (q_.parked() != 0 || lobby_.load() != 0) destroyed_with_waiters();
#endif
}

void faa_semaphore::release(std::ptrdiff_t update, std::ptrdiff_t max) {
  if (update < 0 || update > max) [[unlikely]]
    throw_bad_update(update, max);
  if (update == 0) return;
  // The check against max() is best effort under racing releases, as the
  // other cores' (contract: "a racing overshoot" is misuse).
  const std::int64_t before = permits_.load(std::memory_order_relaxed);
  if (before > 0 && before > max - update) [[unlikely]]
    throw_past_max(static_cast<std::uint64_t>(update), before, max, "");
  const std::int64_t p = permits_.fetch_add(update, std::memory_order_seq_cst);
  // Acquirers owed a permit: those the count shows below zero, up to `update`.
  std::int64_t owed = p < 0 ? std::min<std::int64_t>(update, -p) : 0;
  bool freed = owed < update;
  while (owed > 0) {
    if (q_.resume()) {
      --owed;
      continue;
    }
    // A cancelled cell: the permit went to paying back its acquirer's
    // decrement. Add one more; if nobody is owed now, it is a free permit.
    if (permits_.fetch_add(1, std::memory_order_seq_cst) >= 0) {
      --owed;
      freed = true;
    }
  }
  // Dekker pair with lobby_wait(): "RMW permits_; LD lobby_" here against
  // "RMW lobby_; LD permits_" there. A permit is free: call the lobby in.
  if (freed && restricted_ && lobby_.load(std::memory_order_seq_cst) != 0) admit_from_lobby();
}

bool faa_semaphore::enter_via_lobby(deadline d) {
  std::int64_t p = 0;
  const lobby_exit how = lobby_wait(d, p);
  if (how == lobby_exit::timed_out) return try_acquire();  // no decrement held: just leave
  if (how == lobby_exit::admitted) {
    p = permits_.fetch_sub(1, std::memory_order_seq_cst);
    // Our permit is now counted by our decrement, no longer as "entering". An
    // admitter that saw both counts undercounted the free permits: look again.
    entering_.fetch_sub(1, std::memory_order_seq_cst);
  }
  if (lobby_.load(std::memory_order_seq_cst) != 0) admit_from_lobby();
  if (p > 0) return true;
  return q_.suspend(d, "counting_semaphore", this) != 0;
}

faa_semaphore::lobby_exit faa_semaphore::lobby_wait(deadline d, std::int64_t& taken) {
  const wait_scope scope("counting_semaphore", this);
  using clock = std::chrono::steady_clock;
  park_node n;
  n.who = self();
  lobby_lock_.lock();
  lobby_list_.push_back(n);
  lobby_.fetch_add(1, std::memory_order_seq_cst);  // Dekker pair with release()
  lobby_lock_.unlock();
  admit_from_lobby();

  const clock::duration fairness = fairness_interval(*n.who, kLobbyFairnessThread);
  bool head = false;
  clock::time_point head_since{};
  std::uint64_t resumes_then = 0;
  for (;;) {
    if (n.mark.load(std::memory_order_acquire) != park_mark::none) return lobby_exit::admitted;
    // Only the oldest member keeps a fairness timer; whoever takes the oldest
    // out unparks the next, which starts its own (front() is a lock-free hint).
    if (!head && lobby_list_.front() == &n) {
      head = true;
      head_since = clock::now();
      resumes_then = q_.resumes();
    }
    const clock::time_point forced_at = head ? head_since + fairness : clock::time_point::max();
    const clock::time_point wake_at = d.earlier(forced_at).value_or_max();
    if (wake_at == clock::time_point::max()) {
      park();
      continue;
    }
    if (park_until(wake_at)) continue;
    const auto now = clock::now();
    const bool expired = d.passed(now);
    if (!expired && now < forced_at) continue;
    if (!expired && q_.resumes() == resumes_then) {
      // Oldest for `fairness`, and no queued waiter was served meanwhile:
      // nobody passed us (the holders just hold), so stay and look again.
      head_since = now;
      continue;
    }
    lobby_lock_.lock();
    if (n.mark.load(std::memory_order_acquire) != park_mark::none) {  // called in meanwhile
      lobby_lock_.unlock();
      return lobby_exit::admitted;
    }
    if (!expired && entering_.load(std::memory_order_seq_cst) != 0) {
      // Older members, called in for free permits, are on their way to their
      // decrements: a decrement taken now would pass them.
      lobby_lock_.unlock();
      head_since = now;
      resumes_then = q_.resumes();
      continue;
    }
    const bool was_front = lobby_list_.front() == &n;
    leave_lobby(n);
    // A forced member decrements before it lets go of the lock: once it is off
    // the list, a release may call the next member in, which must find this
    // decrement already taken.
    if (!expired) taken = permits_.fetch_sub(1, std::memory_order_seq_cst);
    const park_node* next = was_front ? lobby_list_.front() : nullptr;
    waiter* next_who = next != nullptr ? next->who : nullptr;
    lobby_lock_.unlock();
    if (next_who != nullptr) unpark(next_who);  // starts its fairness timer
    return expired ? lobby_exit::timed_out : lobby_exit::forced;
  }
}

void faa_semaphore::leave_lobby(park_node& n) noexcept {
  lobby_list_.unlink(n);
  lobby_.fetch_sub(1, std::memory_order_seq_cst);
}

void faa_semaphore::admit_from_lobby() noexcept {
  // Calls in as many of the oldest as there are free permits not yet promised
  // to a member on its way in, in batches so that the unparks run outside the
  // lock.
  constexpr int kBatch = 16;
  for (;;) {
    waiter* called[kBatch];
    int k = 0;
    lobby_lock_.lock();
    const std::int64_t free =
        permits_.load(std::memory_order_seq_cst) - entering_.load(std::memory_order_seq_cst);
    while (k < kBatch && k < free) {
      park_node* oldest = lobby_list_.front();
      if (oldest == nullptr) break;
      leave_lobby(*oldest);
      entering_.fetch_add(1, std::memory_order_seq_cst);
      called[k++] = park_list::mark(*oldest, park_mark::woken);
    }
    const park_node* next = k > 0 ? lobby_list_.front() : nullptr;  // the new oldest
    waiter* next_who = next != nullptr ? next->who : nullptr;
    lobby_lock_.unlock();
    for (int i = 0; i < k; ++i) unpark(called[i]);
    if (next_who != nullptr) unpark(next_who);  // starts its fairness timer
    if (k < kBatch || next_who == nullptr) return;
  }
}

}  // namespace tessera::detail
