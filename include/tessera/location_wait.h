// tessera/location_wait.h — location_wait / location_wake_all: Dice & Kogan's
// LocationWait / LocationWakeAll ("Semaphores Augmented with a Waiting Array",
// Listing 5), over the park façade.
//
// A waiter loops on its own condition and calls location_wait(key) while the
// condition does not hold; whoever makes the condition true calls
// location_wake_all(key) afterwards:
//
//   while (!ready.load()) tessera::location_wait(key);     // waiter
//   ready.store(true); tessera::location_wake_all(key);    // waker
//
// Unlike address_wait_until (Listing 3), nothing lives on the caller's stack:
// each waiter identity (OS thread or fiber) owns one wait element, created at
// its first call and kept for good. So the caller may leave the loop at any
// time — even right after location_wait put its element on a chain — and the
// element stays behind, flushed lazily at its next use.
//
// Contract
// - State machine per call: if the caller's element is not on `key`'s chain,
//   location_wait first takes it off any other chain (waking that chain's
//   waiters and waiting for its own element to be released), puts it on
//   `key`'s chain and returns at once, so the caller re-checks its condition
//   (the Dekker ratification: "wait: CAS chain; LD condition" against "wake:
//   ST condition; swap chain"). Called again with the element on that chain,
//   it parks until a location_wake_all on the chain releases it.
// - Spurious returns: by design (every other call returns without waiting),
//   and keys hash onto 4096 chains, so a wake of one key wakes the waiters of
//   every key on its chain. Callers always loop on their condition.
// - Memory ordering: location_wake_all is a seq_cst exchange (after a seq_cst
//   fence in its polite check), so the condition may be stored with any order
//   before it; a waiter reads its condition with whatever order it chooses.
// - Who may call: fibers and OS threads, mixed; a waiting fiber parks.
// - Cost: a wake walks the whole chain it detaches (elements may be left
//   behind by waiters that are not waiting any more, so the systolic
//   propagation of Listing 3 cannot be relied on): quadratic in the worst
//   case, linear in the common one of at most one waiter per chain.
// - Keys are plain numbers (addresses, usually): nothing is dereferenced.
#pragma once

#include <cstdint>

namespace tessera {

/// One step of the wait loop on `key` (see above): puts the caller's element
/// on `key`'s chain and returns, or, when it is there already, parks until a
/// location_wake_all(key) (or of a key sharing the chain) releases it.
/// Precondition: none. May return spuriously; loop on your condition.
void location_wait(std::uintptr_t key);

/// Releases every waiter on `key`'s chain (Listing 5's LocationWakeAll), after
/// the caller has made their condition true. Cheap when nobody waits: a fence
/// and one load. Never blocks.
void location_wake_all(std::uintptr_t key) noexcept;

namespace detail {
/// The chain `key` maps to (Listing 5's Mix32A hash into 4096 slots), for tests
/// that need two keys on one chain.
std::uint32_t location_slot_index(std::uintptr_t key) noexcept;
}  // namespace detail

}  // namespace tessera
