// The segment queue synchronizer (tessera/detail/segment_queue.h).
//
// Why simple cancellation. A waiter that times out only marks its cell
// CANCELLED and leaves; the resume() that later meets the cell fails and its
// caller retries. For the semaphore that is exactly right: the timed-out
// acquirer's decrement of the permit count is still there, and the release
// that meets its cell pays it back with the first of its increments, then
// increments again for its own permit (kotlinx's Semaphore does the same). The
// smart form (the canceller gives its decrement back itself and marks the
// cell so that resume skips it, or refuses a hand-over already counted) saves
// the retry but adds a state and a race with the resumer; a retry is one
// fetch-and-add and one cell, paid once per cancelled wait.
//
// Memory. Cells between the dequeue and the enqueue index stay allocated,
// cancelled ones included, until resumes pass them: a semaphore whose
// waiters all time out and which is never released keeps a segment per
// kSegmentCells timed-out waits (CQS removes a segment whose cells are all
// cancelled from the middle of the list; not done here). Segments behind both
// indices are reclaimed as soon as no operation holds them.
//
// Hold protocol (why a held segment cannot be reclaimed, seq_cst on both
// sides): an operation raises `holds` of the segment it loaded from head_ or
// tail_, then loads the pointer again; the reclaimer checks that both pointers
// have passed the segment, then reads `holds`. If the reclaimer read 0, the
// raise came later, so the second load sees a pointer that has moved on (they
// only move forward) and the operation lets go and starts over — unless the
// segment was reclaimed, reused and became that pointer's segment again, in
// which case holding it is holding the current segment, which is correct.
#include "tessera/detail/segment_queue.h"

#include <tessera/detail/cpu.h>
#include <tessera/park.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <optional>
#include <utility>

namespace tessera::detail {
namespace {
// A waiter* is above the states, and even; hand-overs are odd (kPermit, or an
// element pointer with its low bit set).
bool is_waiter(std::uintptr_t v) noexcept {
  return v >= 4 && (v & 1) == 0;
}

struct unpark_fn {
  waiter* who;
  void operator()() const noexcept { unpark(who); }
};
}  // namespace

segment_queue::segment_queue() {
  first_ = allocate(0);  // after free_ and lock_ are initialised
  tail_.store(first_, std::memory_order_relaxed);
  head_.store(first_, std::memory_order_relaxed);
}

segment_queue::~segment_queue() {
  for (segment* s = first_; s != nullptr;) delete std::exchange(s, s->next.load());
  for (segment* s = free_; s != nullptr;) delete std::exchange(s, s->free_next);
}

segment_queue::segment* segment_queue::allocate(std::uint64_t id) {
  segment* s = nullptr;
  {
    std::lock_guard lock(lock_);
    if (free_ != nullptr) s = std::exchange(free_, free_->free_next);
  }
  if (s == nullptr) s = new segment;
  s->free_next = nullptr;
  s->next.store(nullptr, std::memory_order_relaxed);
  for (auto& c : s->cells) c.store(kEmpty, std::memory_order_relaxed);
  s->id.store(id, std::memory_order_relaxed);
  live_.fetch_add(1, std::memory_order_relaxed);
  return s;  // published by the release CAS that links it
}

segment_queue::segment* segment_queue::hold(const std::atomic<segment*>& from) noexcept {
  for (;;) {
    segment* s = from.load(std::memory_order_seq_cst);
    s->holds.fetch_add(1, std::memory_order_seq_cst);
    if (from.load(std::memory_order_seq_cst) == s) return s;
    drop(s);
  }
}

segment_queue::segment* segment_queue::walk(segment* s, std::uint64_t id,
                                            std::atomic<segment*>& ptr) {
  while (s->id.load(std::memory_order_acquire) < id) {
    segment* n = s->next.load(std::memory_order_acquire);
    if (n == nullptr) {
      segment* fresh = allocate(s->id.load(std::memory_order_relaxed) + 1);
      if (s->next.compare_exchange_strong(n, fresh, std::memory_order_acq_rel)) {
        n = fresh;
      } else {
        // Another operation linked one first: ours goes back for reuse.
        live_.fetch_sub(1, std::memory_order_relaxed);
        std::lock_guard lock(lock_);
        fresh->free_next = free_;
        free_ = fresh;
      }
    }
    // `s` is held, so reclamation stops at or before it: `n` is safe to hold.
    n->holds.fetch_add(1, std::memory_order_seq_cst);
    drop(s);
    s = n;
  }
  // Move the pointer forward to `s` (never back).
  bool moved = false;
  for (segment* cur = ptr.load(std::memory_order_acquire);
       cur->id.load(std::memory_order_acquire) < s->id.load(std::memory_order_relaxed);) {
    if (ptr.compare_exchange_weak(cur, s, std::memory_order_seq_cst)) {
      moved = true;
      break;
    }
  }
  if (moved) reclaim();
  return s;
}

void segment_queue::reclaim() noexcept {
  if (!lock_.try_lock()) return;  // someone else reclaims; the next move retries
  // Under lock_: head_'s and tail_'s segments cannot be reclaimed but by us.
  const std::uint64_t passed = std::min(head_.load(std::memory_order_seq_cst)->id.load(),
                                        tail_.load(std::memory_order_seq_cst)->id.load());
  while (first_->id.load(std::memory_order_relaxed) < passed &&
         first_->holds.load(std::memory_order_seq_cst) == 0) {
    segment* s = first_;
    first_ = s->next.load(std::memory_order_acquire);
    s->free_next = free_;
    free_ = s;
    live_.fetch_sub(1, std::memory_order_relaxed);
  }
  lock_.unlock();
}

std::uintptr_t segment_queue::suspend(deadline d, const char* kind, const void* object,
                                      const std::stop_token* stop) {
  segment* s = hold(tail_);
  const std::uint64_t i = enq_.fetch_add(1, std::memory_order_seq_cst);
  s = walk(s, i / kSegmentCells, tail_);
  std::atomic<std::uintptr_t>& cell = s->cells[i % kSegmentCells];
  waiter* me = self();
  const auto mine = reinterpret_cast<std::uintptr_t>(me);
  std::uintptr_t seen = kEmpty;
  if (!cell.compare_exchange_strong(seen, mine, std::memory_order_acq_rel)) {
    // A resume() came first and left its hand-over.
    cell.store(kTaken, std::memory_order_relaxed);
    drop(s);
    return seen;
  }
  // An OS thread next in line spins a little first, as the TWA semaphore's
  // short-term waiter does: a hand-off to a spinning thread costs no futex
  // wake-up. Fibers never spin (their park is a user-space switch). A thread
  // parked further back is poked by the resume before its own (below) and
  // spins from then on.
  const bool spinner = should_spin();
  auto spin_if_next = [&] {
    if (!spinner || i > deq_.load(std::memory_order_relaxed)) return false;
    for (std::uint32_t k = 0; k < kSpins; ++k) {
      if (cell.load(std::memory_order_acquire) != mine) return true;
      cpu_relax();
    }
    return false;
  };
  bool cancelled = false;
  if (!spin_if_next()) {
    const wait_scope scope(kind, object);
    parked_.fetch_add(1, std::memory_order_relaxed);
    // A stop request unparks us; we then cancel as at a deadline.
    std::optional<std::stop_callback<unpark_fn>> on_stop;
    if (stop != nullptr && stop->stop_possible()) on_stop.emplace(*stop, unpark_fn{me});
    while (cell.load(std::memory_order_acquire) == mine) {
      const bool stopped = stop != nullptr && stop->stop_requested();
      if (!stopped && !d) {
        park();
        if (spin_if_next()) break;
        continue;
      }
      if (!stopped && park_until(*d)) {
        if (spin_if_next()) break;
        continue;
      }
      // The deadline passed or a stop was requested: cancel, unless a
      // resume() got here first.
      std::uintptr_t expected = mine;
      cancelled = cell.compare_exchange_strong(expected, kCancelled, std::memory_order_acq_rel);
      break;
    }
    parked_.fetch_sub(1, std::memory_order_relaxed);
  }
  std::uintptr_t handed = 0;
  if (!cancelled) {
    handed = cell.load(std::memory_order_acquire);
    cell.store(kTaken, std::memory_order_relaxed);
  }
  drop(s);
  return handed;
}

bool segment_queue::resume(std::uintptr_t handover) {
  segment* s = hold(head_);
  const std::uint64_t i = deq_.fetch_add(1, std::memory_order_seq_cst);
  s = walk(s, i / kSegmentCells, head_);
  std::atomic<std::uintptr_t>& cell = s->cells[i % kSegmentCells];
  std::uintptr_t seen = kEmpty;
  bool ok = true;
  if (!cell.compare_exchange_strong(seen, handover, std::memory_order_acq_rel)) {
    if (is_waiter(seen) &&
        cell.compare_exchange_strong(seen, handover, std::memory_order_acq_rel)) {
      // Poke the waiter behind it, so that it spins as the next in line
      // (the TWA semaphore's successor-of-successor wake-up).
      if ((i + 1) % kSegmentCells != 0) {
        const std::uintptr_t behind =
            s->cells[(i + 1) % kSegmentCells].load(std::memory_order_acquire);
        if (is_waiter(behind) && should_spin()) unpark(reinterpret_cast<waiter*>(behind));
      }
      unpark(reinterpret_cast<waiter*>(seen));
    } else {
      ok = false;  // CANCELLED: the waiter gave up before we came
    }
  }
  drop(s);
  return ok;
}

}  // namespace tessera::detail
