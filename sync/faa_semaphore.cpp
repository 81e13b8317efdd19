// Koval & Elizarov's fetch-and-add semaphore (tessera/detail/faa_semaphore.h).
//
// The lobby (admission::faa_restricted)
//   Strict FIFO collapses when threads outnumber cores: every permit goes to
//   the oldest waiter, whose thread is usually parked or preempted, so every
//   hand-off costs a wake-up and a context switch. The TWA semaphore's
//   restricted admission (sync/semaphore.cpp, after Dice's Malthusian locks)
//   keeps the queue short instead, and so does this one:
//   - An acquirer that finds permits_ < 0 (a waiter already counted beyond
//     the permits) takes no decrement: it parks in the lobby (the TWA
//     semaphore's, tessera/detail/lobby.h: a FIFO under a spin lock). So a
//     small set circulates through the fetch-and-add at full speed (one
//     holder, one waiter next in line) and the rest sleep.
//   - Whenever a permit is free while the lobby is occupied, the lobby's
//     oldest is called in: by release() after its increment, by a joiner
//     after it joins, by an entering member after its decrement. Each pair is
//     a Dekker pair of seq_cst operations ("RMW permits_; LD the lobby's
//     count" against "RMW the lobby's count; LD permits_"), so no call-in is
//     lost. Members called in and not yet decremented count as entering, and
//     the lobby calls in only for permits beyond them (lobby order).
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

faa_semaphore::faa_semaphore(std::ptrdiff_t desired, std::ptrdiff_t max, bool restricted)
    : permits_(static_cast<std::int64_t>(checked_initial(desired, max, max, ""))),
      restricted_(restricted) {}

faa_semaphore::~faa_semaphore() {
#if TESSERA_CHECKS
  if (q_.parked() != 0 || lobby_.size() != 0) destroyed_with_waiters();
#endif
}

void faa_semaphore::bad_update(std::ptrdiff_t update, std::ptrdiff_t max) const {
  throw_bad_update(update, max);
}

void faa_semaphore::past_max(std::ptrdiff_t update, std::int64_t count, std::ptrdiff_t max) const {
  throw_past_max(static_cast<std::uint64_t>(update), count, max, "");
}

void faa_semaphore::serve(std::int64_t p, std::ptrdiff_t update) {
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
  // Dekker pair with a member joining the lobby: "RMW permits_ (in release()
  // or above); LD the lobby's count" here against "RMW the lobby's count; LD
  // permits_" there. A permit is free: call the lobby in.
  if (freed && restricted_ && lobby_.size() != 0) admit_from_lobby();
}

bool faa_semaphore::enter_via_lobby(deadline d) {
  // Dekker pair with release(): "RMW lobby count; LD permits_" (in admit)
  // here against "RMW permits_; LD lobby count" there.
  std::int64_t p = 0;
  const admission_lobby::exit how = lobby_.wait(
      d, "counting_semaphore", this, [this] { return permits_.load(std::memory_order_seq_cst); },
      [this] { return q_.resumes(); },
      // A forced member decrements before the lobby's lock is let go: once it
      // is off the list, a release may call the next member in, which must
      // find this decrement already taken.
      [this, &p] { p = permits_.fetch_sub(1, std::memory_order_seq_cst); });
  if (how == admission_lobby::exit::timed_out) return try_acquire();  // no decrement held
  if (how == admission_lobby::exit::admitted) p = permits_.fetch_sub(1, std::memory_order_seq_cst);
  // An admitted member's permit is now counted by its decrement, no longer as
  // "entering" (a forced entry was never counted).
  lobby_.entered(how, [this] { return permits_.load(std::memory_order_seq_cst); });
  if (p > 0) return true;
  return q_.suspend(d, "counting_semaphore", this) != 0;
}

void faa_semaphore::admit_from_lobby() noexcept {
  lobby_.admit([this] { return permits_.load(std::memory_order_seq_cst); });
}

}  // namespace tessera::detail
