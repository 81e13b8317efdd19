// tessera/atomic_wait.h — P0514R2 §32.10 atomic waiting on Tessera's wait chains.
//
// `atomic_wait(a, old)` blocks while `a->load() == old`; `atomic_notify_one/all(a)`
// wake waiters after `a` changed (P0514R2). Built on address_wait_until /
// address_signal_polite (Dice & Kogan, "Semaphores Augmented with a Waiting Array", Listing 3),
// keyed by the atomic's address, so it works for fibers and OS threads alike — unlike
// std::atomic::wait, a waiting fiber parks without blocking its worker.
//
// Contract
// - Waiting: atomic_wait polls briefly (64 PAUSEs, then 8 yields) before parking
//   on the chain; atomic_wait_until parks at once.
// - Returns only after observing `a->load() != old` (no spurious returns; ABA:
//   a value that changes and changes back before the waiter looks is missed, as
//   with std::atomic::wait).
// - atomic_notify_one wakes at least one waiter, as P0514 and the standard
//   require; here it wakes every waiter on the chain (chains are pop-stacks with
//   a wake-all policy). Waiters whose value has not changed go back to sleep.
// - Memory ordering: atomic_wait loads with `order` (default seq_cst, acquire or
//   relaxed allowed); the notify contains a seq_cst fence, so the store that
//   changed the value may use any order.
// - Who may call: fibers and OS threads. T: integral or pointer types (lock-free).
// - Name lookup: these are function objects, so an unqualified call never
//   picks std::atomic_notify_one & co. by argument-dependent lookup.
#pragma once

#include <tessera/detail/cpu.h>
#include <tessera/wait_chain.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace tessera {

template <class T>
concept atomic_waitable = (std::is_integral_v<T> ||
                           std::is_pointer_v<T>)&&std::atomic<T>::is_always_lock_free;

namespace detail {

// Listing 3's optional bounded spinning phase before a waiter joins a chain:
// a few PAUSE polls, then a few yields; a partner that answers within a couple
// of microseconds saves both sides a futex round trip. Fibers skip it
// (should_spin(): their park is a user-space switch).
template <class Pred>
bool spin_then_yield(Pred&& changed) {
  if (!should_spin()) return changed();  // a fiber: parking is a cheap switch
  for (int i = 0; i < 64; ++i) {
    if (changed()) return true;
    cpu_relax();
  }
  for (int i = 0; i < 8; ++i) {
    yield_now();
    if (changed()) return true;
  }
  return false;
}

// Function objects rather than functions: an unqualified call such as
// `atomic_notify_one(&a)` on a std::atomic would otherwise find
// std::atomic_notify_one by argument-dependent lookup and silently wait or
// notify in libstdc++'s table instead of ours (a lost wake-up). Name lookup
// that finds an object performs no ADL, as with std::ranges' niebloids.
struct atomic_wait_fn {
  template <atomic_waitable T>
  void operator()(const std::atomic<T>* a, std::type_identity_t<T> old,
                  std::memory_order order = std::memory_order_seq_cst) const {
    auto changed = [&] { return a->load(order) != old; };
    if (spin_then_yield(changed)) return;
    address_wait_until(reinterpret_cast<std::uintptr_t>(a), changed);
  }
};

struct atomic_wait_until_fn {
  template <atomic_waitable T>
  bool operator()(const std::atomic<T>* a, std::type_identity_t<T> old,
                  std::chrono::steady_clock::time_point deadline,
                  std::memory_order order = std::memory_order_seq_cst) const {
    auto changed = [&] { return a->load(order) != old; };
    if (changed()) return true;
    return address_wait_until(reinterpret_cast<std::uintptr_t>(a), changed, deadline);
  }
};

struct atomic_notify_fn {
  template <atomic_waitable T>
  void operator()(const std::atomic<T>* a) const noexcept {
    address_signal_polite(reinterpret_cast<std::uintptr_t>(a));
  }
};

}  // namespace detail

/// `atomic_wait(a, old, order = seq_cst)`: blocks until `a->load(order) != old`.
/// Precondition: order is not release or acq_rel. Never returns spuriously.
inline constexpr detail::atomic_wait_fn atomic_wait{};

/// `atomic_wait_until(a, old, deadline, order = seq_cst)`: as atomic_wait, but
/// gives up at `deadline` (steady_clock). Returns true if the value changed,
/// false on timeout (never before `deadline`). A Tessera extension.
inline constexpr detail::atomic_wait_until_fn atomic_wait_until{};

/// `atomic_notify_one(a)`: wakes at least one (here: every) thread or fiber
/// blocked in atomic_wait on `a`.
inline constexpr detail::atomic_notify_fn atomic_notify_one{};

/// `atomic_notify_all(a)`: wakes every thread or fiber blocked in atomic_wait on `a`.
inline constexpr detail::atomic_notify_fn atomic_notify_all{};

}  // namespace tessera
