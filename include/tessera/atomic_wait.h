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
// - Who may call: fibers and OS threads.
// - T: any trivially copyable type, as the standard's: integers and pointers
//   compare with ==; anything else (float, double, structs) by value
//   representation (padding cleared first), so -0.0 and +0.0 differ and a NaN
//   equals itself. Atomics that are not lock-free (large structs) work too:
//   their loads take libatomic's lock, the wait does not. volatile atomics
//   are accepted. atomic_wait_explicit is the standard's spelling of the
//   form with a memory order.
// - Name lookup: these are function objects, so an unqualified call never
//   picks std::atomic_notify_one & co. by argument-dependent lookup.
#pragma once

#include <tessera/detail/cpu.h>
#include <tessera/wait_chain.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessera {

/// What std::atomic<T>::wait accepts: any trivially copyable T.
template <class T>
concept atomic_waitable = std::is_trivially_copyable_v<T>;

namespace detail {

/// The standard's comparison for waiting: == for integers, enums and
/// pointers (the fast path); the value representation for the rest.
template <class T>
bool same_value(const T& a, const T& b) noexcept {
  if constexpr (std::is_integral_v<T> || std::is_pointer_v<T> || std::is_enum_v<T>) {
    return a == b;
  } else {
    T x = a, y = b;
#if defined(__has_builtin)
#if __has_builtin(__builtin_clear_padding)
    __builtin_clear_padding(&x);
    __builtin_clear_padding(&y);
#endif
#endif
    return std::memcmp(&x, &y, sizeof(T)) == 0;
  }
}

template <class A>
std::uintptr_t wait_key(A* a) noexcept {
  return reinterpret_cast<std::uintptr_t>(
      const_cast<const void*>(static_cast<const volatile void*>(a)));
}

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
    wait(a, old, order);
  }
  template <atomic_waitable T>
  void operator()(const volatile std::atomic<T>* a, std::type_identity_t<T> old,
                  std::memory_order order = std::memory_order_seq_cst) const {
    wait(a, old, order);
  }

 private:
  template <class A, class T>
  static void wait(A* a, const T& old, std::memory_order order) {
    auto changed = [&] { return !same_value<T>(a->load(order), old); };
    if (spin_then_yield(changed)) return;
    address_wait_until(wait_key(a), changed);
  }
};

struct atomic_wait_until_fn {
  template <atomic_waitable T>
  bool operator()(const std::atomic<T>* a, std::type_identity_t<T> old,
                  std::chrono::steady_clock::time_point deadline,
                  std::memory_order order = std::memory_order_seq_cst) const {
    return wait(a, old, deadline, order);
  }
  template <atomic_waitable T>
  bool operator()(const volatile std::atomic<T>* a, std::type_identity_t<T> old,
                  std::chrono::steady_clock::time_point deadline,
                  std::memory_order order = std::memory_order_seq_cst) const {
    return wait(a, old, deadline, order);
  }

 private:
  template <class A, class T>
  static bool wait(A* a, const T& old, std::chrono::steady_clock::time_point deadline,
                   std::memory_order order) {
    auto changed = [&] { return !same_value<T>(a->load(order), old); };
    if (changed()) return true;
    return address_wait_until(wait_key(a), changed, deadline);
  }
};

struct atomic_notify_fn {
  template <atomic_waitable T>
  void operator()(const std::atomic<T>* a) const noexcept {
    address_signal_polite(wait_key(a));
  }
  template <atomic_waitable T>
  void operator()(const volatile std::atomic<T>* a) const noexcept {
    address_signal_polite(wait_key(a));
  }
};

}  // namespace detail

/// `atomic_wait(a, old, order = seq_cst)`: blocks until `a->load(order) != old`.
/// Precondition: order is not release or acq_rel. Never returns spuriously.
inline constexpr detail::atomic_wait_fn atomic_wait{};

/// `atomic_wait_explicit(a, old, order)`: the standard's spelling of
/// atomic_wait with a memory order. Precondition: order is not release or acq_rel.
inline constexpr detail::atomic_wait_fn atomic_wait_explicit{};

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
