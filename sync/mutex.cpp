// The mutexes' slow paths (see tessera/mutex.h for the box office and the policy).
#include "tessera/mutex.h"

#include <string>
#include <system_error>

namespace tessera::detail {

using steady = std::chrono::steady_clock;

/// One parked caller, on its own stack. `woken`: 0 queued, 1 woken to compete,
/// 2 the lock was handed to it.
struct mutex_core::node {
  waiter* who;
  node* next;
  steady::time_point since;
  std::atomic<int> woken;
};

mutex_core::~mutex_core() {
#if TESSERA_CHECKS
  if ((state_.load() & kLocked) != 0 || head_ != nullptr) {
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
  const unsigned spin_budget = should_spin() ? 128 : 0;
  unsigned spins = spin_budget;
  steady::time_point since{};
  bool requeue = false;
  for (;;) {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    while ((s & kLocked) == 0) {  // barge
      if (state_.compare_exchange_weak(s, s | kLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        note_owner();
        return true;
      }
    }
    if (spins > 0) {  // threads: a short spin before queueing
      --spins;
      cpu_relax();
      continue;
    }
    if (deadline != nullptr || !requeue) {
      const auto now = steady::now();
      if (deadline != nullptr && now >= *deadline) return false;
      if (!requeue) since = now;
    }

    node n{self(), nullptr, since, {0}};
    lock_queue();
    s = state_.load(std::memory_order_relaxed);
    bool queued = false;
    while ((s & kLocked) != 0) {
      if ((s & kQueued) != 0 || state_.compare_exchange_weak(s, s | kQueued,
                                                             std::memory_order_relaxed)) {
        queued = true;
        break;
      }
    }
    if (!queued) {  // unlocked meanwhile: barge again
      unlock_queue();
      continue;
    }
    if (requeue) {  // a woken waiter that lost the race keeps its place: the front
      n.next = head_;
      head_ = &n;
      if (tail_ == nullptr) tail_ = &n;
    } else {
      if (tail_ != nullptr) {
        tail_->next = &n;
      } else {
        head_ = &n;
      }
      tail_ = &n;
    }
    unlock_queue();

    bool timed_out = false;
    while (n.woken.load(std::memory_order_acquire) == 0) {
      if (deadline == nullptr) {
        park();
      } else if (!park_until(*deadline) && n.woken.load(std::memory_order_acquire) == 0) {
        timed_out = true;
        break;
      }
    }
    if (timed_out) {
      lock_queue();
      if (n.woken.load(std::memory_order_acquire) == 0) {  // still queued: leave
        node** link = &head_;
        node* prev = nullptr;
        while (*link != &n) {
          prev = *link;
          link = &(*link)->next;
        }
        *link = n.next;
        if (tail_ == &n) tail_ = prev;
        if (head_ == nullptr) state_.fetch_and(~kQueued, std::memory_order_relaxed);
        unlock_queue();
        return false;
      }
      unlock_queue();  // woken just as we timed out: take what we were given
    }
    if (n.woken.load(std::memory_order_acquire) == 2) {  // handed over: LOCKED is ours
      note_owner();
      return true;
    }
    state_.fetch_and(~kWoken, std::memory_order_relaxed);  // let unlock wake the next
    requeue = true;
    spins = spin_budget;
  }
}

void mutex_core::unlock_slow() {
  // A woken waiter is still on its way: it will retry, and re-queue if it loses.
  // Just release — no queue lock, no clock, no second wake-up. But not forever:
  // the woken waiter may be a fiber stuck behind a fiber that never parks, so
  // every 256th such unlock looks at the queue and the fairness timer too.
  // (`woken_unlocks_` is only touched by the owner, inside unlock.)
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  if ((s & kWoken) != 0 && ++woken_unlocks_ < 256) {
    while ((s & kWoken) != 0) {
      if (state_.compare_exchange_weak(s, s & ~kLocked, std::memory_order_release,
                                       std::memory_order_relaxed)) {
        return;
      }
    }
  }
  woken_unlocks_ = 0;
  lock_queue();
  node* n = head_;
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
  const auto now = steady::now();
  const bool handoff = now - n->since >= handoff_after && now >= next_fair_;
  if (!handoff && (state_.load(std::memory_order_relaxed) & kWoken) != 0) {
    state_.fetch_and(~kLocked, std::memory_order_release);  // one wake-up in flight is enough
    unlock_queue();
    return;
  }
  if (handoff) next_fair_ = now + handoff_after;
  head_ = n->next;
  if (head_ == nullptr) tail_ = nullptr;
  s = state_.load(std::memory_order_relaxed);
  std::uint32_t next;
  do {
    next = handoff ? s : ((s & ~kLocked) | kWoken);  // handoff: LOCKED stays set
    next = head_ != nullptr ? (next | kQueued) : (next & ~kQueued);
  } while (!state_.compare_exchange_weak(s, next, std::memory_order_release,
                                         std::memory_order_relaxed));
  // Dequeue and mark under the queue lock, so a timed-out waiter that finds
  // woken == 0 under the lock knows it is still queued. Read `who` first: `n`
  // may die as soon as its owner sees the store.
  waiter* who = n->who;
  n->woken.store(handoff ? 2 : 1, std::memory_order_release);
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
