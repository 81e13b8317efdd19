// location_wait / location_wake_all (tessera/location_wait.h): Dice & Kogan's
// Listing 5, with park/unpark where the listing spins on the gate.
//
// Each waiter identity owns one wait element, hung off its (type-stable)
// waiter record at its first call and never freed, so an element left on a
// chain by a waiter that stopped waiting stays valid for whoever pokes it.
// (Listing 5 keeps it in TLS and flushes it in the thread's destructor; here a
// record outlives its thread or fiber and passes to a new owner, so the
// element remembers the record's generation when it was emplaced: one left by
// an earlier owner is stranded, never mistaken for the new owner's own.) An
// element is in one of three places:
//   free       where == null, gate 1: on no chain, private to its owner;
//   emplaced   where == s, gate 0 until a wake releases it: on s's chain;
//   stranded   where == s, but the owner now waits on another chain, or the
//              emplacing owner was an earlier one of this record: flushed
//              (its chain detached and released) before the element is reused.
// Chains are lock-free stacks. Push is a CAS loop (not Listing 3's exchange)
// so that the stack stays walkable: a wake must walk the whole detached chain
// and release every element, because a stranded element has no owner waiting
// to propagate the wake-up systolically.
//
// Dekker pivot: a waiter pushes its element (seq_cst CAS), fences, and only
// then re-reads its condition; a waker stores the condition, fences, and only
// then looks at the chain. At least one of them sees the other: the waiter
// sees the condition, or the waker finds (and releases) the element.
#include "tessera/location_wait.h"

#include <atomic>
#include <cstddef>

#include "tessera/park.h"

namespace tessera {
namespace {

struct location_slot;

struct alignas(128) location_element {
  std::atomic<int> gate{1};                      // 1: released (or never emplaced)
  location_slot* where = nullptr;                // the chain it is on: owner-only
  std::uint32_t generation = 0;                  // the record's owner that emplaced it
  std::atomic<location_element*> succ{nullptr};  // the element beneath it on that chain
  waiter* who = nullptr;                         // the owning record, fixed for good
};

struct alignas(64) location_slot {
  std::atomic<location_element*> chain{nullptr};
};

constexpr std::size_t kSlots = 4096;
static_assert((kSlots & (kSlots - 1)) == 0);
location_slot g_slots[kSlots];

// Listing 5's Mix32A: spreads address-like keys (aligned, clustered) over the
// table.
std::uint32_t mix32(std::uint32_t v) noexcept {
  constexpr std::uint32_t k = 0x9abe94e3u;
  v = (v ^ (v >> 16)) * k;
  v = (v ^ (v >> 16)) * k;
  return v ^ (v >> 16);
}

location_slot& slot_for(std::uintptr_t key) noexcept {
  return g_slots[detail::location_slot_index(key)];
}

location_element& my_element(waiter* me) {
  auto* e = static_cast<location_element*>(me->location_element);
  if (e == nullptr) {
    e = new location_element;  // never deleted: it lives as long as the waiter record
    e->who = me;
    me->location_element = e;
  }
  return *e;
}

// Releases every element of a detached chain. Reads each element's successor
// before releasing it: once its gate is 1 its owner may push it elsewhere.
void release_all(location_element* e) noexcept {
  while (e != nullptr) {
    location_element* k = e;
    e = k->succ.load(std::memory_order_relaxed);  // ordered by the detaching acquire
    waiter* who = k->who;
    k->gate.store(1, std::memory_order_release);
    unpark(who);  // type-stable: harmless if the owner has moved on
  }
}

void await_release(location_element& e) {
  while (e.gate.load(std::memory_order_acquire) == 0) park();
}

}  // namespace

namespace detail {
std::uint32_t location_slot_index(std::uintptr_t key) noexcept {
  if (key == 0) key = 0xD1CE;  // as the listing: 0 is a key like any other
  return mix32(static_cast<std::uint32_t>(key ^ (key >> 32))) & (kSlots - 1);
}
}  // namespace detail

void location_wait(std::uintptr_t key) {
  location_slot* s = &slot_for(key);
  waiter* me = self();
  location_element& e = my_element(me);
  // Emplaced by this owner's previous call: now actually wait. (Emplaced by an
  // earlier owner of a recycled record, it is stranded: that owner's caller
  // never ratified anything for us, so it is flushed like any stranded one.)
  if (e.where == s && e.generation == me->generation) {
    await_release(e);
    e.where = nullptr;
    e.succ.store(nullptr, std::memory_order_relaxed);
    return;
  }
  if (e.where != nullptr) {
    // Stranded on another chain by an earlier wait loop that ended without
    // waiting: flush that chain and wait until our element is released.
    if (e.gate.load(std::memory_order_acquire) == 0) {
      release_all(e.where->chain.exchange(nullptr, std::memory_order_acq_rel));
      await_release(e);
    }
    e.where = nullptr;
    e.succ.store(nullptr, std::memory_order_relaxed);
  }
  // Free: emplace on s and return, so the caller ratifies its condition.
  e.where = s;
  e.generation = me->generation;
  e.gate.store(0, std::memory_order_relaxed);
  location_element* succ = nullptr;
  e.succ.store(nullptr, std::memory_order_relaxed);
  // seq_cst: the Dekker pivot with location_wake_all (release also publishes
  // gate and succ to whoever detaches the chain).
  while (!s->chain.compare_exchange_weak(succ, &e, std::memory_order_seq_cst,
                                         std::memory_order_relaxed)) {
    e.succ.store(succ, std::memory_order_relaxed);
  }
#if !defined(__SANITIZE_THREAD__)
  // The caller's next load of its condition may be relaxed: keep it after the push.
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

void location_wake_all(std::uintptr_t key) noexcept {
  location_slot& s = slot_for(key);
#if defined(__SANITIZE_THREAD__)
  // TSan does not model fences: the exchange alone orders the condition store.
  release_all(s.chain.exchange(nullptr, std::memory_order_seq_cst));
#else
  // Polite: a fence keeps the caller's condition store before the load, and an
  // empty chain costs no RMW.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (s.chain.load(std::memory_order_relaxed) == nullptr) return;
  release_all(s.chain.exchange(nullptr, std::memory_order_acq_rel));
#endif
}

}  // namespace tessera
