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
// Memory. A segment whose cells were all cancelled (or broken) is removed
// from the middle of the list, as CQS does, and reused once nothing can reach
// it (tessera/detail/segment_list.h): a semaphore whose waiters all time out
// and which is never released keeps a bounded number of segments, not one
// per kSegmentCells timed-out waits. A resume() whose index falls in a
// removed segment fails as at a cancelled cell, and its caller pays that
// cell's debt as usual. Segments behind both indices are reclaimed as soon as
// no operation holds them (the hold protocol, the same file).
#include "tessera/detail/segment_queue.h"

#include <tessera/detail/cpu.h>
#include <tessera/park.h>

#include <optional>

namespace tessera::detail {
namespace {
// A waiter* is above the states, and even; hand-overs are odd (kPermit, or an
// element pointer with its low bit set); kBroken is odd and no hand-over.
bool is_waiter(std::uintptr_t v) noexcept {
  return v >= 8 && (v & 1) == 0;
}

struct unpark_fn {
  waiter* who;
  void operator()() const noexcept { unpark(who); }
};
}  // namespace

std::uintptr_t segment_queue::suspend(deadline d, const char* kind, const void* object,
                                      const std::stop_token* stop) {
  list::segment* held = cells_.hold(0);
  const std::uint64_t i = enq_.fetch_add(1, std::memory_order_seq_cst);
  const auto [s, c] = cells_.at(held, i, 0);
  // (A segment is removed only once all its suspenders have come and gone.)
  std::atomic<std::uintptr_t>& cell = c->word;
  waiter* me = self();
  const auto mine = reinterpret_cast<std::uintptr_t>(me);
  std::uintptr_t seen = kEmpty;
  if (!cell.compare_exchange_strong(seen, mine, std::memory_order_acq_rel)) {
    // A resume() came first: it left its hand-over (async), or broke the
    // cell (sync), which stays BROKEN and counts as cancelled.
    if (seen != kBroken) {
      cell.store(kTaken, std::memory_order_relaxed);
    } else {
      cells_.cancelled(s);
    }
    cells_.drop(s, 0);
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
  } else {
    cells_.cancelled(s);
  }
  cells_.drop(s, 0);
  return handed;
}

bool segment_queue::resume(std::uintptr_t handover, resume_mode mode) {
  list::segment* held = cells_.hold(1);
  const std::uint64_t i = deq_.fetch_add(1, std::memory_order_seq_cst);
  const auto [s, c] = cells_.at(held, i, 1);
  if (c == nullptr) {  // i's segment was removed: its cells were all cancelled
    cells_.drop(s, 1);
    return false;
  }
  std::atomic<std::uintptr_t>& cell = c->word;
  std::uintptr_t seen = kEmpty;
  if (mode == resume_mode::sync) {
    // Wait a little for the suspender; if it does not come, break the cell.
    // A failed CAS means it came just now: `seen` is then what it left.
    for (std::uint32_t k = 0; k < kSyncSpins && seen == kEmpty; ++k) {
      cpu_relax();
      seen = cell.load(std::memory_order_acquire);
    }
    if (seen == kEmpty && cell.compare_exchange_strong(seen, kBroken, std::memory_order_acq_rel)) {
      cells_.drop(s, 1);
      return false;
    }
  } else if (cell.compare_exchange_strong(seen, handover, std::memory_order_acq_rel)) {
    cells_.drop(s, 1);  // left for the suspender on its way
    return true;
  }
  // `seen` is the waiter*, or CANCELLED: the waiter gave up before we came.
  const bool ok =
      is_waiter(seen) && cell.compare_exchange_strong(seen, handover, std::memory_order_acq_rel);
  if (ok) {
    // Poke the waiter behind it, so that it spins as the next in line
    // (the TWA semaphore's successor-of-successor wake-up).
    if ((i + 1) % kSegmentCells != 0) {
      const std::uintptr_t behind =
          s->cells[(i + 1) % kSegmentCells].word.load(std::memory_order_acquire);
      if (is_waiter(behind) && should_spin()) unpark(reinterpret_cast<waiter*>(behind));
    }
    unpark(reinterpret_cast<waiter*>(seen));
  }
  cells_.drop(s, 1);
  return ok;
}

}  // namespace tessera::detail
