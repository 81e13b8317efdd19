// The mutexes' slow paths (see tessera/mutex.h for the box office and the policy).
#include "tessera/mutex.h"

#include <string>
#include <system_error>

namespace tessera::detail {

using steady = std::chrono::steady_clock;

/// One parked caller. `woken`: 0 queued, 1 woken to compete, 2 the lock was
/// handed to it. `since`: when it first queued in this lock() call.
struct mutex_core::node : park_node {
  steady::time_point since;
};

mutex_core::~mutex_core() {
#if TESSERA_CHECKS
  if ((state_.load() & kLocked) != 0 || !queue_.empty()) {
    misuse_abort((std::string(type_) + " destroyed while locked or with waiters").c_str());
  }
#endif
}

void mutex_core::check_owner([[maybe_unused]] const char* type) noexcept {
#if TESSERA_CHECKS
  if ((state_.load(std::memory_order_relaxed) & kLocked) == 0 ||
      owner_.load(std::memory_order_relaxed) != self()) {
    misuse_abort((std::string(type) + "::unlock: the caller does not own the mutex").c_str());
  }
  owner_.store(nullptr, std::memory_order_relaxed);
#endif
}

bool mutex_core::lock_slow(const steady::time_point* deadline) {
  const int got = barge_or_queue(
      deadline, should_spin() ? kSpinBudget : 0, [this] { return !locked() && try_lock(); },
      [&](steady::time_point since, bool requeue) {
        node n;
        n.who = self();
        n.since = since;
        // A waiter woken just as it timed out takes what it was given.
        const int given =
            queue_while_held(state_, kLocked, kQueued, queue_lock_, queue_, n, requeue, deadline);
        if (given == 1)
          state_.fetch_and(~kWoken, std::memory_order_relaxed);  // let unlock wake the next
        return given;
      });
  if (got == 2) note_owner();  // handed over: LOCKED is ours (a barge noted itself)
  return got != 0;
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
  // timer): at most one hand-off per `handoff_after`, so a hand-off to a
  // sleeping thread — while nobody holds the lock yet nobody may take it —
  // costs little throughput.
  const bool handoff = fair_handoff_due(n->since, next_fair_, handoff_after);
  if (!handoff && (state_.load(std::memory_order_relaxed) & kWoken) != 0) {
    state_.fetch_and(~kLocked, std::memory_order_release);  // one wake-up in flight is enough
    unlock_queue();
    return;
  }
  queue_.unlink(*n);
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  std::uint32_t next;
  do {
    next = handoff ? s : ((s & ~kLocked) | kWoken);  // handoff: LOCKED stays set
    next = queue_.empty() ? (next & ~kQueued) : (next | kQueued);
  } while (
      !state_.compare_exchange_weak(s, next, std::memory_order_release, std::memory_order_relaxed));
  // Dequeue and mark under the queue lock, so a timed-out waiter that finds
  // woken == 0 under the lock knows it is still queued.
  waiter* who = park_list::mark(*n, handoff ? 2 : 1);
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
