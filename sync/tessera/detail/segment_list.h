// tessera/detail/segment_list.h — the infinite array of cells under the segment
// queue synchronizer (segment_queue.h) and the lock-free channel
// (lockfree_channel.h): cells allocated in segments of N, reached from
// `Sides` moving pointers (one per index that walks the array), and reclaimed
// oldest first.
//
// Reclamation (model-checked in tests/model/segment_queue.pml): a segment is
// reclaimed once every side's pointer has passed it and no operation holds
// it. An operation raises the count of the segment it loaded from a pointer,
// then loads the pointer again (hold()); walking forward it holds each next
// segment before it lets go of the last. Reclamation stops at the first held
// segment, so holding a segment protects every later one. Reclaimed segments
// are kept for reuse by the same list (type-stable: a stale raise touches a
// segment, never freed memory) and deleted with it. Why this is sound, with
// seq_cst on both sides: if the reclaimer read a count of 0, the raise came
// later, so the operation's second load sees a pointer that has moved on
// (pointers only move forward) and it lets go and starts over — unless the
// segment was reused and became that pointer's segment again, and then
// holding it is holding the current segment, which is correct.
//
// Cell requirements: default constructible, and `void reset() noexcept`
// (called on a segment before it is linked, fresh or reused; the cells of a
// reclaimed segment are all in a final state, owning nothing).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>

#include "tessera/detail/spin_lock.h"

namespace tessera::detail {

template <class Cell, std::size_t N, std::size_t Sides = 2>
class segment_list {
 public:
  static constexpr std::size_t kCells = N;

  struct alignas(64) segment {  // aligned: a segment* has 6 low bits free
    std::atomic<std::uint64_t> id{0};
    std::atomic<segment*> next{nullptr};
    // Operations in or walking from here, one count per side (so that the
    // sides do not share a contended line): held while any is nonzero.
    struct alignas(64) count {
      std::atomic<std::int64_t> n{0};
    };
    count holds[Sides];
    bool held() const noexcept {
      for (const auto& h : holds) {
        if (h.n.load(std::memory_order_seq_cst) != 0) return true;
      }
      return false;
    }
    segment* free_next = nullptr;  // on the free list; guarded by lock_
    Cell cells[N];
  };

  /// `sides`: how many of the Sides pointers move (the rest are ignored by
  /// reclamation).
  explicit segment_list(std::size_t sides = Sides) : active_(sides) {
    first_ = allocate(0);
    for (auto& side : sides_) side.p.store(first_, std::memory_order_relaxed);
  }
  ~segment_list() {
    for (segment* s = first_; s != nullptr;) delete std::exchange(s, s->next.load());
    for (segment* s = free_; s != nullptr;) delete std::exchange(s, s->free_next);
  }
  segment_list(const segment_list&) = delete;
  segment_list& operator=(const segment_list&) = delete;

  /// Side k's pointer (enqueue/dequeue; send/receive/buffer end).
  std::atomic<segment*>& side(std::size_t k) noexcept { return sides_[k].p; }

  /// Holds the segment side k's pointer names (raise, then check it is still
  /// there), on side k's count.
  segment* hold(std::size_t k) noexcept {
    const std::atomic<segment*>& from = side(k);
    for (;;) {
      segment* s = from.load(std::memory_order_seq_cst);
      s->holds[k].n.fetch_add(1, std::memory_order_seq_cst);
      if (from.load(std::memory_order_seq_cst) == s) return s;
      drop(s, k);
    }
  }
  /// Lets go of `s`, held on side k's count. If side k's pointer has moved
  /// past it, reclamation may have stopped at it: look again.
  void drop(segment* s, std::size_t k) noexcept {
    s->holds[k].n.fetch_sub(1, std::memory_order_seq_cst);
    if (side(k).load(std::memory_order_relaxed) != s) reclaim();
  }

  /// From a segment held on side k's count, the segment `id` (created as
  /// needed), held the same way; moves side k's pointer forward to it (if
  /// `move`) and reclaims. Drops `s`. Never returns a segment before `s`:
  /// with id < s's id it returns `s`.
  segment* walk(segment* s, std::uint64_t id, std::size_t k, bool move = true) {
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
      n->holds[k].n.fetch_add(1, std::memory_order_seq_cst);
      s->holds[k].n.fetch_sub(1, std::memory_order_seq_cst);
      s = n;
    }
    if (!move) return s;
    std::atomic<segment*>* ptr = &side(k);
    bool moved = false;
    for (segment* cur = ptr->load(std::memory_order_acquire);
         cur->id.load(std::memory_order_acquire) < s->id.load(std::memory_order_relaxed);) {
      if (ptr->compare_exchange_weak(cur, s, std::memory_order_seq_cst)) {
        moved = true;
        break;
      }
    }
    if (moved) reclaim();
    return s;
  }

  /// The held segment and the cell of index `i`, walking from `held` (from
  /// hold(k), called *before* `i` was taken from its counter, so that it is
  /// not past i's) and moving side k's pointer forward.
  std::pair<segment*, Cell*> at(segment* held, std::uint64_t i, std::size_t k) {
    segment* s = walk(held, i / N, k);
    return {s, &s->cells[i % N]};
  }

  /// Segments allocated and not reclaimed (for tests of the reclamation).
  std::size_t live_segments() const noexcept { return live_.load(std::memory_order_relaxed); }

  /// Visits every cell of every segment not reclaimed, oldest first, as
  /// fn(index, cell). Only with no operation running (destructors).
  template <class Fn>
  void for_each_quiescent(Fn&& fn) {
    for (segment* s = first_; s != nullptr; s = s->next.load(std::memory_order_relaxed)) {
      for (std::size_t k = 0; k < N; ++k)
        fn(s->id.load(std::memory_order_relaxed) * N + k, s->cells[k]);
    }
  }

 private:
  segment* allocate(std::uint64_t id) {
    segment* s = nullptr;
    {
      std::lock_guard lock(lock_);
      if (free_ != nullptr) s = std::exchange(free_, free_->free_next);
    }
    if (s == nullptr) s = new segment;
    s->free_next = nullptr;
    s->next.store(nullptr, std::memory_order_relaxed);
    for (auto& c : s->cells) c.reset();
    s->id.store(id, std::memory_order_relaxed);
    live_.fetch_add(1, std::memory_order_relaxed);
    return s;  // published by the release CAS that links it
  }

  void reclaim() noexcept {
    // One reclaimer at a time; a call that finds another at work leaves it a
    // request, which it sees before it goes (so no pointer move is missed).
    reclaim_wanted_.store(true, std::memory_order_seq_cst);
    while (reclaim_wanted_.load(std::memory_order_seq_cst) && reclaim_lock_.try_lock()) {
      reclaim_wanted_.store(false, std::memory_order_seq_cst);
      reclaim_locked();
      reclaim_lock_.unlock();
    }
  }
  void reclaim_locked() noexcept {
    std::lock_guard lock(lock_);  // the free list
    // Under reclaim_lock_: the pointers' segments cannot be reclaimed but by us.
    std::uint64_t passed = ~std::uint64_t{0};
    for (std::size_t k = 0; k < active_; ++k) {
      passed = std::min(passed, sides_[k].p.load(std::memory_order_seq_cst)->id.load());
    }
    while (first_->id.load(std::memory_order_relaxed) < passed && !first_->held()) {
      segment* s = first_;
      first_ = s->next.load(std::memory_order_acquire);
      s->free_next = free_;
      free_ = s;
      live_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  struct alignas(64) side_ptr {
    std::atomic<segment*> p;
  };
  side_ptr sides_[Sides];
  const std::size_t active_;
  alignas(64) std::atomic<std::size_t> live_{0};
  spin_lock lock_;          // the free list (once per N operations)
  spin_lock reclaim_lock_;  // one reclaimer at a time
  std::atomic<bool> reclaim_wanted_{false};
  segment* first_ = nullptr;  // the oldest segment not reclaimed; guarded by reclaim_lock_
  segment* free_ = nullptr;   // reclaimed segments for reuse; guarded by lock_
};

}  // namespace tessera::detail
