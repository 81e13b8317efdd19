// tessera/wait_chain.h — address- and key-based waiting over park/unpark.
//
// Implements the waiting chains of Dice & Kogan, "Semaphores Augmented with a
// Waiting Array": Listing 3 (`AddressWaitUntil`, `AddressSignal`,
// `AddressSignalPolite`) and Listing 4 (`KeyMonitor`, `KeyWait`, `KeySignal`).
// Listing 5 (`LocationWait`, `LocationWakeAll`) is tessera/location_wait.h.
//
// One process-wide table of 4096 wait chains. Each chain is a concurrent
// pop-stack (push-one, detach-all) of on-stack wait elements. A waiter pushes
// its element with one exchange, re-checks its condition (the Dekker pivot:
// "wait: ST chain; LD condition / signal: ST condition; LD chain"), then parks
// on its element's gate. A signaller detaches the whole chain with one exchange
// and pokes its head; each woken waiter pokes the element beneath it, so the
// wake-up propagates systolically down the chain.
//
// Contract
// - Spurious wake-ups: keys hash onto chains, and a signal wakes every waiter on
//   the chain, so waiters of other keys on the same chain wake too. Every wait
//   here re-evaluates its condition (address_wait_until) or its sequence
//   (key_wait) before returning, so callers see no spurious returns from
//   address_wait_until; key_wait returns once the key's sequence has changed.
// - Order: no admission order among waiters of one key (they all wake).
// - Who may call: fibers and OS threads, mixed freely (park façade only).
// - Memory ordering: `address_signal(key)` and `key_signal(key)` contain a
//   sequentially consistent fence before they look at the chain, so the
//   condition may be published with any memory order (even relaxed) before the
//   signal; a waiter that returns because its condition became true reads it
//   with whatever order the predicate itself uses.
// - Lifetime: wait elements live on the waiter's stack; a waiter never returns
//   while its element is still reachable from a chain (mis-queue recovery:
//   CAS undo, else flush, as in Listing 3). Keys are plain numbers: nothing is
//   dereferenced through them.
// - Timeouts: the `deadline` overloads stop waiting at the deadline
//   (std::chrono::steady_clock). After a timeout the waiter still removes its
//   element from the chain, which may wait for an in-flight signaller to finish
//   its poke — a bounded, short wait.
#pragma once

#include <tessera/park.h>
#include "tessera/detail/deadline.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tessera {

namespace detail {

/// An on-stack wait element (Listing 3's WaitElement). 128-byte aligned so that
/// elements on neighbouring stacks never share an adjacent-line-prefetch pair.
struct alignas(128) wait_element {
  std::atomic<int> gate{0};  // 1 once the element is detached and its owner notified
  waiter* who = nullptr;     // identity to unpark (type-stable, see park.h)
};

/// One slot of the waiting table: a pop-stack of waiters plus the update sequence
/// used by the key_monitor / key_wait protocol (Listing 4's WaitChannel).
struct wait_chain {
  std::atomic<wait_element*> head{nullptr};
  std::atomic<std::uint64_t> sequence{0};
};

/// Number of chains in the process-wide table (Listing 3: 4096; a power of two).
inline constexpr std::size_t chain_count = 4096;

/// The process-wide table (sync/wait_chain.cpp).
extern wait_chain chain_table[chain_count];

/// The chain at `index` modulo chain_count. Used directly by ticket-aware callers
/// (TWA semaphores) whose index is already dispersed by TWAHash.
inline wait_chain& chain_at(std::uint32_t index) noexcept {
  return chain_table[index & (chain_count - 1)];
}

/// Listing 5's Mix32A: a cheap 32-bit finalizer for general (non-ticket) keys.
constexpr std::uint32_t mix32(std::uint32_t v) noexcept {
  constexpr std::uint32_t k = 0x9abe94e3u;
  v = (v ^ (v >> 16)) * k;
  v = (v ^ (v >> 16)) * k;
  return v ^ (v >> 16);
}

/// The chain for an arbitrary address-like key: a 32-bit mixer (Listing 5's
/// Mix32A) spreads nearby addresses over the table.
inline wait_chain& chain_for_key(std::uintptr_t key) noexcept {
  const auto folded = static_cast<std::uint32_t>(key ^ (static_cast<std::uint64_t>(key) >> 32));
  return chain_at(mix32(folded));
}

/// Sets e's gate and unparks its owner. After the gate is set the element may
/// vanish; only the (type-stable) identity is used afterwards. Null is a no-op.
inline void poke(wait_element* e) noexcept {
  if (e == nullptr) return;
  waiter* const who = e->who;
  // release: the signaller's prior writes (the condition) happen-before the
  // waiter's acquire load of its gate. After this store e may leave scope.
  e->gate.store(1, std::memory_order_release);
  unpark(who);  // safe on a stale identity (park.h: type-stable records)
}

/// Detach-all and poke: Listing 3's AddressSignal on one chain. The caller must
/// have published its condition with a seq_cst RMW or fence beforehand.
inline void signal_chain(wait_chain& c) noexcept {
  poke(c.head.exchange(nullptr));
}

/// Listing 3's polite signal: skip the exchange if the chain is empty. Precondition
/// as signal_chain (a seq_cst RMW/fence between publishing the condition and this).
inline void signal_chain_polite(wait_chain& c) noexcept {
  if (c.head.load(std::memory_order_seq_cst) != nullptr) poke(c.head.exchange(nullptr));
}

/// Blocks until e's gate opens, with a deadline (not null); returns false if it
/// passed first.
bool await_gate_until(wait_element& e, detail::deadline deadline);

/// Blocks until e's gate opens; returns false if `deadline` (may be null) passed first.
inline bool await_gate(wait_element& e, detail::deadline deadline) {
  if (deadline.has_value()) return await_gate_until(e, deadline);
  // acquire: pairs with poke's release store.
  while (e.gate.load(std::memory_order_acquire) == 0) park();
  return true;
}

/// Gets a mis-queued (or timed-out) element off chain `c` (Listing 3's recovery):
/// CAS undo when e is still the head; otherwise flush the chain. Returns only
/// once e is unreachable, and pokes `prv` (e's successor) exactly when e's owner
/// is responsible for it.
void withdraw(wait_chain& c, wait_element& e, wait_element* prv) noexcept;

/// The waiting loop of Listing 3, on one chain, with an optional deadline, for
/// `me` (the caller's self()). Returns the predicate's last value (falsy only
/// on timeout).
template <class Pred>
auto chain_wait(wait_chain& c, Pred& satisfied, detail::deadline deadline, waiter* me) {
  for (;;) {
    if (auto v = satisfied()) return v;
    wait_element e;
    e.who = me;
    // seq_cst exchange: the "ST chain" half of the Dekker pivot.
    wait_element* const prv = c.head.exchange(&e);
    if (auto v = satisfied()) {  // ratify: the "LD condition" half
      withdraw(c, e, prv);
      return v;
    }
    if (!await_gate(e, deadline)) {
      withdraw(c, e, prv);
      return satisfied();
    }
    poke(prv);  // propagate the systolic wake-up to the element beneath us
  }
}

template <class Pred>
auto chain_wait(wait_chain& c, Pred& satisfied, detail::deadline deadline) {
  return chain_wait(c, satisfied, deadline, self());
}

}  // namespace detail

/// Waits until `satisfied()` returns a truthy value, parking on the chain for
/// `key` (Listing 3, AddressWaitUntil). Returns that value.
///
/// `satisfied` is called several times, from the calling thread only; it must be
/// cheap and must not wait. Wakes on every signal of a key on the same chain and
/// re-evaluates; never returns with a falsy value.
template <class Pred>
auto address_wait_until(std::uintptr_t key, Pred&& satisfied) {
  return detail::chain_wait(detail::chain_for_key(key), satisfied, {});
}

/// As above, but gives up at `deadline` (steady_clock). Returns the predicate's
/// value: truthy if satisfied, falsy if the deadline passed first (never earlier).
template <class Pred>
auto address_wait_until(std::uintptr_t key, Pred&& satisfied,
                        std::chrono::steady_clock::time_point deadline) {
  return detail::chain_wait(detail::chain_for_key(key), satisfied, deadline);
}

/// Wakes every waiter on `key`'s chain (Listing 3, AddressSignal). Call after
/// making the waited-for condition true; contains a seq_cst fence, so the
/// condition may be stored with any memory order.
void address_signal(std::uintptr_t key) noexcept;

/// As address_signal, but only touches the chain when it has waiters (Listing 3,
/// AddressSignalPolite): cheaper when there are usually none.
void address_signal_polite(std::uintptr_t key) noexcept;

/// Snapshot of `key`'s update sequence, to pass to key_wait (Listing 4, KeyMonitor).
/// acquire: a key_signal whose increment is observed happens-before the caller's
/// subsequent reads.
std::uint64_t key_monitor(std::uintptr_t key) noexcept;

/// Parks until `key`'s chain sequence differs from `sequence` (Listing 4,
/// KeyWait). Usage: `for (;;) { auto s = key_monitor(k); if (cond()) break; key_wait(k, s); }`.
/// The sequence is per chain, so a signal of another key on the same chain also
/// ends the wait: callers re-check their condition, as in the usage above.
void key_wait(std::uintptr_t key, std::uint64_t sequence);

/// As key_wait with a deadline (steady_clock). Returns false if the deadline
/// passed with the sequence unchanged (never before the deadline), else true.
bool key_wait_until(std::uintptr_t key, std::uint64_t sequence,
                    std::chrono::steady_clock::time_point deadline);

/// Advances `key`'s sequence and wakes every waiter on its chain (Listing 4,
/// KeySignal). Same ordering guarantee as address_signal.
void key_signal(std::uintptr_t key) noexcept;

/// As key_signal but skips the chain exchange when nobody waits (KeySignalPolite).
void key_signal_polite(std::uintptr_t key) noexcept;

}  // namespace tessera
